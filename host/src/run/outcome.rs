//! How a run ends: a stop or trap becomes a typed failure, and the result is assembled so that
//! logs plus value or message fit the output cap.

use codemode_runtime::code::{CallRecord, FailureCause, FailureKind, RunFailure, RunResult};
use codemode_runtime::ledger::{fit_failure, overflow_message, Ledger};
use wasmtime::Trap;

use crate::config::Budgets;

use crate::store::{Outcome, Stop};

/// The failure a stopped or trapped guest becomes.
pub(super) fn failure_from_error(
    error: &wasmtime::Error,
    budgets: &Budgets,
    memory_hit: bool,
) -> RunFailure {
    if let Some(stop) = error.downcast_ref::<Stop>() {
        return failure_from_stop(stop, budgets);
    }
    if memory_hit {
        return failure_from_stop(&Stop::Memory, budgets);
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => RunFailure::new(
            FailureKind::Timeout,
            format!(
                "compute budget exhausted ({}ms busy, {} fuel)",
                budgets.compute_ms,
                budgets.fuel()
            ),
        )
        .with_cause(FailureCause::Compute),
        Some(Trap::StackOverflow) => RunFailure::new(
            FailureKind::WorkerExit,
            "sandbox stack exhausted: the program or a value nests too deeply",
        )
        .with_cause(FailureCause::Stack),
        Some(Trap::MemoryOutOfBounds) => RunFailure::new(
            FailureKind::WorkerExit,
            "sandbox stack exhausted (out-of-bounds access): the program or a value nests too deeply",
        )
        .with_cause(FailureCause::Stack),
        Some(Trap::Interrupt) => failure_from_stop(&Stop::Wall, budgets),
        Some(trap) => RunFailure::new(
            FailureKind::WorkerExit,
            format!("worker error: sandbox trapped: {trap}"),
        )
        .with_cause(FailureCause::Trap),
        None => RunFailure::new(FailureKind::WorkerExit, format!("worker error: {error:#}"))
            .with_cause(FailureCause::Trap),
    }
}

pub(crate) fn failure_from_stop(stop: &Stop, budgets: &Budgets) -> RunFailure {
    match stop {
        Stop::Aborted(reason) => RunFailure::new(FailureKind::Abort, reason.clone()),
        Stop::Wall => RunFailure::new(
            FailureKind::Timeout,
            format!("wall-clock ceiling reached ({}ms)", budgets.wall_ms),
        )
        .with_cause(FailureCause::Wall),
        Stop::Exit(code) => RunFailure::new(
            FailureKind::WorkerExit,
            format!("worker exited with code {code} before completing"),
        )
        .with_cause(FailureCause::Trap),
        Stop::Memory => RunFailure::new(
            FailureKind::WorkerExit,
            format!("memory limit exceeded ({} MiB)", budgets.memory_mb),
        )
        .with_cause(FailureCause::Memory),
        Stop::HeldMemory => RunFailure::new(
            FailureKind::WorkerExit,
            format!(
                "memory limit exceeded ({} MiB): the tool results waiting for the program, with the arguments of its calls in flight, would take more host memory than that; await results before starting more calls, or ask for less at once",
                budgets.memory_mb
            ),
        )
        .with_cause(FailureCause::Memory),
        Stop::Settled => {
            RunFailure::new(FailureKind::WorkerExit, "worker exited before completing")
                .with_cause(FailureCause::Trap)
        }
    }
}

/// A failure that never reached a sandbox, passed through the same ledger.
pub(crate) fn failure_before_start(failure: RunFailure, budgets: &Budgets) -> RunResult {
    finalize(
        Vec::new(),
        &Ledger::new(budgets.max_output_bytes),
        Outcome::Failure(failure),
        Vec::new(),
    )
}

/// Assembles the result so that logs plus value or message always fit the output cap.
pub(super) fn finalize(
    mut logs: Vec<String>,
    ledger: &Ledger,
    outcome: Outcome,
    calls: Vec<CallRecord>,
) -> RunResult {
    let max = ledger.max();
    match outcome {
        Outcome::Value(value) if !ledger.overflowed() => RunResult {
            value,
            logs,
            error: None,
            calls,
            hint: None,
            paused: None,
            compute_fuel: None,
        },
        Outcome::Value(_) => {
            let mut message = overflow_message(max);
            fit_failure(&mut logs, &mut message, max);
            RunResult {
                value: None,
                logs,
                error: Some(RunFailure::new(FailureKind::OutputLimit, message)),
                calls,
                hint: None,
                paused: None,
                compute_fuel: None,
            }
        }
        Outcome::Failure(mut failure) => {
            if ledger.overflowed() || !ledger.message_fits(&failure.message) {
                failure = RunFailure::new(FailureKind::OutputLimit, overflow_message(max));
            }
            fit_failure(&mut logs, &mut failure.message, max);
            RunResult {
                value: None,
                logs,
                error: Some(failure),
                calls,
                hint: None,
                paused: None,
                compute_fuel: None,
            }
        }
    }
}

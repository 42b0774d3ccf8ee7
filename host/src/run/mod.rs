//! One run: a fresh store and instance, the host-driven event loop, and settlement.
//!
//! The guest returns to the host whenever it waits. The host then waits (burning no fuel) for
//! the next binding completion or timer, delivers it, and calls back in. In-flight binding
//! futures live in this run's own task. Exactly one outcome wins: the first `done`, overflow,
//! trap, abort or deadline settles the run and everything after it is ignored. A run never
//! returns before every binding call it started has finished.
//!
//! The store's data, [`RunState`] (everything the guest's imports can see: calls in flight,
//! timers, logs, the ledger), is `crate::store`'s. The run's parts, one module each:
//! - `event_loop`: instantiating the guest and driving it from wait to wait;
//! - `outcome`: how a stop, a trap or a finished run becomes the result;
//! - `admission`: waiting for an instance slot and a share of the memory cap;
//! - `pause`: writing a paused run down and making a fresh instance continue it;
//! - `stack`: a waiting run giving its dead stack pages back to the kernel.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use codemode_runtime::code::{
    BindingNamespace, BindingRef, CallCaps, FailureCause, FailureKind, RunFailure, RunResult,
};
use codemode_runtime::held::HeldMemory;
use codemode_runtime::json;
use codemode_runtime::signal::AbortSignal;
use futures::stream::StreamExt;
use serde_json::Value;
use wasmtime::{InstancePre, Store, UpdateDeadline};

use crate::config::Budgets;
use crate::durable::memory::Image;
use crate::durable::{record, Durability, KeepError};
use crate::interruption::Interruption;
use crate::meter;
use crate::store::{enforce_memory_budget, Meter, Outcome, RunState, Stop};
use crate::wire;

mod admission;
mod event_loop;
mod outcome;
mod pause;
mod stack;

pub(crate) use admission::{Admission, MemoryCap};
pub(crate) use outcome::{failure_before_start, failure_from_stop};
pub(crate) use pause::{pristine_memory, read_approval};

use admission::admit;
use event_loop::drive;
use outcome::finalize;
use pause::pause;

/// How long a settled run waits, past its wall budget, for bindings that ignore their signal.
const SETTLE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// What one run cost, for benchmarks and for hosts that meter usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunMetrics {
    /// Time spent erasing TypeScript types.
    pub strip: std::time::Duration,
    /// Time spent reading the stripped program once more: preflight and its completion value.
    pub preflight: std::time::Duration,
    /// Time from an empty store to a ready instance.
    pub instantiate: std::time::Duration,
    /// Time from the start of the run to its result.
    pub total: std::time::Duration,
    /// Fuel the guest burned (see `FUEL_PER_MS`).
    pub fuel_consumed: u64,
    /// Time spent writing a paused run down (diff, compression, the store's write).
    pub pause: std::time::Duration,
    /// Size of the record a pause wrote.
    pub record_bytes: u64,
    /// Time a resume spent before the guest ran: reading and checking the record, claiming it,
    /// restoring memory and globals.
    pub restore: std::time::Duration,
    /// How many times the run gave its stack pages back while waiting (see `GIVE_BACK_AFTER`).
    pub stack_given_back: u32,
}

/// How a run begins.
pub(crate) enum Start<'a> {
    /// Evaluate this (already stripped) JavaScript, with a global `fetch` through this binding
    /// function when there is one.
    Program(&'a str, Option<&'a BindingRef>),
    /// Continue a paused run from its record.
    Resumed(Box<Resumed>),
}

/// A checked and claimed record, and the answers to deliver first.
pub(crate) struct Resumed {
    pub header: record::Header,
    pub runs: Vec<u8>,
    pub replies: Vec<(u32, Result<Value, String>)>,
}

/// What a run that may pause needs to write itself down.
pub(crate) struct Keeping<'a> {
    pub durability: &'a Durability,
    /// The SHA-256 of the guest the run is in: a paused run resumes only in the same guest.
    pub guest: &'static str,
    pub image: Arc<Image>,
    /// The TypeScript the model wrote, kept for positions in later failures.
    pub program: &'a str,
    pub pause_on: BTreeSet<BindingRef>,
    pub approve_on: BTreeSet<BindingRef>,
    /// Calls that may need a person's input, which pause the run when they do.
    pub input_calls: Option<Arc<dyn codemode_runtime::code::InputCalls>>,
}

/// Runs `start` in a fresh instance of `pre`, once `admission` admits it.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn execute(
    interruption: Interruption,
    pre: &InstancePre<RunState>,
    admission: Admission<'_>,
    budgets: &Budgets,
    start: Start<'_>,
    bindings: Vec<BindingNamespace>,
    held: Option<Arc<HeldMemory>>,
    control: AbortSignal,
    keeping: Option<Keeping<'_>>,
    call_caps: CallCaps,
    metrics: &mut RunMetrics,
) -> RunResult {
    let now = Instant::now();
    let (program, web_fetch, mut resumed) = match start {
        Start::Program(program, web_fetch) => (program, web_fetch, None),
        Start::Resumed(resumed) => ("", None, Some(resumed)),
    };
    // A resumed run's clock starts where the pause stopped it: time paused does not count.
    let spent = resumed.as_ref().map_or(std::time::Duration::ZERO, |r| {
        std::time::Duration::from_nanos(r.header.wall_spent_ns)
    });
    let started = now.checked_sub(spent).unwrap_or(now);
    let _admitted = match admit(&admission, &control, started + budgets.wall(), budgets).await {
        Ok(admitted) => admitted,
        Err(failure) => return failure_before_start(failure, budgets),
    };
    let boot = match resumed {
        Some(_) => Vec::new(),
        None => {
            let namespaces: Vec<wire::Namespace<'_>> = bindings
                .iter()
                .map(|ns| wire::Namespace {
                    global: &ns.global,
                    names: ns.functions.keys().map(String::as_str).collect(),
                    error_class: ns
                        .error_class
                        .as_ref()
                        .map(|c| (c.name.as_str(), c.member_name_property.as_str())),
                })
                .collect();
            // Only a member the program can call: a web fetch named elsewhere is none.
            let web_fetch = web_fetch.and_then(|at| {
                let index = bindings
                    .iter()
                    .position(|ns| ns.global == at.global && ns.functions.contains_key(&at.name))?;
                Some((u32::try_from(index).ok()?, at.name.as_str()))
            });
            wire::Boot {
                program,
                namespaces,
                web_fetch,
            }
            .encode()
        }
    };
    let mut state = RunState::new(budgets, boot, bindings, control, started);
    state.call_caps = call_caps;
    if let Some(held) = held {
        state.share_held(held);
    }
    if let Some(keeping) = &keeping {
        state.pause_on = keeping.pause_on.clone();
        state.approve_on = keeping.approve_on.clone();
        state.pause_threshold = keeping.durability.threshold();
        state.input_calls = keeping.input_calls.clone();
    }
    let mut fuel_before = 0;
    if let Some(resumed) = resumed.as_deref_mut() {
        fuel_before = resumed.header.fuel_spent;
        state.restore(&resumed.header.host);
        for (id, reply) in std::mem::take(&mut resumed.replies) {
            state.answer(id, reply);
        }
    }
    let mut store = Store::new(pre.module().engine(), state);
    enforce_memory_budget(&mut store);
    // Compute spent before a pause counts after it.
    let fuel = budgets.fuel().saturating_sub(fuel_before);
    if interruption.fuel() {
        store.data_mut().meter = Some(Meter::new(fuel));
    }
    if interruption.epoch() {
        store.set_epoch_deadline(1);
        let watch = store.data().watch();
        store.epoch_deadline_callback(move |_| match watch.stop() {
            Some(stop) => Err(wasmtime::Error::new(stop)),
            None => Ok(UpdateDeadline::Yield(1)),
        });
    }

    let mut driven = drive(&mut store, pre, budgets, metrics, resumed.as_deref()).await;
    let paused = loop {
        if interruption.fuel() {
            metrics.fuel_consumed = fuel.saturating_sub(meter::left(&mut store));
        }
        let instance = match driven {
            Ok(Some(instance)) => instance,
            Ok(None) => break None,
            Err(failure) => {
                store.data_mut().settle(Outcome::Failure(failure));
                break None;
            }
        };
        // `drive` pauses only when the runtime keeps paused runs.
        let Some(keeping) = &keeping else {
            break None;
        };
        let spent = fuel_before + metrics.fuel_consumed;
        let pausing = Instant::now();
        match pause(&mut store, instance, keeping, budgets, spent).await {
            Ok((run, bytes)) => {
                metrics.pause = pausing.elapsed();
                metrics.record_bytes = bytes;
                break Some(run);
            }
            // Not written down, but whole in memory: the program gets the reason as the
            // calls' errors and may carry on without them (a denied approval makes nothing).
            Err(KeepError::OverQuota(message)) => {
                tracing::warn!("{message}");
                store.data_mut().refuse_pausing(&message);
                driven = event_loop::go_on(&mut store, instance, budgets, metrics).await;
            }
            Err(KeepError::Failed(message)) => {
                store.data_mut().settle(Outcome::Failure(
                    RunFailure::new(FailureKind::WorkerExit, message)
                        .with_cause(FailureCause::Trap),
                ));
                break None;
            }
        }
    };
    if let Some(paused) = paused {
        let state = store.into_data();
        let calls = state
            .calls
            .iter()
            .enumerate()
            .filter(|(slot, _)| !state.open_calls.values().any(|open| open.slot == *slot))
            .map(|(_, record)| record.clone())
            .collect();
        return RunResult {
            value: None,
            logs: state.logs,
            error: None,
            calls,
            hint: None,
            paused: Some(paused),
            compute_fuel: None,
        };
    }
    if store.data().outcome.is_none() {
        let failure = failure_from_stop(&Stop::Settled, budgets);
        store.data_mut().settle(Outcome::Failure(failure));
    }
    let mut state = store.into_data();
    // The run settled and told its running calls to stop. Wait for them, so no call outlives
    // its run, but never past the wall budget plus a short grace: a binding that ignores its
    // signal is left to finish on its own, its result dropped.
    let (mut in_flight, finished) = state.in_flight.take();
    for done in finished {
        if let Ok(value) = done.answer {
            json::drop_deep(value);
        }
    }
    let patience =
        tokio::time::Instant::from_std(state.watch.deadline.max(Instant::now()) + SETTLE_GRACE);
    let drained = tokio::time::timeout_at(patience, async {
        while let Some(done) = in_flight.next().await {
            if let Ok(value) = done.answer {
                json::drop_deep(value);
            }
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!("a binding ignored its run's end; it continues detached");
        tokio::spawn(in_flight.for_each(|_| std::future::ready(())));
    }
    let outcome = state.outcome.take().unwrap_or(Outcome::Value(None));
    finalize(
        std::mem::take(&mut state.logs),
        &state.ledger,
        outcome,
        std::mem::take(&mut state.calls),
    )
}

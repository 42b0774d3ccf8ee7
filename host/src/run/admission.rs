//! Admission: a run waits for one of the engine's instance slots and, under a memory cap, its
//! share of it, within its wall budget and until its abort.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use codemode_runtime::code::{FailureCause, FailureKind, RunFailure};
use codemode_runtime::signal::AbortSignal;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::config::Budgets;

use super::outcome::failure_from_stop;
use crate::store::Stop;

/// The most memory the budgets of a runtime's concurrent runs may add up to: a run holds
/// `memory_mb` permits of `permits` (one per MiB) from before its instance exists until it ends.
#[derive(Debug)]
pub(crate) struct MemoryCap {
    /// The cap in MiB; `permits` starts with this many.
    pub mb: u64,
    pub permits: Semaphore,
}

impl MemoryCap {
    pub fn new(mb: u64) -> Self {
        // Callers check `mb` against `Semaphore::MAX_PERMITS`; the clamp only keeps this total.
        let permits =
            usize::try_from(mb).map_or(Semaphore::MAX_PERMITS, |mb| mb.min(Semaphore::MAX_PERMITS));
        Self {
            mb,
            permits: Semaphore::new(permits),
        }
    }
}

/// What a run holds while its instance lives: one of the engine's slots and, under a memory
/// cap, its memory budget's share of the cap.
pub(crate) struct Admission<'a> {
    pub slots: &'a Semaphore,
    pub memory: Option<&'a MemoryCap>,
    /// Counts the runs waiting here, for the runtime's occupancy.
    pub waiting: &'a AtomicUsize,
}

/// Counts one waiting run until dropped.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn start(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The permits of an admitted run, returned when it ends.
pub(super) struct Admitted<'a> {
    _memory: Option<SemaphorePermit<'a>>,
    _slot: SemaphorePermit<'a>,
}

/// Waits for the run's share of the memory cap, then for one of the engine's instance slots
/// (always in this order, so that two runs never hold one each), within the run's wall budget
/// and until its abort: runs beyond either queue here instead of failing.
pub(super) async fn admit<'a>(
    admission: &Admission<'a>,
    control: &AbortSignal,
    deadline: Instant,
    budgets: &Budgets,
) -> Result<Admitted<'a>, RunFailure> {
    let _waiting = Waiting::start(admission.waiting);
    let memory = match admission.memory {
        None => None,
        Some(cap) => Some(take_memory(cap, control, deadline, budgets).await?),
    };
    let slot = take_slot(admission.slots, control, deadline, budgets).await?;
    Ok(Admitted {
        _memory: memory,
        _slot: slot,
    })
}

/// The run's memory budget out of `cap`, waiting within the wall budget.
async fn take_memory<'a>(
    cap: &'a MemoryCap,
    control: &AbortSignal,
    deadline: Instant,
    budgets: &Budgets,
) -> Result<SemaphorePermit<'a>, RunFailure> {
    let needed = match u32::try_from(budgets.memory_mb) {
        Ok(needed) if budgets.memory_mb <= cap.mb => needed,
        _ => {
            return Err(RunFailure::new(
                FailureKind::WorkerExit,
                format!(
                    "this run's memory budget ({} MiB) is larger than the memory all runs of this runtime may hold at once ({} MiB), so it can never start: lower the run's memory budget or raise the cap (--max-memory-mb on the CLI)",
                    budgets.memory_mb, cap.mb
                ),
            )
            .with_cause(FailureCause::Memory))
        }
    };
    let waited_for_memory = || {
        RunFailure::new(
            FailureKind::Timeout,
            format!(
                "wall-clock ceiling reached ({}ms) while waiting to start: the runs in progress hold the memory this runtime lets runs use at once ({} MiB), and this run needs {} MiB; retry when fewer runs are in progress, or raise the cap (--max-memory-mb on the CLI)",
                budgets.wall_ms, cap.mb, budgets.memory_mb
            ),
        )
        .with_cause(FailureCause::Wall)
    };
    wait_for_permit(
        cap.permits.try_acquire_many(needed),
        cap.permits.acquire_many(needed),
        control,
        deadline,
        budgets,
        waited_for_memory,
    )
    .await
}

/// Waits for one of the engine's instance slots, within the run's wall budget and until its
/// abort: more runs than slots queue here instead of failing.
async fn take_slot<'a>(
    slots: &'a Semaphore,
    control: &AbortSignal,
    deadline: Instant,
    budgets: &Budgets,
) -> Result<SemaphorePermit<'a>, RunFailure> {
    let waited = || failure_from_stop(&Stop::Wall, budgets);
    wait_for_permit(
        slots.try_acquire(),
        slots.acquire(),
        control,
        deadline,
        budgets,
        waited,
    )
    .await
}

/// A permit at once when `now` has one, else from `acquire` within the run's wall budget
/// (past it, `waited` says what for) and until its abort.
async fn wait_for_permit<'a>(
    now: Result<SemaphorePermit<'a>, tokio::sync::TryAcquireError>,
    acquire: impl std::future::Future<Output = Result<SemaphorePermit<'a>, tokio::sync::AcquireError>>,
    control: &AbortSignal,
    deadline: Instant,
    budgets: &Budgets,
    waited: impl FnOnce() -> RunFailure,
) -> Result<SemaphorePermit<'a>, RunFailure> {
    if let Ok(permit) = now {
        return Ok(permit);
    }
    tokio::select! {
        biased;
        reason = control.aborted() => Err(failure_from_stop(&Stop::Aborted(reason), budgets)),
        () = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => Err(waited()),
        // The semaphores are never closed.
        permit = acquire => permit.map_err(|_| failure_from_stop(&Stop::Settled, budgets)),
    }
}

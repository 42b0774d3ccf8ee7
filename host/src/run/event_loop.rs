//! The event loop: instantiate the guest, then alternate between running it and waiting (with
//! no fuel burned) for the next call completion, timer or clock.

use std::pin::Pin;
use std::time::Instant;

use codemode_runtime::code::{FailureCause, FailureKind, RunFailure};
use tracing::Instrument;
use wasmtime::{InstancePre, Store};

use crate::config::Budgets;
use crate::wire;

use super::outcome::{failure_from_error, failure_from_stop};
use super::pause::restore;
use super::stack::{self, GIVE_BACK_AFTER};
use super::{Resumed, RunMetrics};
use crate::store::{alongside_calls, RunState, Stop};

/// What the event loop does next.
enum Next {
    Deliver(Vec<u8>),
    Stop(Stop),
    NeverSettles,
    /// Everything left to wait on is a pausing call.
    Pause,
    /// The guest has waited long enough to give its stack back.
    GiveBackStack,
    /// Nothing for the guest: it goes on waiting.
    Wait,
}

/// The run's clocks, registered with tokio's timer once per run (the give-back clock again
/// after each give-back, at most every `GIVE_BACK_AFTER`) rather than once per event
/// (registering a sleep wakes the runtime's driver, a syscall per sub-call otherwise).
struct Clocks {
    wall: Pin<Box<tokio::time::Sleep>>,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The timer `timer` is armed for.
    armed: Option<(Instant, u32)>,
    /// When a wait next gives the stack back, if the guest has run since the last time; made
    /// at the run's first wait, so that a run that never waits (the fast path) pays nothing.
    give_back: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether the guest has run since its stack was last given back.
    stack_used: bool,
}

impl Clocks {
    fn new(deadline: Instant) -> Self {
        let deadline = tokio::time::Instant::from_std(deadline);
        Clocks {
            wall: Box::pin(tokio::time::sleep_until(deadline)),
            timer: Box::pin(tokio::time::sleep_until(deadline)),
            armed: None,
            give_back: None,
            stack_used: true,
        }
    }

    /// The stack was just given back: the next give-back is due a while from now, and only if
    /// the guest runs before it.
    fn stack_given_back(&mut self) {
        self.stack_used = false;
        // The clock exists: only it, made by the wait that fired it, gives the stack back.
        if let Some(clock) = &mut self.give_back {
            clock
                .as_mut()
                .reset(tokio::time::Instant::now() + GIVE_BACK_AFTER);
        }
    }
}

async fn next_event(state: &mut RunState, clocks: &mut Clocks) -> Next {
    if state.held.overdrawn() {
        return Next::Stop(Stop::HeldMemory);
    }
    if let Some(frame) = state.ready.pop_front() {
        return Next::Deliver(frame);
    }
    if !state.pausing.is_empty() && state.in_flight.is_empty() {
        let soon = Instant::now() + state.pause_threshold;
        if state.timers.first().is_none_or(|(at, _)| *at > soon) {
            return Next::Pause;
        }
    }
    if state.in_flight.is_empty() && state.timers.is_empty() {
        return Next::NeverSettles;
    }
    let next_timer = state.timers.first().copied();
    if let Some((at, _)) = next_timer {
        if clocks.armed != next_timer {
            clocks
                .timer
                .as_mut()
                .reset(tokio::time::Instant::from_std(at));
            clocks.armed = next_timer;
        }
    }
    let control = state.watch.control.clone();
    let calls = state.in_flight.clone();
    let give_back = clocks.give_back.get_or_insert_with(|| {
        let due = tokio::time::Instant::from_std(state.started + GIVE_BACK_AFTER);
        Box::pin(tokio::time::sleep_until(due))
    });
    tokio::select! {
        biased;
        reason = control.aborted() => Next::Stop(Stop::Aborted(reason)),
        () = clocks.wall.as_mut() => Next::Stop(Stop::Wall),
        // A due timer goes before calls that are ready at once, so a loop of instant calls
        // cannot starve it.
        () = clocks.timer.as_mut(), if next_timer.is_some() => {
            let Some((at, id)) = next_timer else { return Next::NeverSettles };
            state.timers.remove(&(at, id));
            state.timer_deadlines.remove(&id);
            clocks.armed = None;
            Next::Deliver(wire::encode_timer(id))
        }
        Some(done) = std::future::poll_fn(|cx| calls.poll_next(cx)), if !calls.is_empty() => {
            // An answer that overdrew the account was dropped: the run has passed its budget.
            if state.held.overdrawn() {
                return Next::Stop(Stop::HeldMemory);
            }
            match state.deliver(done) {
                Some(frame) => Next::Deliver(frame),
                // Kept for a person's input: the guest still waits.
                None => Next::Wait,
            }
        }
        // Last: a run with something to deliver has no time to give its stack back.
        () = give_back.as_mut(), if clocks.stack_used => Next::GiveBackStack,
    }
}

/// Instantiates the guest and runs its event loop until the run settles. `Err` is the failure
/// the host decided (a trap, a stop, a malformed guest); `Ok` means the run has its outcome.
pub(super) async fn drive(
    store: &mut Store<RunState>,
    pre: &InstancePre<RunState>,
    budgets: &Budgets,
    metrics: &mut RunMetrics,
    resumed: Option<&Resumed>,
) -> Result<Option<wasmtime::Instance>, RunFailure> {
    let instantiating = Instant::now();
    let instance = pre
        .instantiate_async(&mut *store)
        .instrument(tracing::info_span!("instantiate"))
        .await;
    metrics.instantiate = instantiating.elapsed();
    let instance = match instance {
        Ok(instance) => instance,
        Err(error) => {
            return Err(failure_from_error(
                &error,
                budgets,
                store.data().limiter.hit,
            ))
        }
    };
    let begin = match resumed {
        None => Begin::Run,
        Some(resumed) => Begin::Restore(resumed),
    };
    evaluate(store, instance, budgets, metrics, begin)
        .instrument(tracing::info_span!("evaluate"))
        .await
}

/// Goes on with a run whose pause was not written down (`Next::Pause` returned its
/// instance): the calls it would have paused at were answered, so it has something to wait on.
pub(super) async fn go_on(
    store: &mut Store<RunState>,
    instance: wasmtime::Instance,
    budgets: &Budgets,
    metrics: &mut RunMetrics,
) -> Result<Option<wasmtime::Instance>, RunFailure> {
    evaluate(store, instance, budgets, metrics, Begin::Waiting)
        .instrument(tracing::info_span!("evaluate"))
        .await
}

/// Where the event loop starts.
enum Begin<'a> {
    /// A fresh run: the program is evaluated.
    Run,
    /// A paused run: restored, then waiting for what its answers deliver.
    Restore(&'a Resumed),
    /// A run already under way whose guest waits (its stack empty).
    Waiting,
}

/// Runs the instantiated guest's event loop until the run settles or pauses.
async fn evaluate(
    store: &mut Store<RunState>,
    instance: wasmtime::Instance,
    budgets: &Budgets,
    metrics: &mut RunMetrics,
    begin: Begin<'_>,
) -> Result<Option<wasmtime::Instance>, RunFailure> {
    store.data_mut().memory = instance.get_memory(&mut *store, "memory");
    crate::meter::attach(store, &instance);
    let run = instance.get_typed_func::<(), u32>(&mut *store, "cm_run");
    let deliver = instance.get_typed_func::<u32, u32>(&mut *store, "cm_deliver");
    let (Ok(run), Ok(deliver)) = (run, deliver) else {
        return Err(RunFailure::new(
            FailureKind::WorkerExit,
            "worker error: the sandbox module lacks its entry points",
        )
        .with_cause(FailureCause::Trap));
    };
    let mut clocks = Clocks::new(store.data().watch.deadline);
    let calls = store.data().in_flight.clone();
    let watch = store.data().watch();
    let mut status = match begin {
        Begin::Run => alongside_calls(run.call_async(&mut *store, ()), &calls, &watch).await,
        Begin::Restore(resumed) => {
            let restoring = Instant::now();
            restore(store, instance, resumed, budgets)?;
            metrics.restore += restoring.elapsed();
            Ok(wire::STATUS_WAITING)
        }
        Begin::Waiting => Ok(wire::STATUS_WAITING),
    };
    loop {
        let code = match status {
            Ok(code) => code,
            Err(error) => {
                if store.data().outcome.is_some() {
                    return Ok(None);
                }
                let hit = store.data().limiter.hit;
                return Err(failure_from_error(&error, budgets, hit));
            }
        };
        if store.data().outcome.is_some() {
            return Ok(None);
        }
        if code != wire::STATUS_WAITING {
            return Err(failure_from_stop(&Stop::Exit(0), budgets));
        }
        match next_event(store.data_mut(), &mut clocks).await {
            Next::Deliver(frame) => {
                let len = frame.len() as u32;
                store.data_mut().delivery = frame;
                clocks.stack_used = true;
                status =
                    alongside_calls(deliver.call_async(&mut *store, len), &calls, &watch).await;
                // The guest has read it: a large answer's frame is not kept until the next.
                store.data_mut().delivery = Vec::new();
            }
            Next::GiveBackStack => {
                // The guest is not running, so its stack holds nothing; it goes on waiting.
                if stack::give_back(store, &instance) {
                    metrics.stack_given_back += 1;
                }
                clocks.stack_given_back();
                status = Ok(wire::STATUS_WAITING);
            }
            Next::Stop(stop) => return Err(failure_from_stop(&stop, budgets)),
            Next::Pause => return Ok(Some(instance)),
            Next::Wait => status = Ok(wire::STATUS_WAITING),
            Next::NeverSettles => {
                return Err(RunFailure::new(
                    FailureKind::Exception,
                    "program is waiting on a promise that can never settle (no tool call is in flight and no timer is armed)",
                ))
            }
        }
    }
}

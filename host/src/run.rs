//! One run: a fresh store and instance, the host-driven event loop, and settlement.
//!
//! The guest returns to the host whenever it waits. The host then waits (burning no fuel) for
//! the next binding completion or timer, delivers it, and calls back in. In-flight binding
//! futures live in this run's own task. Exactly one outcome wins: the first `done`, overflow,
//! trap, abort or deadline settles the run and everything after it is ignored. A run never
//! returns before every binding call it started has finished.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use codemode_runtime::code::{
    BindingFn, BindingNamespace, BindingRef, CallOutcome, CallRecord, FailureCause, FailureKind,
    PausedRun, PendingCall, RunFailure, RunResult,
};
use codemode_runtime::json;
use codemode_runtime::ledger::{fit_failure, overflow_message, Ledger};
use codemode_runtime::signal::{AbortController, AbortSignal};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio::sync::{Semaphore, SemaphorePermit};
use wasmtime::{InstancePre, Memory, ResourceLimiter, Store, Trap, UpdateDeadline};

use crate::bridge::wire;
use crate::config::Budgets;
use crate::durable::memory::Image;
use crate::durable::{record, Durability};
use crate::engine::Interruption;

/// Fuel between cooperative yields of a busy guest (under a millisecond of compute at
/// `FUEL_PER_MS`). At every yield the host polls the run's calls and checks whether the guest
/// must stop (`Watch`), so this bounds how long a computing guest runs past its wall clock or
/// an abort, except that one bulk memory operation, charged by the byte up front, runs to its
/// end.
const YIELD_FUEL: u64 = 4_000_000;

/// How long a settled run waits, past its wall budget, for bindings that ignore their signal.
const SETTLE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Why the host stopped a guest; carried through wasmtime as the error of a trap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The run already has its outcome.
    Settled,
    Aborted(String),
    Wall,
    Exit(i32),
    Memory,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Settled => f.write_str("run settled"),
            Stop::Aborted(reason) => write!(f, "aborted: {reason}"),
            Stop::Wall => f.write_str("wall-clock ceiling reached"),
            Stop::Exit(code) => write!(f, "guest exited with code {code}"),
            Stop::Memory => f.write_str("memory limit exceeded"),
        }
    }
}

impl std::error::Error for Stop {}

pub enum Outcome {
    Value(Option<Value>),
    Failure(RunFailure),
}

type CallFuture = futures::future::BoxFuture<'static, (u32, Result<Value, String>)>;
type Completion = (u32, Result<Value, String>);

/// The run's binding calls in flight. Shared between the store (the `call` import starts
/// calls) and the event loop, which polls them both while it waits and whenever the guest
/// yields in the middle of a computation: a call started before a busy loop (a request already
/// sent, a process already started) makes progress during it, not only at the next wait.
#[derive(Default)]
pub(crate) struct InFlight {
    inner: std::sync::Mutex<InFlightInner>,
}

#[derive(Default)]
struct InFlightInner {
    running: FuturesUnordered<CallFuture>,
    /// Finished while the guest was running, in finishing order; delivered at the next wait.
    finished: VecDeque<Completion>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, InFlightInner> {
        // Only this module touches the lock, never across an await; a panicking binding
        // future leaves both collections consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, call: CallFuture) {
        self.lock().running.push(call);
    }

    fn len(&self) -> usize {
        let inner = self.lock();
        inner.running.len() + inner.finished.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Polls every running call once, keeping the ones that finish for later delivery.
    fn make_progress(&self, cx: &mut Context<'_>) {
        let mut inner = self.lock();
        while let Poll::Ready(Some(done)) = inner.running.poll_next_unpin(cx) {
            inner.finished.push_back(done);
        }
    }

    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        let mut inner = self.lock();
        if let Some(done) = inner.finished.pop_front() {
            return Poll::Ready(Some(done));
        }
        inner.running.poll_next_unpin(cx)
    }

    fn take(&self) -> (FuturesUnordered<CallFuture>, VecDeque<Completion>) {
        let mut inner = self.lock();
        (
            std::mem::take(&mut inner.running),
            std::mem::take(&mut inner.finished),
        )
    }
}

/// What a computing guest is checked against whenever it yields: the run's outcome, its abort
/// signal and its wall clock. Fuel makes a busy guest yield every `YIELD_FUEL`, and every
/// operator costs fuel (bulk memory operations by the byte), so these checks come at least that
/// often without the cost of epoch instrumentation in every function and loop.
#[derive(Clone)]
struct Watch {
    /// Fires when the run settles.
    settled: AbortSignal,
    /// The caller's abort signal.
    control: AbortSignal,
    /// The end of the wall-clock budget.
    deadline: Instant,
}

impl Watch {
    /// Whether running wasm must stop now.
    fn stop(&self) -> Option<Stop> {
        if self.settled.is_aborted() {
            return Some(Stop::Settled);
        }
        if let Some(reason) = self.control.reason() {
            return Some(Stop::Aborted(reason));
        }
        if Instant::now() >= self.deadline {
            return Some(Stop::Wall);
        }
        None
    }
}

/// Runs a guest entry point while polling the run's calls each time the guest yields, and
/// stops it at a yield when `watch` says so. Stopping drops the call, which wasmtime finishes
/// by unwinding the guest's stack from the yield with a trap.
async fn alongside_calls<T, F>(call: F, calls: &InFlight, watch: &Watch) -> wasmtime::Result<T>
where
    F: Future<Output = wasmtime::Result<T>>,
{
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| match call.as_mut().poll(cx) {
        Poll::Ready(output) => Poll::Ready(output),
        Poll::Pending => {
            if let Some(stop) = watch.stop() {
                return Poll::Ready(Err(wasmtime::Error::new(stop)));
            }
            calls.make_progress(cx);
            Poll::Pending
        }
    })
    .await
}

struct OpenCall {
    slot: usize,
    argument_bytes: usize,
}

/// A call of a pausing binding: made by the program, not run, answered at a resume.
struct PausingCall {
    global: String,
    name: String,
    /// Lossless JSON text: kept as written, for the record and the pause report.
    arguments: String,
    /// Waits for a decision (`approve_on`) rather than a result.
    approval: bool,
}

struct MemoryLimiter {
    max: usize,
    hit: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.hit = true;
            return Err(wasmtime::Error::new(Stop::Memory));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// Everything a run's imports can see. Owned by the run's `Store`.
pub struct RunState {
    pub(crate) memory: Option<Memory>,
    pub(crate) boot: Vec<u8>,
    pub(crate) delivery: Vec<u8>,
    bindings: Vec<BindingNamespace>,
    /// The lowest call id the guest may use next (ids strictly increase; u64 so that the last
    /// u32 id is spent too).
    next_call_id: u64,
    /// Calls not yet finished: where their record is and the argument bytes the host holds.
    open_calls: HashMap<u32, OpenCall>,
    argument_bytes_in_flight: usize,
    argument_bytes_cap: usize,
    pub(crate) ledger: Ledger,
    pub(crate) outcome: Option<Outcome>,
    pub(crate) started: Instant,
    logs: Vec<String>,
    in_flight: Arc<InFlight>,
    /// Deliveries ready now (refusals decided at call time), in order.
    ready: VecDeque<Vec<u8>>,
    timers: BTreeSet<(Instant, u32)>,
    timer_deadlines: HashMap<u32, Instant>,
    calls: Vec<CallRecord>,
    /// Fires when the run settles, telling running bindings to stop.
    call_controller: AbortController,
    limiter: MemoryLimiter,
    /// The run's settled signal (from `call_controller`), abort signal and wall deadline.
    watch: Watch,
    random_state: std::collections::hash_map::RandomState,
    random_counter: u64,
    /// Bindings whose calls pause the run instead of running.
    pause_on: BTreeSet<BindingRef>,
    /// Bindings whose calls pause the run for an approval.
    approve_on: BTreeSet<BindingRef>,
    pausing: BTreeMap<u32, PausingCall>,
    /// A timer due within this keeps the run waiting instead of pausing.
    pause_threshold: std::time::Duration,
    /// Set while `cm_init` runs: clocks read zero and randomness is a fixed sequence, so that
    /// the pre-initialised image (which every paused run's record is relative to) is the same
    /// wherever it is built, and holds nothing a run could treat as a secret.
    pub(crate) preinitializing: bool,
}

impl RunState {
    pub(crate) fn new(
        budgets: &Budgets,
        boot: Vec<u8>,
        bindings: Vec<BindingNamespace>,
        control: AbortSignal,
        started: Instant,
    ) -> Self {
        let call_controller = AbortController::new();
        RunState {
            memory: None,
            boot,
            delivery: Vec::new(),
            bindings,
            next_call_id: 0,
            open_calls: HashMap::new(),
            argument_bytes_in_flight: 0,
            argument_bytes_cap: budgets.memory_bytes(),
            ledger: Ledger::new(budgets.max_output_bytes),
            outcome: None,
            started,
            logs: Vec::new(),
            in_flight: Arc::default(),
            ready: VecDeque::new(),
            timers: BTreeSet::new(),
            timer_deadlines: HashMap::new(),
            calls: Vec::new(),
            watch: Watch {
                settled: call_controller.signal(),
                control,
                deadline: started + budgets.wall(),
            },
            call_controller,
            limiter: MemoryLimiter {
                max: budgets.memory_bytes(),
                hit: false,
            },
            random_state: Default::default(),
            random_counter: 0,
            pause_on: BTreeSet::new(),
            approve_on: BTreeSet::new(),
            pausing: BTreeMap::new(),
            pause_threshold: crate::durable::DEFAULT_PAUSE_THRESHOLD,
            preinitializing: false,
        }
    }

    pub(crate) fn push_log(&mut self, text: String) {
        self.logs.push(text);
    }

    pub(crate) fn in_flight_count(&self) -> usize {
        self.in_flight.len() + self.ready.len()
    }

    pub(crate) fn timer_count(&self) -> usize {
        self.timer_deadlines.len()
    }

    pub(crate) fn settle(&mut self, outcome: Outcome) {
        if self.outcome.is_none() {
            self.outcome = Some(outcome);
            self.call_controller.abort("run settled");
        }
    }

    pub(crate) fn settle_overflow(&mut self) {
        if self.outcome.is_some() {
            return;
        }
        self.ledger.overflow();
        let max = self.ledger.max();
        self.settle(Outcome::Failure(RunFailure::new(
            FailureKind::OutputLimit,
            overflow_message(max),
        )));
    }

    /// Spends call id `id`; false when it is not above every id used before (a duplicate).
    pub(crate) fn claim_call_id(&mut self, id: u32) -> bool {
        if u64::from(id) < self.next_call_id {
            return false;
        }
        self.next_call_id = u64::from(id) + 1;
        true
    }

    /// The binding `global.name`, looked up by exact own names only.
    pub(crate) fn binding(&self, global: &str, name: &str) -> Option<BindingFn> {
        self.bindings
            .iter()
            .find(|ns| ns.global == global)
            .and_then(|ns| ns.functions.get(name))
            .cloned()
    }

    /// Host memory (heap blocks as `json::parse_within` counts them) that arguments of new calls
    /// may still take: the host holds a call's arguments until it finishes, so all of them
    /// together may take no more than the sandbox's own memory budget.
    pub(crate) fn argument_room(&self) -> usize {
        self.argument_bytes_cap
            .saturating_sub(self.argument_bytes_in_flight)
    }

    /// Host memory a completion value may take: what the sandbox itself was allowed.
    pub(crate) fn memory_cap(&self) -> usize {
        self.argument_bytes_cap
    }

    /// Binding calls the program has made so far.
    pub(crate) fn calls_made(&self) -> usize {
        self.calls.len()
    }

    fn open_call(&mut self, id: u32, global: &str, name: &str, argument_bytes: usize) {
        let slot = self.calls.len();
        self.calls.push(CallRecord {
            global: record_name(global),
            name: record_name(name),
            outcome: CallOutcome::Abandoned,
        });
        self.open_calls.insert(
            id,
            OpenCall {
                slot,
                argument_bytes,
            },
        );
        self.argument_bytes_in_flight += argument_bytes;
    }

    fn finish_call(&mut self, id: u32, outcome: CallOutcome) {
        if let Some(open) = self.open_calls.remove(&id) {
            self.argument_bytes_in_flight -= open.argument_bytes;
            if let Some(record) = self.calls.get_mut(open.slot) {
                record.outcome = outcome;
            }
        }
    }

    pub(crate) fn reject_now(&mut self, id: u32, global: &str, name: &str, message: &str) {
        self.open_call(id, global, name, 0);
        self.finish_call(id, CallOutcome::Rejected);
        self.ready.push_back(wire::encode_rejected(id, message));
    }

    pub(crate) fn start_call(
        &mut self,
        id: u32,
        global: &str,
        name: &str,
        f: BindingFn,
        args: Value,
        argument_bytes: usize,
    ) {
        self.open_call(id, global, name, argument_bytes);
        let named =
            |set: &BTreeSet<BindingRef>| set.iter().any(|b| b.global == global && b.name == name);
        let approval = named(&self.approve_on);
        if approval || named(&self.pause_on) {
            let arguments = json::to_string(&args);
            json::drop_deep(args);
            let call = PausingCall {
                global: global.to_owned(),
                name: name.to_owned(),
                arguments,
                approval,
            };
            self.pausing.insert(id, call);
            return;
        }
        let signal = self.call_controller.signal();
        // The call starts now (not when the program awaits it), so `Promise.all` overlaps.
        let future = f(args, signal);
        self.in_flight
            .push(Box::pin(async move { (id, future.await) }));
    }

    pub(crate) fn arm_timer(&mut self, id: u32, at: Instant) {
        self.cancel_timer(id);
        self.timers.insert((at, id));
        self.timer_deadlines.insert(id, at);
    }

    pub(crate) fn cancel_timer(&mut self, id: u32) {
        if let Some(at) = self.timer_deadlines.remove(&id) {
            self.timers.remove(&(at, id));
        }
    }

    pub(crate) fn random_bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            let mut h = if self.preinitializing {
                std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default(
                )
                .build_hasher()
            } else {
                self.random_state.build_hasher()
            };
            h.write_u64(self.random_counter);
            self.random_counter = self.random_counter.wrapping_add(1);
            out.extend_from_slice(&h.finish().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// What decides whether running wasm must stop: checked at every fuel yield, on every
    /// epoch tick under a scheme with epochs, and at every host call that charges fuel.
    fn watch(&self) -> Watch {
        self.watch.clone()
    }

    /// Whether running wasm must stop now; asked by every host call that charges fuel, as
    /// well as at fuel yields.
    pub(crate) fn must_stop(&self) -> Option<Stop> {
        self.watch.stop()
    }

    /// Turns the result of a completed binding into the delivery the guest will read.
    fn delivery_for(&mut self, id: u32, result: Result<Value, String>) -> Vec<u8> {
        match result {
            // A string travels as its bytes: no escaping here, no JSON parse in the guest.
            Ok(Value::String(text)) => {
                self.finish_call(id, CallOutcome::Resolved);
                wire::Delivery::ResolvedString { id, text: &text }.encode()
            }
            Ok(value) if json::is_lossless(&value) => {
                self.finish_call(id, CallOutcome::Resolved);
                let frame = wire::encode_resolved(id, &value);
                json::drop_deep(value);
                frame
            }
            Ok(value) => {
                json::drop_deep(value);
                self.finish_call(id, CallOutcome::Rejected);
                wire::encode_rejected(id, "binding resolution must be lossless JSON")
            }
            Err(message) => {
                self.finish_call(id, CallOutcome::Rejected);
                wire::encode_rejected(id, &rejection_text(&message))
            }
        }
    }
}

/// Longest name kept in a call record: records live as long as the run, outside the ledger.
const RECORD_NAME_BYTES: usize = 128;

/// Longest rejection message delivered to the program: a tool's error text, kept in host memory
/// until the guest reads it.
const MAX_REJECTION_BYTES: usize = 64 * 1024;

/// A name as records and messages keep it: at most `RECORD_NAME_BYTES`, cut on a character.
pub(crate) fn record_name(name: &str) -> String {
    if name.len() <= RECORD_NAME_BYTES {
        return name.to_owned();
    }
    let mut end = RECORD_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end])
}

/// A tool's error message as the program gets it: whole, or cut on a character boundary with
/// a note of what was left out.
fn rejection_text(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_REJECTION_BYTES {
        return message.into();
    }
    let mut end = MAX_REJECTION_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &message[..end], message.len() - end).into()
}

/// What the event loop does next.
enum Next {
    Deliver(Vec<u8>),
    Stop(Stop),
    NeverSettles,
    /// Everything left to wait on is a pausing call.
    Pause,
}

/// The run's two clocks, registered with tokio's timer once per run rather than once per event
/// (registering a sleep wakes the runtime's driver, a syscall per sub-call otherwise).
struct Clocks {
    wall: Pin<Box<tokio::time::Sleep>>,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The timer `timer` is armed for.
    armed: Option<(Instant, u32)>,
}

impl Clocks {
    fn new(deadline: Instant) -> Self {
        let deadline = tokio::time::Instant::from_std(deadline);
        Clocks {
            wall: Box::pin(tokio::time::sleep_until(deadline)),
            timer: Box::pin(tokio::time::sleep_until(deadline)),
            armed: None,
        }
    }
}

async fn next_event(state: &mut RunState, clocks: &mut Clocks) -> Next {
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
        Some((id, result)) = std::future::poll_fn(|cx| calls.poll_next(cx)), if !calls.is_empty() => {
            Next::Deliver(state.delivery_for(id, result))
        }
    }
}

/// The failure a stopped or trapped guest becomes.
fn failure_from_error(error: &wasmtime::Error, budgets: &Budgets, memory_hit: bool) -> RunFailure {
    if let Some(stop) = error.downcast_ref::<Stop>() {
        return failure_from_stop(stop, budgets);
    }
    if memory_hit {
        return failure_from_stop(&Stop::Memory, budgets);
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => RunFailure::new(
            FailureKind::Timeout,
            format!("compute budget exhausted ({}ms busy)", budgets.compute_ms),
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
fn finalize(
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
            }
        }
    }
}

/// What one run cost, for benchmarks and for hosts that meter usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunMetrics {
    /// Time spent erasing TypeScript types.
    pub strip: std::time::Duration,
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
}

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
}

/// The permits of an admitted run, returned when it ends.
struct Admitted<'a> {
    _memory: Option<SemaphorePermit<'a>>,
    _slot: SemaphorePermit<'a>,
}

/// Waits for the run's share of the memory cap, then for one of the engine's instance slots
/// (always in this order, so that two runs never hold one each), within the run's wall budget
/// and until its abort: runs beyond either queue here instead of failing.
async fn admit<'a>(
    admission: &Admission<'a>,
    control: &AbortSignal,
    deadline: Instant,
    budgets: &Budgets,
) -> Result<Admitted<'a>, RunFailure> {
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

/// How a run begins.
pub(crate) enum Start<'a> {
    /// Evaluate this (already stripped) JavaScript.
    Program(&'a str),
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
    pub image: Arc<Image>,
    /// The TypeScript the model wrote, kept for positions in later failures.
    pub program: &'a str,
    pub pause_on: BTreeSet<BindingRef>,
    pub approve_on: BTreeSet<BindingRef>,
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
    control: AbortSignal,
    keeping: Option<Keeping<'_>>,
    metrics: &mut RunMetrics,
) -> RunResult {
    let now = Instant::now();
    let (program, mut resumed) = match start {
        Start::Program(program) => (program, None),
        Start::Resumed(resumed) => ("", Some(resumed)),
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
            wire::Boot {
                program,
                namespaces,
            }
            .encode()
        }
    };
    let mut state = RunState::new(budgets, boot, bindings, control, started);
    if let Some(keeping) = &keeping {
        state.pause_on = keeping.pause_on.clone();
        state.approve_on = keeping.approve_on.clone();
        state.pause_threshold = keeping.durability.threshold();
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
    store.limiter(|s| &mut s.limiter);
    // Compute spent before a pause counts after it.
    let fuel = budgets.fuel().saturating_sub(fuel_before);
    if interruption.fuel() {
        let configured = store
            .set_fuel(fuel)
            .and_then(|()| store.fuel_async_yield_interval(Some(YIELD_FUEL)));
        if let Err(error) = configured {
            return failure_before_start(
                RunFailure::new(FailureKind::WorkerExit, format!("worker error: {error:#}")),
                budgets,
            );
        }
    }
    if interruption.epoch() {
        store.set_epoch_deadline(1);
        let watch = store.data().watch();
        store.epoch_deadline_callback(move |_| match watch.stop() {
            Some(stop) => Err(wasmtime::Error::new(stop)),
            None => Ok(UpdateDeadline::Yield(1)),
        });
    }

    let driven = drive(&mut store, pre, budgets, metrics, resumed.as_deref()).await;
    if interruption.fuel() {
        metrics.fuel_consumed = fuel.saturating_sub(store.get_fuel().unwrap_or(0));
    }
    let mut paused = None;
    match driven {
        Ok(Some(instance)) => {
            // `drive` pauses only when the runtime keeps paused runs.
            if let Some(keeping) = &keeping {
                let spent = fuel_before + metrics.fuel_consumed;
                let pausing = Instant::now();
                match pause(&mut store, instance, keeping, budgets, spent).await {
                    Ok((run, bytes)) => {
                        metrics.pause = pausing.elapsed();
                        metrics.record_bytes = bytes;
                        paused = Some(run);
                    }
                    Err(message) => store.data_mut().settle(Outcome::Failure(
                        RunFailure::new(FailureKind::WorkerExit, message)
                            .with_cause(FailureCause::Trap),
                    )),
                }
            }
        }
        Ok(None) => {}
        Err(failure) => store.data_mut().settle(Outcome::Failure(failure)),
    }
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
    for (_, result) in finished {
        if let Ok(value) = result {
            json::drop_deep(value);
        }
    }
    let patience =
        tokio::time::Instant::from_std(state.watch.deadline.max(Instant::now()) + SETTLE_GRACE);
    let drained = tokio::time::timeout_at(patience, async {
        while let Some((_, result)) = in_flight.next().await {
            if let Ok(value) = result {
                json::drop_deep(value);
            }
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!("codemode: a binding ignored its run's end; it continues detached");
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

/// Writes the paused run in `store` down and reports what it waits on.
async fn pause(
    store: &mut Store<RunState>,
    instance: wasmtime::Instance,
    keeping: &Keeping<'_>,
    budgets: &Budgets,
    fuel_spent: u64,
) -> Result<(PausedRun, u64), String> {
    use crate::durable::record::{GlobalValue, Header, SavedBudgets, SavedGlobal};
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or("worker error: the sandbox module has no memory to keep")?;
    let data = memory.data(&*store);
    let memory_bytes = data.len() as u64;
    let runs = crate::durable::memory::diff(&keeping.image.bytes, data);
    let names: Vec<String> = instance
        .module(&*store)
        .exports()
        .map(|e| e.name().to_owned())
        .filter(|name| name.starts_with(crate::durable::globals::EXPORT_PREFIX))
        .collect();
    let mut globals = Vec::with_capacity(names.len());
    for name in names {
        let Some(global) = instance.get_global(&mut *store, &name) else {
            continue;
        };
        let value = match global.get(&mut *store) {
            wasmtime::Val::I32(x) => GlobalValue::I32(x),
            wasmtime::Val::I64(x) => GlobalValue::I64(x),
            wasmtime::Val::F32(x) => GlobalValue::F32(x),
            wasmtime::Val::F64(x) => GlobalValue::F64(x),
            _ => return Err(format!("worker error: global {name} cannot be kept")),
        };
        globals.push(SavedGlobal { name, value });
    }
    let state = store.data();
    let header = Header {
        run_id: crate::durable::new_run_id()?,
        guest: crate::engine::GUEST_SHA256.to_owned(),
        image: keeping.image.digest.clone(),
        paused_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        program: keeping.program.to_owned(),
        budgets: SavedBudgets {
            compute_ms: budgets.compute_ms,
            wall_ms: budgets.wall_ms,
            max_output_bytes: budgets.max_output_bytes,
            memory_mb: budgets.memory_mb,
        },
        fuel_spent,
        wall_spent_ns: state.started.elapsed().as_nanos() as u64,
        memory_bytes,
        globals,
        host: state.host_state(),
    };
    let bytes = keeping.durability.keep(&header, &runs).await?;
    let mut pending = Vec::with_capacity(header.host.pending.len());
    for call in &header.host.pending {
        // Written by `json::to_string` at the call: parses back.
        let arguments = json::parse(call.arguments.as_bytes()).unwrap_or(Value::Null);
        pending.push(PendingCall {
            call_id: call.id.to_string(),
            global: call.global.clone(),
            name: call.name.clone(),
            arguments,
            approval: call.approval,
        });
    }
    let run = PausedRun {
        run_id: header.run_id,
        pending,
    };
    Ok((run, bytes))
}

/// Instantiates the guest and runs its event loop until the run settles. `Err` is the failure
/// the host decided (a trap, a stop, a malformed guest); `Ok` means the run has its outcome.
async fn drive(
    store: &mut Store<RunState>,
    pre: &InstancePre<RunState>,
    budgets: &Budgets,
    metrics: &mut RunMetrics,
    resumed: Option<&Resumed>,
) -> Result<Option<wasmtime::Instance>, RunFailure> {
    let instantiating = Instant::now();
    let instance = pre.instantiate_async(&mut *store).await;
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
    store.data_mut().memory = instance.get_memory(&mut *store, "memory");
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
    let mut status = match resumed {
        None => alongside_calls(run.call_async(&mut *store, ()), &calls, &watch).await,
        Some(resumed) => {
            let restoring = Instant::now();
            restore(store, instance, resumed, budgets)?;
            metrics.restore += restoring.elapsed();
            Ok(wire::STATUS_WAITING)
        }
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
                status =
                    alongside_calls(deliver.call_async(&mut *store, len), &calls, &watch).await;
            }
            Next::Stop(stop) => return Err(failure_from_stop(&stop, budgets)),
            Next::Pause => return Ok(Some(instance)),
            Next::NeverSettles => {
                return Err(RunFailure::new(
                    FailureKind::Exception,
                    "program is waiting on a promise that can never settle (no tool call is in flight and no timer is armed)",
                ))
            }
        }
    }
}

/// Makes a fresh instance the paused run: its memory grown and written back, its globals set.
fn restore(
    store: &mut Store<RunState>,
    instance: wasmtime::Instance,
    resumed: &Resumed,
    budgets: &Budgets,
) -> Result<(), RunFailure> {
    use crate::durable::record::GlobalValue;
    let broken = |why: &str| {
        RunFailure::new(
            FailureKind::WorkerExit,
            format!("worker error: the paused run could not be restored: {why}"),
        )
        .with_cause(FailureCause::Trap)
    };
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| broken("the sandbox module has no memory"))?;
    let target = usize::try_from(resumed.header.memory_bytes).unwrap_or(usize::MAX);
    let current = memory.data_size(&*store);
    let page = 1usize << 16;
    if target < current || target % page != 0 {
        return Err(broken("the record's memory size does not fit this guest"));
    }
    let grow = ((target - current) / page) as u64;
    if grow > 0 && memory.grow(&mut *store, grow).is_err() {
        if store.data().limiter.hit {
            return Err(failure_from_stop(&Stop::Memory, budgets));
        }
        return Err(broken("its memory could not be grown"));
    }
    crate::durable::memory::apply(&resumed.runs, memory.data_mut(&mut *store))
        .map_err(|why| broken(&why))?;
    for saved in &resumed.header.globals {
        let global = instance
            .get_global(&mut *store, &saved.name)
            .ok_or_else(|| broken(&format!("the guest has no global {}", saved.name)))?;
        let value = match saved.value {
            GlobalValue::I32(x) => wasmtime::Val::I32(x),
            GlobalValue::I64(x) => wasmtime::Val::I64(x),
            GlobalValue::F32(x) => wasmtime::Val::F32(x),
            GlobalValue::F64(x) => wasmtime::Val::F64(x),
        };
        global
            .set(&mut *store, value)
            .map_err(|e| broken(&format!("global {}: {e}", saved.name)))?;
    }
    Ok(())
}

impl RunState {
    /// The host's side of a run that is pausing, for its record.
    fn host_state(&self) -> record::HostState {
        let now = Instant::now();
        let pending = self
            .pausing
            .iter()
            .map(|(id, call)| {
                let open = self.open_calls.get(id);
                record::SavedCall {
                    id: *id,
                    slot: open.map_or(usize::MAX, |o| o.slot),
                    argument_bytes: open.map_or(0, |o| o.argument_bytes),
                    global: call.global.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    approval: call.approval,
                }
            })
            .collect();
        let timers = self
            .timer_deadlines
            .iter()
            .map(|(id, at)| record::SavedTimer {
                id: *id,
                remaining_ns: at.saturating_duration_since(now).as_nanos() as u64,
            })
            .collect();
        record::HostState {
            next_call_id: self.next_call_id,
            calls: self.calls.clone(),
            pending,
            timers,
            ledger: self.ledger.clone(),
            logs: self.logs.clone(),
            pause_on: self.pause_on.clone(),
            approve_on: self.approve_on.clone(),
        }
    }

    /// Answers pending call `id`: a result is delivered; an approval's `true` makes the call
    /// now (through its binding, like any call), anything else denies it.
    fn answer(&mut self, id: u32, reply: Result<Value, String>) {
        let Some(call) = self.pausing.remove(&id) else {
            return;
        };
        if !call.approval {
            let frame = self.delivery_for(id, reply);
            self.ready.push_back(frame);
            return;
        }
        let denial = match reply {
            Ok(Value::Bool(true)) => match self.binding(&call.global, &call.name) {
                Some(f) => {
                    // Written by `json::to_string` at the call: parses back.
                    let args = json::parse(call.arguments.as_bytes()).unwrap_or(Value::Null);
                    let future = f(args, self.call_controller.signal());
                    self.in_flight
                        .push(Box::pin(async move { (id, future.await) }));
                    return;
                }
                None => format!(
                    "tool \"{}\" was approved but is no longer available",
                    record_name(&call.name)
                ),
            },
            Ok(_) => format!("tool \"{}\" was not approved", record_name(&call.name)),
            Err(message) => message,
        };
        let frame = self.delivery_for(id, Err(denial));
        self.ready.push_back(frame);
    }

    /// Takes up a paused run's host side; its timers count their remaining time from now.
    fn restore(&mut self, host: &record::HostState) {
        let now = Instant::now();
        self.next_call_id = host.next_call_id;
        self.calls = host.calls.clone();
        self.ledger = host.ledger.clone();
        self.logs = host.logs.clone();
        self.pause_on.extend(host.pause_on.iter().cloned());
        self.approve_on.extend(host.approve_on.iter().cloned());
        for call in &host.pending {
            self.open_calls.insert(
                call.id,
                OpenCall {
                    slot: call.slot,
                    argument_bytes: call.argument_bytes,
                },
            );
            self.argument_bytes_in_flight += call.argument_bytes;
            self.pausing.insert(
                call.id,
                PausingCall {
                    global: call.global.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    approval: call.approval,
                },
            );
        }
        for timer in &host.timers {
            let at = now + std::time::Duration::from_nanos(timer.remaining_ns);
            self.arm_timer(timer.id, at);
        }
    }
}

/// The linear memory a fresh instance of `pre` starts with. Runs no guest code; the caller
/// holds a slot for it.
pub(crate) async fn pristine_memory(
    pre: &InstancePre<RunState>,
    interruption: Interruption,
) -> Result<Vec<u8>, String> {
    let state = RunState::new(
        &Budgets::default(),
        Vec::new(),
        Vec::new(),
        AbortSignal::never(),
        Instant::now(),
    );
    let mut store = Store::new(pre.module().engine(), state);
    if interruption.fuel() {
        store.set_fuel(0).map_err(|e| format!("{e:#}"))?;
    }
    let instance = pre
        .instantiate_async(&mut store)
        .await
        .map_err(|e| format!("the sandbox could not be instantiated: {e:#}"))?;
    let memory = instance
        .get_memory(&mut store, "memory")
        .ok_or("the sandbox module has no memory")?;
    Ok(memory.data(&store).to_vec())
}

/// Reads a pre-initialising instance's state for the snapshot.
struct InitState<'a> {
    store: &'a mut Store<RunState>,
    instance: wasmtime::Instance,
}

impl wasmtime_wizer::InstanceState for InitState<'_> {
    async fn global_get(
        &mut self,
        name: &str,
        _: wasmtime_wizer::ValType,
    ) -> wasmtime_wizer::SnapshotVal {
        use wasmtime_wizer::SnapshotVal;
        let value = self
            .instance
            .get_global(&mut *self.store, name)
            .map(|g| g.get(&mut *self.store));
        match value {
            Some(wasmtime::Val::I32(x)) => SnapshotVal::I32(x),
            Some(wasmtime::Val::I64(x)) => SnapshotVal::I64(x),
            Some(wasmtime::Val::F32(x)) => SnapshotVal::F32(x),
            Some(wasmtime::Val::F64(x)) => SnapshotVal::F64(x),
            Some(wasmtime::Val::V128(x)) => SnapshotVal::V128(x.as_u128()),
            // The snapshot only asks for globals the instrumented module exports, all numeric.
            _ => SnapshotVal::I32(0),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        match self.instance.get_memory(&mut *self.store, name) {
            Some(memory) => contents(memory.data(&*self.store)),
            None => contents(&[]),
        }
    }
}

/// Pre-initialises the guest: runs its `cm_init` export (Boa context, prelude) once and returns
/// a module whose memory already holds that state, so no run pays for it again.
pub(crate) fn preinitialize(
    engine: &wasmtime::Engine,
    wasm: &[u8],
    interruption: Interruption,
) -> Result<Vec<u8>, String> {
    let mut wizer = wasmtime_wizer::Wizer::new();
    wizer.init_func("cm_init");
    let (cx, instrumented) = wizer.instrument(wasm).map_err(|e| format!("{e:#}"))?;
    let module = wasmtime::Module::new(engine, &instrumented).map_err(|e| format!("{e:#}"))?;
    let linker = crate::bridge::imports::linker(engine).map_err(|e| format!("{e:#}"))?;
    let budgets = Budgets::default();
    let state = RunState::new(
        &budgets,
        Vec::new(),
        Vec::new(),
        AbortSignal::never(),
        Instant::now(),
    );
    let mut store = Store::new(engine, state);
    store.data_mut().preinitializing = true;
    store.limiter(|s| &mut s.limiter);
    if interruption.fuel() {
        store.set_fuel(u64::MAX / 2).map_err(|e| format!("{e:#}"))?;
    }
    if interruption.epoch() {
        store.set_epoch_deadline(u64::MAX / 2);
    }
    let instance = linker
        .instantiate(&mut store, &module)
        .map_err(|e| format!("{e:#}"))?;
    store.data_mut().memory = instance.get_memory(&mut store, "memory");
    let init = instance
        .get_typed_func::<(), ()>(&mut store, "cm_init")
        .map_err(|e| format!("{e:#}"))?;
    init.call(&mut store, ()).map_err(|e| format!("{e:#}"))?;
    let mut state = InitState {
        store: &mut store,
        instance,
    };
    let snapshot = futures::executor::block_on(wizer.snapshot(&cx, &mut state))
        .map_err(|e| format!("{e:#}"))?;
    // The same pipeline makes the mutable globals reachable, for pausing runs.
    crate::durable::globals::export_mutable_globals(&snapshot)
}

//! A run's state, owned by its `Store`: the calls in flight and how each opens, is answered
//! and closes, timers, logs and the output ledger.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use codemode_runtime::code::{
    BindingFn, BindingNamespace, BindingRef, CallCaps, CallFailure, CallOutcome, CallRecord,
    FailureKind, InputCalls, RunFailure,
};
use codemode_runtime::held::{answer_bytes, HeldMemory};
use codemode_runtime::json;
use codemode_runtime::ledger::{overflow_message, Ledger};
use codemode_runtime::signal::{AbortController, AbortSignal};
use codemode_runtime::tools::{InputAnswers, NeedsInput};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use wasmtime::{Memory, ResourceLimiter, Store};

use crate::config::Budgets;
use crate::wire;

use super::{Meter, Outcome, Stop};

type CallFuture = futures::future::BoxFuture<'static, Completion>;

/// A finished call: its id, its answer, and the bytes the answer is charged to the run's
/// [`HeldMemory`] for until the guest takes it.
pub(crate) struct Completion {
    pub(crate) id: u32,
    pub(crate) answer: Result<Value, CallFailure>,
    pub(crate) held: usize,
}

/// `call`'s answer, once it comes, charged to `held` beside the call's arguments, which stay
/// charged until the program takes the answer: released as soon as they are freed, they would
/// let a program that computes without awaiting its calls make new ones while the memory the
/// old ones took is still the host's. An answer that does not fit is freed at once and
/// replaced by a short message: the account is overdrawn, so the run is failing, and nothing
/// of the answer would reach the program anyway.
fn charged<E: Into<CallFailure>>(
    id: u32,
    call: impl Future<Output = Result<Value, E>> + Send + 'static,
    held: Arc<HeldMemory>,
) -> CallFuture {
    Box::pin(async move {
        let answer = call.await.map_err(Into::into);
        let bytes = answer_bytes(&answer);
        if held.charge(bytes) {
            return Completion {
                id,
                answer,
                held: bytes,
            };
        }
        held.release(bytes);
        if let Ok(value) = answer {
            json::drop_deep(value);
        }
        Completion {
            id,
            answer: Err(CallFailure::from(
                "the result passed the run's memory budget".to_owned(),
            )),
            held: 0,
        }
    })
}

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

    pub(crate) fn push(&self, call: CallFuture) {
        self.lock().running.push(call);
    }

    fn len(&self) -> usize {
        let inner = self.lock();
        inner.running.len() + inner.finished.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Polls every running call once, keeping the ones that finish for later delivery.
    fn make_progress(&self, cx: &mut Context<'_>) {
        let mut inner = self.lock();
        while let Poll::Ready(Some(done)) = inner.running.poll_next_unpin(cx) {
            inner.finished.push_back(done);
        }
    }

    pub(crate) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        let mut inner = self.lock();
        if let Some(done) = inner.finished.pop_front() {
            return Poll::Ready(Some(done));
        }
        inner.running.poll_next_unpin(cx)
    }

    pub(crate) fn take(&self) -> (FuturesUnordered<CallFuture>, VecDeque<Completion>) {
        let mut inner = self.lock();
        (
            std::mem::take(&mut inner.running),
            std::mem::take(&mut inner.finished),
        )
    }
}

/// What a computing guest is checked against whenever it yields: the run's outcome, its abort
/// signal and its wall clock. A busy guest comes back to the host for fuel at least every
/// `meter::SLICE`, and every operator costs fuel (bulk operations by the byte or element), so
/// these checks come at least that often without the cost of epoch instrumentation in every
/// function and loop.
#[derive(Clone)]
pub(crate) struct Watch {
    /// Fires when the run settles.
    settled: AbortSignal,
    /// The caller's abort signal.
    pub(crate) control: AbortSignal,
    /// The end of the wall-clock budget.
    pub(crate) deadline: Instant,
    /// What the run holds on the host; overdrawn, the run has passed its memory budget.
    pub(crate) held: Arc<HeldMemory>,
}

impl Watch {
    /// Whether running wasm must stop now.
    pub(crate) fn stop(&self) -> Option<Stop> {
        if self.settled.is_aborted() {
            return Some(Stop::Settled);
        }
        if self.held.overdrawn() {
            return Some(Stop::HeldMemory);
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

/// How long a guest that only computes (no call in flight) keeps its worker thread before its
/// task goes back to tokio's queue. Each of its fuel yields (every `meter::SLICE`) checks the
/// watch in place, so wall-clock and abort stops come as soon as before; a trip through the
/// executor at every fuel yield was a measurable share of a call-heavy program's time (the
/// task, rescheduled, woke the idle worker, which often took it and ran the guest on the other
/// core's cold caches). A guest with calls in flight (started, or finished and not yet
/// delivered) still returns at every yield, as before: its calls, and `run_code`'s scheduler
/// that starts them, are polled only then, and a test driving a loop of calls from a
/// current-thread runtime (`an_abort_stops_a_loop_of_host_calls`) failed when only unfinished
/// calls counted.
const EXECUTOR_SLICE: Duration = Duration::from_millis(2);

/// Runs a guest entry point, polling the run's calls when the guest yields (see
/// `EXECUTOR_SLICE`), and stops it at a yield when `watch` says so. Stopping drops the call,
/// which wasmtime finishes by unwinding the guest's stack from the yield with a trap.
pub(crate) async fn alongside_calls<T, F>(
    call: F,
    calls: &InFlight,
    watch: &Watch,
) -> wasmtime::Result<T>
where
    F: Future<Output = wasmtime::Result<T>>,
{
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| {
        let slice_ends = Instant::now() + EXECUTOR_SLICE;
        loop {
            // Every import but the meter's is synchronous, and the meter's is pending only
            // once, as a yield: so a guest call is pending only at a yield, and polling it
            // again resumes the guest at once (its waker already fired, so the task is polled
            // again if this returns pending).
            if let Poll::Ready(output) = call.as_mut().poll(cx) {
                return Poll::Ready(output);
            }
            if let Some(stop) = watch.stop() {
                return Poll::Ready(Err(wasmtime::Error::new(stop)));
            }
            if !calls.is_empty() || Instant::now() >= slice_ends {
                calls.make_progress(cx);
                return Poll::Pending;
            }
        }
    })
    .await
}

pub(crate) struct OpenCall {
    pub(crate) slot: usize,
    pub(crate) argument_bytes: usize,
}

/// A call of a pausing binding: made by the program, not run, answered at a resume.
pub(crate) struct PausingCall {
    pub(crate) global: String,
    pub(crate) name: String,
    /// Lossless JSON text: kept as written, for the record and the pause report.
    pub(crate) arguments: String,
    /// Waits for a decision (`approve_on`) rather than a result.
    pub(crate) approval: bool,
    /// The call was made and needs a person's answers to these questions before it is made
    /// again.
    pub(crate) input: Option<PendingInput>,
}

/// The questions of a call that needs input, and the state its tool gets back with the
/// answers; lossless JSON text, as kept in the record.
#[derive(Clone)]
pub(crate) struct PendingInput {
    pub(crate) questions: String,
    pub(crate) state: String,
}

pub(crate) struct MemoryLimiter {
    max: usize,
    pub(crate) hit: bool,
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
    /// The run's compute budget, on a metered engine (see `meter`); `None` on engines built
    /// to measure the other interruption schemes, where compute goes unmetered.
    pub(crate) meter: Option<Meter>,
    pub(crate) boot: Vec<u8>,
    pub(crate) delivery: Vec<u8>,
    bindings: Vec<BindingNamespace>,
    /// The lowest call id the guest may use next (ids strictly increase; u64 so that the last
    /// u32 id is spent too).
    pub(crate) next_call_id: u64,
    /// Calls not yet finished: where their record is and the argument bytes the host holds.
    pub(crate) open_calls: HashMap<u32, OpenCall>,
    /// The host memory the run holds outside its sandbox: arguments of calls in flight and
    /// answers not yet delivered (shared with whoever else holds them, `run_code`'s
    /// scheduler).
    pub(crate) held: Arc<HeldMemory>,
    pub(crate) ledger: Ledger,
    pub(crate) outcome: Option<Outcome>,
    pub(crate) started: Instant,
    pub(crate) logs: Vec<String>,
    pub(crate) in_flight: Arc<InFlight>,
    /// Deliveries ready now (refusals decided at call time), in order.
    pub(crate) ready: VecDeque<Vec<u8>>,
    pub(crate) timers: BTreeSet<(Instant, u32)>,
    pub(crate) timer_deadlines: HashMap<u32, Instant>,
    pub(crate) calls: Vec<CallRecord>,
    /// The run's caps on its calls, and its calls so far of each capped name.
    pub(crate) call_caps: CallCaps,
    calls_by_name: HashMap<String, u64>,
    /// Fires when the run settles, telling running bindings to stop.
    pub(crate) call_controller: AbortController,
    pub(crate) limiter: MemoryLimiter,
    /// The run's settled signal (from `call_controller`), abort signal and wall deadline.
    pub(crate) watch: Watch,
    random_state: std::collections::hash_map::RandomState,
    random_counter: u64,
    /// Bindings whose calls pause the run instead of running.
    pub(crate) pause_on: BTreeSet<BindingRef>,
    /// Bindings whose calls pause the run for an approval.
    pub(crate) approve_on: BTreeSet<BindingRef>,
    /// Of those, the ones an answer allowed for the rest of the run.
    pub(crate) approved: BTreeSet<BindingRef>,
    /// Bindings an answer declined for the rest of the run.
    pub(crate) declined: BTreeSet<BindingRef>,
    pub(crate) pausing: BTreeMap<u32, PausingCall>,
    /// Where calls that may need a person's input go (only for a run that can pause).
    pub(crate) input_calls: Option<Arc<dyn InputCalls>>,
    /// A timer due within this keeps the run waiting instead of pausing.
    pub(crate) pause_threshold: std::time::Duration,
    /// Set while `cm_init` runs: clocks read zero and randomness is a fixed sequence, so that
    /// the pre-initialised image (which every paused run's record is relative to) is the same
    /// wherever it is built, and holds nothing a run could treat as a secret.
    pub(crate) preinitializing: bool,
}

/// Makes `store` hold its run to its memory budget on every growth of the linear memory.
pub(crate) fn enforce_memory_budget(store: &mut Store<RunState>) {
    store.limiter(|state| &mut state.limiter);
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
        let held = Arc::new(HeldMemory::with_limit(budgets.memory_bytes()));
        RunState {
            memory: None,
            meter: None,
            boot,
            delivery: Vec::new(),
            bindings,
            next_call_id: 0,
            open_calls: HashMap::new(),
            held: held.clone(),
            ledger: Ledger::new(budgets.max_output_bytes),
            outcome: None,
            started,
            logs: Vec::new(),
            in_flight: Arc::default(),
            ready: VecDeque::new(),
            timers: BTreeSet::new(),
            timer_deadlines: HashMap::new(),
            calls: Vec::new(),
            call_caps: CallCaps::default(),
            calls_by_name: HashMap::new(),
            watch: Watch {
                settled: call_controller.signal(),
                control,
                deadline: started + budgets.wall(),
                held,
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
            approved: BTreeSet::new(),
            declined: BTreeSet::new(),
            pausing: BTreeMap::new(),
            input_calls: None,
            pause_threshold: crate::durable::DEFAULT_PAUSE_THRESHOLD,
            preinitializing: false,
        }
    }

    /// Counts the run's held memory in `held` (the caller's account, shared with its
    /// scheduler), limited to the run's memory budget. Called before anything is charged.
    pub(crate) fn share_held(&mut self, held: Arc<HeldMemory>) {
        held.set_limit(self.held.limit());
        self.watch.held = held.clone();
        self.held = held;
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
    /// may still take: the host holds a call's arguments until it finishes, and its answer
    /// until the guest takes it, so all of them together may take no more than the sandbox's
    /// own memory budget.
    pub(crate) fn argument_room(&self) -> usize {
        self.held.room()
    }

    /// Host memory a completion value may take: what the sandbox itself was allowed.
    pub(crate) fn memory_cap(&self) -> usize {
        self.held.limit()
    }

    /// Binding calls the program has made so far.
    pub(crate) fn calls_made(&self) -> usize {
        self.calls.len()
    }

    /// Why one more call of `name` would pass a cap on the run's calls, if it would.
    pub(crate) fn call_cap_reached(&self, name: &str) -> Option<String> {
        let made = self.calls.len() as u64;
        if let Some(total) = self.call_caps.total {
            if made >= total {
                return Some(format!(
                    "the program reached its cap of {total} tool calls in one run; the calls it made are listed in its record"
                ));
            }
        }
        let cap = *self.call_caps.per_function.get(name)?;
        let of_name = self.calls_by_name.get(name).copied().unwrap_or(0);
        (of_name >= cap).then(|| {
            format!(
                "the program reached its cap of {cap} calls of {} in one run; the calls it made are listed in its record",
                record_name(name)
            )
        })
    }

    /// Counts the capped calls again from the record (after a restore); a capped name longer
    /// than a record keeps starts again from zero.
    pub(crate) fn recount_calls(&mut self) {
        self.calls_by_name.clear();
        for call in &self.calls {
            if self.call_caps.per_function.contains_key(&call.name) {
                *self.calls_by_name.entry(call.name.clone()).or_insert(0) += 1;
            }
        }
    }

    fn open_call(&mut self, id: u32, global: &str, name: &str, argument_bytes: usize) {
        let slot = self.calls.len();
        // Counted only for a cap that can ask: the common run pays nothing per call.
        if self.call_caps.per_function.contains_key(name) {
            *self.calls_by_name.entry(name.to_owned()).or_insert(0) += 1;
        }
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
        // Parsed within the room left, so this fits.
        self.held.charge(argument_bytes);
    }

    /// Records how call `id` ended, as its answer goes to the program: its arguments are no
    /// longer held for it.
    fn finish_call(&mut self, id: u32, outcome: CallOutcome) {
        if let Some(open) = self.open_calls.remove(&id) {
            self.held.release(open.argument_bytes);
            if let Some(record) = self.calls.get_mut(open.slot) {
                record.outcome = outcome;
            }
        }
    }

    /// Starts binding `global.name` (`f`) for call `id` now, its answer charged when it
    /// comes; through [`InputCalls`] when they cover it, with `answers` to its earlier
    /// questions.
    pub(crate) fn run_binding(
        &mut self,
        id: u32,
        (global, name): (&str, &str),
        f: &BindingFn,
        args: Value,
        answers: Option<Arc<InputAnswers>>,
    ) {
        let signal = self.call_controller.signal();
        let through = self
            .input_calls
            .as_ref()
            .filter(|calls| calls.covers(global, name));
        let held = self.held.clone();
        self.in_flight.push(match through {
            Some(calls) => charged(id, calls.call((global, name), args, signal, answers), held),
            None => charged(id, f(args, signal), held),
        });
    }

    /// The next delivery decided at call time, for a caller that drives the guest itself (the
    /// pre-initialisation's profile) rather than through the event loop.
    pub(crate) fn next_ready(&mut self) -> Option<Vec<u8>> {
        self.ready.pop_front()
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
        if named(&self.declined) {
            json::drop_deep(args);
            let message = format!(
                "tool \"{}\" was declined for the rest of this run",
                record_name(name)
            );
            let frame = self.delivery_for(id, Err(message));
            self.ready.push_back(frame);
            return;
        }
        let approval = named(&self.approve_on) && !named(&self.approved);
        if approval || named(&self.pause_on) {
            let arguments = json::to_string(&args);
            json::drop_deep(args);
            let call = PausingCall {
                global: global.to_owned(),
                name: name.to_owned(),
                arguments,
                approval,
                input: None,
            };
            self.pausing.insert(id, call);
            return;
        }
        // The call starts now (not when the program awaits it), so `Promise.all` overlaps.
        self.run_binding(id, (global, name), &f, args, None);
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
    pub(crate) fn watch(&self) -> Watch {
        self.watch.clone()
    }

    /// Whether running wasm must stop now; asked by every host call that charges fuel, as
    /// well as at fuel yields.
    pub(crate) fn must_stop(&self) -> Option<Stop> {
        self.watch.stop()
    }

    /// Turns a completed binding's answer into the delivery the guest will read; the answer's
    /// charge goes with it. A call that needs a person's input, in a run that can pause, is
    /// kept pending with its questions instead: `None`.
    pub(crate) fn deliver(&mut self, done: Completion) -> Option<Vec<u8>> {
        self.held.release(done.held);
        let answer = match done.answer {
            Ok(value) => Ok(value),
            Err(CallFailure {
                input: Some(input), ..
            }) if self.input_calls.is_some() => {
                self.keep_for_input(done.id, &input);
                return None;
            }
            Err(failure) => Err(failure.message),
        };
        Some(self.delivery_for(done.id, answer))
    }

    /// Keeps call `id` pending until a person answers `input`'s questions.
    fn keep_for_input(&mut self, id: u32, input: &NeedsInput) {
        let binding = self
            .open_calls
            .get(&id)
            .and_then(|open| self.calls.get(open.slot))
            .map(|record| (record.global.clone(), record.name.clone()));
        let Some((global, name)) = binding else {
            return;
        };
        let questions = Value::Object(
            input
                .questions
                .iter()
                .map(|(key, question)| (key.clone(), json::clone_deep(question)))
                .collect(),
        );
        let call = PausingCall {
            global,
            name,
            arguments: json::to_string(&input.arguments),
            approval: false,
            input: Some(PendingInput {
                questions: json::to_string(&questions),
                state: json::to_string(&input.state),
            }),
        };
        json::drop_deep(questions);
        self.pausing.insert(id, call);
    }

    /// Turns the result of a completed binding into the delivery the guest will read.
    pub(crate) fn delivery_for(&mut self, id: u32, result: Result<Value, String>) -> Vec<u8> {
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
pub(crate) const RECORD_NAME_BYTES: usize = 128;

/// Longest rejection message delivered to the program: a tool's error text, kept in host memory
/// until the guest reads it.
pub(crate) const MAX_REJECTION_BYTES: usize = 64 * 1024;

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

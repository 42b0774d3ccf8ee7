//! The per-run sub-call scheduler: every call a program makes goes through the full tool
//! pipeline, in the order and with the overlap the reference's native scheduler allows.
//!
//! One driver lane per run runs the ordered stages, so they never overlap: the
//! `tool/code-dispatch-start` append and `prepare` (pre-execute, approval, guards) when a call
//! starts, and the commit (post-execute, `finalize_content`, result observers, context
//! deferral, the settle append) when it ends. Only the execute wrappers and the body run
//! concurrently, up to `max_parallel` of them. Starts happen in submission order;
//! classification is re-read at start time. A parallel call starts when no exclusive call
//! holds the barrier and fewer than `max_parallel` bodies run; an exclusive call waits until
//! none runs and holds the barrier through its own commit. Commits happen in submission order
//! (a head-of-line cursor), whatever order bodies finish in.
//!
//! A result is host memory the program decided to make exist, so from the moment a body ends
//! until the program's call takes it, the result (its value, content and contexts) is charged
//! to the run's [`HeldMemory`], the account the runtime charges arguments and undelivered
//! answers to, and limits to the run's memory budget. A result that does not fit is dropped at
//! once (its call commits as aborted), the account is overdrawn, the runtime fails the run with
//! its memory cause, and no queued call starts after that. Images and contexts a call hands to
//! the loop stay charged until the run ends: they are kept that long.
//!
//! When the run is over (it settled, or the outer call was cancelled), queued calls are
//! abandoned without events, and running calls see the run's signal fire. A body that ignores
//! its signal gets `settle_grace` to stop; then it is detached and its call commits as
//! `ABORTED`. `run_code` returns only when every started call has committed, so no event lands
//! after it.
//!
//! The scheduler has no task of its own: whoever polls drives it, inline. The `run_code` call
//! polls it beside the run (so calls progress while the program computes), and each binding
//! future polls it when the runtime waits on that call; a call whose stages all complete at
//! once (most do) is answered within that one poll, with no wake-up and no task switch. Every
//! future the scheduler owns is polled with the `run_code` call's own waker, so whichever
//! future becomes ready, the call that drives everything is woken.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tracing::{Instrument, Span};

use crate::code::{CallFailure, CallOutcome};
use crate::held::{answer_bytes, HeldMemory};
use crate::json;
use crate::signal::{AbortController, AbortSignal};
use crate::telemetry;
use crate::tools::events::{elapsed_ms, now_ms, EventSink, SessionEvent};
use crate::tools::pipeline::CallShared;
use crate::tools::result::blocks_bytes;
use crate::tools::InputAnswers;
use crate::tools::{
    ContentBlock, ContextMessage, ContextSource, ExecutionMode, Registry, StagedCall,
    ToolExecutionInput, ToolExecutionResult, ToolOutcome, ToolRunContext,
};

use super::{sub_call_id, SubCallRecord};

/// The plugin name deferred image contexts are attributed to.
pub const DEFERRED_IMAGE_PLUGIN: &str = "tools-code-mode";

/// The reason the run's signal fires with when the run itself ended.
pub(crate) const SETTLED_REASON: &str = "run_code settled";

/// What the scheduler needs of its configuration.
pub(crate) struct DriverConfig {
    pub(crate) registry: Registry,
    pub(crate) max_parallel: usize,
    pub(crate) settle_grace: Duration,
    pub(crate) events: Option<Arc<dyn EventSink>>,
    /// The run's span: each started sub-call opens its own inside it.
    pub(crate) span: Span,
}

type LaneFuture = BoxFuture<'static, LaneDone>;
type BodyFuture = BoxFuture<'static, (usize, StagedCall)>;
type Answer = Result<Value, CallFailure>;

enum LaneDone {
    Started(Box<StagedCall>),
    Committed(Arc<ToolExecutionResult>),
}

/// A call the program made, waiting for its turn.
struct Queued {
    seq: usize,
    input: ToolExecutionInput,
}

/// A started call, in submission order, until it commits.
struct Started {
    seq: usize,
    name: String,
    /// When the call started, for its duration.
    at: Instant,
    /// Its span: every stage runs in it, and it closes once the call committed.
    span: Span,
    mode: ExecutionMode,
    arguments: Option<Arc<Value>>,
    /// The staged call once its body finished (or it needed none).
    settled: Option<StagedCall>,
    /// What its settled result is charged to the run's account for.
    held: usize,
    /// What commits in place of a body that was detached for ignoring its signal.
    fallback: Option<StagedCall>,
}

/// Where a call's answer waits for its binding future.
#[derive(Default)]
struct Reply {
    answer: Option<Answer>,
    /// What the answer is charged to the run's account for until it is taken.
    held: usize,
    waker: Option<Waker>,
}

/// One run's scheduler, shared by the `run_code` call and the run's binding futures.
pub(crate) struct Scheduler {
    state: Mutex<State>,
    run_signal: AbortSignal,
    settled: AbortController,
    parent_call_id: String,
    /// The run's account of host memory held outside its sandbox (see the module docs).
    held: Arc<HeldMemory>,
}

struct State {
    config: DriverConfig,
    template: ToolExecutionInput,
    root_call_id: String,
    /// The `run_code` call's channel back to the loop (deferred contexts, turn conclusion).
    outer: Arc<CallShared>,
    /// Events are logged for calls made by an agent only.
    events: Option<Arc<dyn EventSink>>,
    /// The `run_code` call's waker: every owned future is polled with it.
    waker: Option<Waker>,
    queue: VecDeque<Queued>,
    started: VecDeque<Started>,
    /// The call the lane is starting or committing.
    in_lane: Option<Started>,
    lane: Option<LaneFuture>,
    bodies: FuturesUnordered<BodyFuture>,
    exclusive_active: bool,
    records: Vec<SubCallRecord>,
    replies: Vec<Reply>,
    run_over: Option<BoxFuture<'static, String>>,
    host_signal: Option<BoxFuture<'static, String>>,
    grace: Option<Pin<Box<tokio::time::Sleep>>>,
    returned: bool,
}

impl Scheduler {
    /// The scheduler of one run of `run_code` called as `ctx`.
    pub(crate) fn new(ctx: &ToolRunContext, config: DriverConfig) -> Arc<Self> {
        let settled = AbortController::new();
        let run_signal = AbortSignal::any(&[ctx.signal().clone(), settled.signal()]);
        let template = ToolExecutionInput {
            call_id: String::new(),
            root_call_id: Some(ctx.root_call_id().to_owned()),
            name: String::new(),
            arguments: Value::Null,
            agent: ctx.agent().cloned(),
            parent: Some(ctx.token()),
            signal: run_signal.clone(),
            answers: None,
        };
        let events = ctx.agent().and(config.events.clone());
        let watched = run_signal.clone();
        Arc::new(Self {
            state: Mutex::new(State {
                config,
                template,
                root_call_id: ctx.root_call_id().to_owned(),
                outer: ctx.shared().clone(),
                events,
                waker: None,
                queue: VecDeque::new(),
                started: VecDeque::new(),
                in_lane: None,
                lane: None,
                bodies: FuturesUnordered::new(),
                exclusive_active: false,
                records: Vec::new(),
                replies: Vec::new(),
                run_over: Some(Box::pin(async move { watched.aborted().await })),
                host_signal: None,
                grace: None,
                returned: false,
            }),
            run_signal,
            settled,
            parent_call_id: ctx.call_id().to_owned(),
            held: Arc::default(),
        })
    }

    /// The run's account of the host memory it holds: the runtime limits it to the run's
    /// memory budget and charges what it holds itself.
    pub(crate) fn held(&self) -> Arc<HeldMemory> {
        self.held.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Held only inside one synchronous drive; a panicking hook is caught by the pipeline
        // before it can unwind through here.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The signal the program's run is given: it fires with the outer call's cancellation.
    pub(crate) fn run_signal(&self) -> AbortSignal {
        self.run_signal.clone()
    }

    fn over_reason(&self) -> String {
        self.run_signal
            .reason()
            .unwrap_or_else(|| SETTLED_REASON.to_owned())
    }

    /// Numbers and queues one call made by the program (`host_signal` fires when the runtime
    /// settles the run). The call starts at the next drive: the binding future's first poll,
    /// or the `run_code` call's next poll while the program computes.
    pub(crate) fn submit(
        self: &Arc<Self>,
        name: &str,
        arguments: Value,
        host_signal: AbortSignal,
        answers: Option<Arc<InputAnswers>>,
    ) -> Result<SubCall, String> {
        if self.run_signal.is_aborted() {
            return Err(format!(
                "run_code run is over ({}); {name} not dispatched",
                self.over_reason()
            ));
        }
        let mut state = self.lock();
        let seq = state.records.len() + 1;
        let mut input = state.template.clone();
        input.call_id = sub_call_id(&self.parent_call_id, seq);
        input.name = name.to_owned();
        input.arguments = arguments;
        input.answers = answers;
        state.records.push(SubCallRecord {
            sub_call_id: input.call_id.clone(),
            tool: input.name.clone(),
            outcome: CallOutcome::Abandoned,
        });
        state.replies.push(Reply::default());
        state.queue.push_back(Queued { seq, input });
        if state.host_signal.is_none() {
            state.host_signal = Some(Box::pin(async move { host_signal.aborted().await }));
        }
        drop(state);
        Ok(SubCall {
            scheduler: self.clone(),
            seq,
        })
    }

    /// Marks the run over: queued calls are abandoned, running calls see their signal fire.
    pub(crate) fn settle(&self) {
        self.settled.abort(SETTLED_REASON);
    }

    /// Polls the scheduler for the `run_code` call: remembers its waker, advances everything
    /// that can advance, and says whether every call has committed since the run returned.
    pub(crate) fn poll_outer(
        &self,
        cx: &mut Context<'_>,
        run_returned: bool,
    ) -> Poll<Vec<SubCallRecord>> {
        let mut state = self.lock();
        match &state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        if run_returned && !state.returned {
            state.returned = true;
            self.settle();
        }
        self.drive(&mut state, None);
        if state.returned
            && state.lane.is_none()
            && state.in_lane.is_none()
            && state.queue.is_empty()
            && state.started.is_empty()
            && state.bodies.is_empty()
        {
            return Poll::Ready(std::mem::take(&mut state.records));
        }
        Poll::Pending
    }

    /// Advances everything that can advance now. `polling` is the call whose binding future
    /// is driving (its answer needs no wake-up).
    fn drive(&self, state: &mut State, polling: Option<usize>) {
        let waker = state.waker.clone().unwrap_or_else(|| Waker::noop().clone());
        let mut cx = Context::from_waker(&waker);
        loop {
            let mut changed = false;
            if let Some(wait) = state.run_over.as_mut() {
                if wait.as_mut().poll(&mut cx).is_ready() {
                    state.run_over = None;
                    state.host_signal = None;
                }
            }
            if let Some(wait) = state.host_signal.as_mut() {
                if wait.as_mut().poll(&mut cx).is_ready() {
                    // The runtime settled the run (it fires its bindings' signal): the run is
                    // over now, not only once the runtime has waited for its calls.
                    state.host_signal = None;
                    self.settle();
                    changed = true;
                }
            }
            let over = self.run_signal.is_aborted();
            if over && !state.bodies.is_empty() {
                let grace = state.config.settle_grace;
                let timer = state
                    .grace
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(grace)));
                if timer.as_mut().poll(&mut cx).is_ready() {
                    self.detach(state);
                    changed = true;
                }
            }
            while let Poll::Ready(Some((seq, staged))) = state.bodies.poll_next_unpin(&mut cx) {
                if let Some(entry) = state.started.iter_mut().find(|s| s.seq == seq) {
                    self.settle_body(entry, staged);
                }
                changed = true;
            }
            if state.lane.is_none() {
                state.lane = self.next_lane(state, over, polling);
            }
            if let Some(lane) = state.lane.as_mut() {
                if let Poll::Ready(done) = lane.as_mut().poll(&mut cx) {
                    state.lane = None;
                    self.lane_done(state, done, polling);
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// Keeps a finished body's result, charged to the run's account, until its call commits.
    /// One that does not fit is dropped now, and its call commits as aborted: the account is
    /// overdrawn, so the run is failing and the program would never see the result.
    fn settle_body(&self, entry: &mut Started, staged: StagedCall) {
        let bytes = staged.held_bytes();
        if self.held.charge(bytes) {
            entry.fallback = None;
            entry.held = bytes;
            entry.settled = Some(staged);
            return;
        }
        self.held.release(bytes);
        drop(staged);
        entry.settled = entry.fallback.take();
    }

    fn append(&self, state: &State, event: SessionEvent) {
        if let Some(sink) = &state.events {
            if let Err(error) = sink.append(&event) {
                tracing::warn!(
                    "run_code ({}): event sink failed: {error}",
                    self.parent_call_id
                );
            }
        }
    }

    /// Leaves `answer` for call `seq`'s binding future, charged to the run's account until it
    /// is taken; one that does not fit is dropped for a short message (the run is failing).
    fn answer(&self, state: &mut State, seq: usize, answer: Answer, polling: Option<usize>) {
        let Some(reply) = seq.checked_sub(1).and_then(|i| state.replies.get_mut(i)) else {
            return;
        };
        let bytes = answer_bytes(&answer);
        let answer = if self.held.charge(bytes) {
            reply.held = bytes;
            answer
        } else {
            self.held.release(bytes);
            if let Ok(value) = answer {
                json::drop_deep(value);
            }
            Err(CallFailure::from(
                "the result passed the run's memory budget".to_owned(),
            ))
        };
        reply.answer = Some(answer);
        if polling != Some(seq) {
            if let Some(waker) = reply.waker.take() {
                waker.wake();
            }
        }
    }

    /// The next ordered stage, if one can run now: commit the head-of-line call if its body
    /// is done; otherwise abandon or start the next queued call if its slot is free.
    fn next_lane(
        &self,
        state: &mut State,
        over: bool,
        polling: Option<usize>,
    ) -> Option<LaneFuture> {
        if state.started.front().is_some_and(|s| s.settled.is_some()) {
            let mut head = state.started.pop_front()?;
            let staged = head.settled.take()?;
            let commit = within(
                async move { LaneDone::Committed(staged.commit().await) },
                &head.span,
            );
            state.in_lane = Some(head);
            return Some(commit);
        }
        loop {
            let head = state.queue.front()?;
            if over {
                let queued = state.queue.pop_front()?;
                let message = format!(
                    "run_code run is over ({}); {} tool call abandoned",
                    self.over_reason(),
                    queued.input.name
                );
                self.answer(state, queued.seq, Err(message.into()), polling);
                continue;
            }
            if self.held.overdrawn() {
                let queued = state.queue.pop_front()?;
                let message = format!(
                    "{} not started: what the run holds on the host passed its memory budget",
                    queued.input.name
                );
                self.answer(state, queued.seq, Err(message.into()), polling);
                continue;
            }
            // Re-read at start time: a registry change while queued can make a call exclusive.
            let mode = state.config.registry.execution_mode(&head.input);
            let running = state.bodies.len();
            let free = !state.exclusive_active
                && match mode {
                    ExecutionMode::Exclusive => running == 0,
                    ExecutionMode::Parallel => running < state.config.max_parallel,
                };
            if !free {
                return None;
            }
            let queued = state.queue.pop_front()?;
            if mode == ExecutionMode::Exclusive {
                state.exclusive_active = true;
            }
            let arguments = state
                .events
                .as_ref()
                .map(|_| Arc::new(json::clone_deep(&queued.input.arguments)));
            if let Some(arguments) = &arguments {
                self.append(
                    state,
                    SessionEvent::CodeDispatchStart {
                        time: now_ms(),
                        root_call_id: state.root_call_id.clone(),
                        parent_call_id: self.parent_call_id.clone(),
                        sub_call_id: queued.input.call_id.clone(),
                        name: queued.input.name.clone(),
                        arguments: arguments.clone(),
                    },
                );
            }
            let span = telemetry::sub_call_span(
                &state.config.span,
                &queued.input.name,
                &queued.input.call_id,
            );
            let name = queued.input.name.clone();
            let prepare = state.config.registry.prepare(queued.input);
            let lane = within(
                async move { LaneDone::Started(Box::new(prepare.await)) },
                &span,
            );
            state.in_lane = Some(Started {
                seq: queued.seq,
                name,
                at: Instant::now(),
                span,
                mode,
                arguments,
                settled: None,
                held: 0,
                fallback: None,
            });
            return Some(lane);
        }
    }

    fn lane_done(&self, state: &mut State, done: LaneDone, polling: Option<usize>) {
        let Some(mut entry) = state.in_lane.take() else {
            return;
        };
        match done {
            LaneDone::Started(staged) => {
                let staged = *staged;
                if staged.needs_dispatch() {
                    entry.fallback = Some(staged.detached_as_aborted());
                    let seq = entry.seq;
                    let body = within(async move { (seq, staged.dispatch().await) }, &entry.span);
                    state.bodies.push(body);
                } else {
                    entry.settled = Some(staged);
                }
                state.started.push_back(entry);
            }
            LaneDone::Committed(result) => {
                if entry.mode == ExecutionMode::Exclusive {
                    state.exclusive_active = false;
                }
                self.commit_effects(state, entry, result, polling);
            }
        }
    }

    /// What a commit hands back: contexts to the outer call, the settle event, the program's
    /// value or error.
    fn commit_effects(
        &self,
        state: &mut State,
        entry: Started,
        result: Arc<ToolExecutionResult>,
        polling: Option<usize>,
    ) {
        // The result is handed on below: its value to the answer, which is charged apart, and
        // its images and contexts to the loop, charged until the run ends (they live that
        // long).
        self.held.release(entry.held);
        let mut kept = result
            .additional_contexts
            .iter()
            .fold(0usize, |sum, context| {
                sum.saturating_add(blocks_bytes(&context.content))
            });
        if !result.is_error()
            && result
                .content
                .iter()
                .any(|block| matches!(block, ContentBlock::Image { .. }))
        {
            kept = kept.saturating_add(blocks_bytes(&result.content));
            state.outer.defer(ContextMessage {
                content: result.content.clone(),
                source: ContextSource::plugin(DEFERRED_IMAGE_PLUGIN),
            });
        }
        self.held.charge(kept);
        for context in &result.additional_contexts {
            state.outer.defer(context.clone());
        }
        if result.concludes_turn() {
            state.outer.conclude();
        }
        if let Some(arguments) = entry.arguments {
            self.append(
                state,
                SessionEvent::CodeDispatch {
                    time: now_ms(),
                    root_call_id: state.root_call_id.clone(),
                    parent_call_id: self.parent_call_id.clone(),
                    sub_call_id: sub_call_id(&self.parent_call_id, entry.seq),
                    name: entry.name.clone(),
                    arguments,
                    is_error: result.is_error(),
                    content: result.content.clone(),
                    duration_ms: elapsed_ms(entry.at),
                },
            );
        }
        let failure = result
            .error()
            .filter(|_| !entry.span.is_disabled())
            .map(|failure| {
                let kind = failure
                    .info
                    .as_ref()
                    .map_or("ToolError", |info| info.code.as_str());
                (kind.to_owned(), failure.message.clone())
            });
        let (outcome, answer) = if self.run_signal.is_aborted() {
            let message = format!(
                "run_code run is over ({}); {} result discarded",
                self.over_reason(),
                entry.name
            );
            (CallOutcome::Abandoned, Err(message.into()))
        } else if let Some(failure) = result.error() {
            (
                CallOutcome::Rejected,
                Err(CallFailure {
                    message: failure.message.clone(),
                    input: result.needs_input().cloned(),
                }),
            )
        } else {
            (CallOutcome::Resolved, Ok(take_value(result)))
        };
        telemetry::record_sub_call(
            &entry.span,
            outcome,
            failure
                .as_ref()
                .map(|(kind, message)| (kind.as_str(), message.as_str())),
        );
        if let Some(record) = entry
            .seq
            .checked_sub(1)
            .and_then(|i| state.records.get_mut(i))
        {
            record.outcome = outcome;
        }
        self.answer(state, entry.seq, answer, polling);
    }

    /// Bodies still running past the grace are left to finish on their own; their calls
    /// commit as aborted now.
    fn detach(&self, state: &mut State) {
        let bodies = std::mem::take(&mut state.bodies);
        tracing::warn!(
            "run_code ({}): {} tool call(s) ignored the end of their run for {:?}; they continue detached",
            self.parent_call_id,
            bodies.len(),
            state.config.settle_grace
        );
        tokio::spawn(bodies.for_each(|_| std::future::ready(())));
        for entry in &mut state.started {
            if entry.settled.is_none() {
                entry.settled = entry.fallback.take();
            }
        }
    }
}

/// The successful value, moved out when nobody else holds the result.
fn take_value(result: Arc<ToolExecutionResult>) -> Value {
    match Arc::try_unwrap(result) {
        Ok(mut owned) => match &mut owned.outcome {
            ToolOutcome::Success { value, .. } => std::mem::take(value),
            ToolOutcome::Failure(_) => Value::Null,
        },
        Err(shared) => shared.value().map(json::clone_deep).unwrap_or(Value::Null),
    }
}

/// The program's side of one sub-call: resolves when the call commits (or is abandoned).
pub(crate) struct SubCall {
    scheduler: Arc<Scheduler>,
    seq: usize,
}

impl SubCall {
    /// The answer, once there is one: its charge goes with it to the binding's caller.
    fn take(&self, state: &mut State) -> Option<Answer> {
        let reply = state.replies.get_mut(self.seq.checked_sub(1)?)?;
        let answer = reply.answer.take()?;
        self.scheduler.held.release(std::mem::take(&mut reply.held));
        Some(answer)
    }
}

impl Future for SubCall {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let scheduler = &self.scheduler;
        let mut state = scheduler.lock();
        if let Some(answer) = self.take(&mut state) {
            return Poll::Ready(answer);
        }
        scheduler.drive(&mut state, Some(self.seq));
        if let Some(answer) = self.take(&mut state) {
            return Poll::Ready(answer);
        }
        if let Some(reply) = self
            .seq
            .checked_sub(1)
            .and_then(|i| state.replies.get_mut(i))
        {
            match &reply.waker {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                _ => reply.waker = Some(cx.waker().clone()),
            }
        }
        Poll::Pending
    }
}

/// `future` boxed, inside `span` when something records it (else the wrapper would only cost:
/// it enters and leaves a span that does nothing at every poll).
fn within<F>(future: F, span: &Span) -> BoxFuture<'static, F::Output>
where
    F: Future + Send + 'static,
{
    if span.is_disabled() {
        Box::pin(future)
    } else {
        Box::pin(future.instrument(span.clone()))
    }
}

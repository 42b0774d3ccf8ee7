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
//! When the run is over (it settled, or the outer call was cancelled), queued calls are
//! abandoned without events, and running calls see the run's signal fire. A body that ignores
//! its signal gets `settle_grace` to stop; then it is detached and its call commits as
//! `ABORTED`. The driver returns only when every started call has committed, so no event lands
//! after `run_code` returns.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::code::CallOutcome;
use crate::json;
use crate::signal::{AbortController, AbortSignal};
use crate::tools::events::{now_ms, EventSink, SessionEvent};
use crate::tools::{
    ContentBlock, ContextMessage, ContextSource, ExecutionMode, Registry, StagedCall,
    ToolExecutionInput, ToolExecutionResult, ToolOutcome, ToolRunContext,
};

use super::SubCallRecord;

/// The plugin name deferred image contexts are attributed to.
pub const DEFERRED_IMAGE_PLUGIN: &str = "tools-code-mode";

type Reply = oneshot::Sender<Result<Value, String>>;

/// A call the program made, waiting for its turn.
pub(crate) struct Submission {
    seq: usize,
    input: ToolExecutionInput,
    reply: Reply,
    /// The runtime's signal for this binding call: it fires when the run settles.
    host_signal: AbortSignal,
}

/// What the bindings of one run share with its driver.
pub(crate) struct RunScope {
    /// The outer call's id, the parent of every sub-call id.
    parent_call_id: String,
    root_call_id: String,
    template: ToolExecutionInput,
    /// Fires when the run is over: the outer call was cancelled or the run settled.
    run_signal: AbortSignal,
    settled: AbortController,
    submissions: mpsc::UnboundedSender<Submission>,
    dispatches: AtomicU64,
}

impl RunScope {
    /// The scope of one run of `run_code` called as `ctx`, and the receiving end of its
    /// submissions.
    pub(crate) fn new(ctx: &ToolRunContext) -> (Arc<Self>, mpsc::UnboundedReceiver<Submission>) {
        let settled = AbortController::new();
        let run_signal = AbortSignal::any(&[ctx.signal().clone(), settled.signal()]);
        let (submissions, receiver) = mpsc::unbounded_channel();
        let template = ToolExecutionInput {
            call_id: String::new(),
            root_call_id: Some(ctx.root_call_id().to_owned()),
            name: String::new(),
            arguments: Value::Null,
            agent: ctx.agent().cloned(),
            parent: Some(ctx.token()),
            signal: run_signal.clone(),
        };
        let scope = Arc::new(Self {
            parent_call_id: ctx.call_id().to_owned(),
            root_call_id: ctx.root_call_id().to_owned(),
            template,
            run_signal,
            settled,
            submissions,
            dispatches: AtomicU64::new(0),
        });
        (scope, receiver)
    }

    /// The signal the program's run is given: it fires with the outer call's cancellation.
    pub(crate) fn run_signal(&self) -> AbortSignal {
        self.run_signal.clone()
    }

    /// Marks the run over (the runtime returned): queued calls are abandoned from now on.
    pub(crate) fn settle(&self) {
        self.settled.abort(SETTLED_REASON);
    }

    fn over_reason(&self) -> String {
        self.run_signal
            .reason()
            .unwrap_or_else(|| SETTLED_REASON.to_owned())
    }

    /// Numbers and queues one call; the receiver resolves when the call commits.
    pub(crate) fn submit(
        &self,
        name: &str,
        arguments: Value,
        host_signal: AbortSignal,
    ) -> Result<oneshot::Receiver<Result<Value, String>>, String> {
        if self.run_signal.is_aborted() {
            return Err(format!(
                "run_code run is over ({}); {name} not dispatched",
                self.over_reason()
            ));
        }
        let n = self.dispatches.fetch_add(1, Ordering::Relaxed) + 1;
        let (reply, receiver) = oneshot::channel();
        let mut input = self.template.clone();
        input.call_id = format!("{}:code:{n}", self.parent_call_id);
        input.name = name.to_owned();
        input.arguments = arguments;
        let submission = Submission {
            seq: usize::try_from(n).unwrap_or(usize::MAX),
            input,
            reply,
            host_signal,
        };
        self.submissions.send(submission).map_err(|_| {
            format!(
                "run_code run is over ({}); {name} not dispatched",
                self.over_reason()
            )
        })?;
        Ok(receiver)
    }
}

/// The reason the run's signal fires with when the run itself ended.
pub(crate) const SETTLED_REASON: &str = "run_code settled";

/// What the driver needs besides the run's scope.
pub(crate) struct DriverConfig {
    pub(crate) registry: Registry,
    pub(crate) max_parallel: usize,
    pub(crate) settle_grace: Duration,
    pub(crate) events: Option<Arc<dyn EventSink>>,
}

/// A started call, in submission order, until it commits.
struct Started {
    seq: usize,
    name: String,
    mode: ExecutionMode,
    reply: Reply,
    arguments: Option<Arc<Value>>,
    /// The staged call once its body finished (or it needed none).
    settled: Option<StagedCall>,
    /// What commits in place of a body that was detached for ignoring its signal.
    fallback: Option<StagedCall>,
}

enum LaneDone {
    Started(StagedCall),
    Committed(Arc<ToolExecutionResult>),
}

type LaneFuture = Pin<Box<dyn Future<Output = LaneDone> + Send>>;
type BodyFuture = Pin<Box<dyn Future<Output = (usize, StagedCall)> + Send>>;

/// One run's scheduler state, owned by its driver. The lane's future and the running bodies
/// live beside it in [`drive`], so that waiting on them borrows nothing of this.
struct Driver<'a> {
    scope: &'a RunScope,
    config: &'a DriverConfig,
    ctx: &'a ToolRunContext,
    queue: VecDeque<Submission>,
    /// Started calls not yet committed, in submission order.
    started: VecDeque<Started>,
    /// The call the lane is starting or committing.
    in_lane: Option<Started>,
    exclusive_active: bool,
    records: Vec<SubCallRecord>,
}

impl Driver<'_> {
    fn events(&self) -> Option<&Arc<dyn EventSink>> {
        // Sub-calls are logged only for calls made by an agent, as in the reference.
        self.ctx.agent().and(self.config.events.as_ref())
    }

    fn append(&self, event: SessionEvent) {
        if let Some(sink) = self.events() {
            if let Err(error) = sink.append(&event) {
                tracing::warn!(
                    "run_code ({}): event sink failed: {error}",
                    self.scope.parent_call_id
                );
            }
        }
    }

    fn accept(&mut self, submission: Submission) {
        let index = submission.seq.saturating_sub(1);
        if self.records.len() <= index {
            self.records.resize_with(index + 1, || SubCallRecord {
                sub_call_id: String::new(),
                tool: String::new(),
                outcome: CallOutcome::Abandoned,
            });
        }
        self.records[index] = SubCallRecord {
            sub_call_id: submission.input.call_id.clone(),
            tool: submission.input.name.clone(),
            outcome: CallOutcome::Abandoned,
        };
        self.queue.push_back(submission);
    }

    /// The next ordered stage, if one can run now: commit the head-of-line call if its body
    /// is done; otherwise abandon or start the next queued call if its slot is free.
    fn next_lane(&mut self, running: usize, over: bool) -> Option<LaneFuture> {
        if self.started.front().is_some_and(|s| s.settled.is_some()) {
            let mut head = self.started.pop_front()?;
            let staged = head.settled.take()?;
            self.in_lane = Some(head);
            return Some(Box::pin(async move {
                LaneDone::Committed(staged.commit().await)
            }));
        }
        loop {
            let head = self.queue.front()?;
            if over {
                let submission = self.queue.pop_front()?;
                let name = submission.input.name;
                let _ = submission.reply.send(Err(format!(
                    "run_code run is over ({}); {name} tool call abandoned",
                    self.scope.over_reason()
                )));
                continue;
            }
            // Re-read at start time: a registry change while queued can make a call exclusive.
            let mode = self.config.registry.execution_mode(&head.input);
            let free = !self.exclusive_active
                && match mode {
                    ExecutionMode::Exclusive => running == 0,
                    ExecutionMode::Parallel => running < self.config.max_parallel,
                };
            if !free {
                return None;
            }
            let submission = self.queue.pop_front()?;
            if mode == ExecutionMode::Exclusive {
                self.exclusive_active = true;
            }
            let arguments = self
                .events()
                .map(|_| Arc::new(json::clone_deep(&submission.input.arguments)));
            if let Some(arguments) = &arguments {
                self.append(SessionEvent::CodeDispatchStart {
                    time: now_ms(),
                    root_call_id: self.scope.root_call_id.clone(),
                    parent_call_id: self.scope.parent_call_id.clone(),
                    sub_call_id: submission.input.call_id.clone(),
                    name: submission.input.name.clone(),
                    arguments: arguments.clone(),
                });
            }
            self.in_lane = Some(Started {
                seq: submission.seq,
                name: submission.input.name.clone(),
                mode,
                reply: submission.reply,
                arguments,
                settled: None,
                fallback: None,
            });
            let prepare = self.config.registry.prepare(submission.input);
            return Some(Box::pin(async move { LaneDone::Started(prepare.await) }));
        }
    }

    fn lane_done(&mut self, done: LaneDone, bodies: &mut FuturesUnordered<BodyFuture>) {
        let Some(mut entry) = self.in_lane.take() else {
            return;
        };
        match done {
            LaneDone::Started(staged) => {
                if staged.needs_dispatch() {
                    entry.fallback = Some(staged.detached_as_aborted());
                    let seq = entry.seq;
                    bodies.push(Box::pin(async move { (seq, staged.dispatch().await) }));
                } else {
                    entry.settled = Some(staged);
                }
                self.started.push_back(entry);
            }
            LaneDone::Committed(result) => {
                if entry.mode == ExecutionMode::Exclusive {
                    self.exclusive_active = false;
                }
                self.commit_effects(entry, result);
            }
        }
    }

    /// What a commit hands back: contexts to the outer call, the settle event, the program's
    /// value or error.
    fn commit_effects(&mut self, entry: Started, result: Arc<ToolExecutionResult>) {
        let ctx = self.ctx;
        if !result.is_error()
            && result
                .content
                .iter()
                .any(|block| matches!(block, ContentBlock::Image { .. }))
        {
            ctx.defer_context(ContextMessage {
                content: result.content.clone(),
                source: ContextSource::plugin(DEFERRED_IMAGE_PLUGIN),
            });
        }
        for context in &result.additional_contexts {
            ctx.defer_context(context.clone());
        }
        if result.concludes_turn() {
            ctx.conclude_turn();
        }
        if let Some(arguments) = entry.arguments {
            self.append(SessionEvent::CodeDispatch {
                time: now_ms(),
                root_call_id: self.scope.root_call_id.clone(),
                parent_call_id: self.scope.parent_call_id.clone(),
                sub_call_id: format!("{}:code:{}", self.scope.parent_call_id, entry.seq),
                name: entry.name.clone(),
                arguments,
                is_error: result.is_error(),
                content: result.content.clone(),
            });
        }
        let (outcome, reply) = if self.scope.run_signal.is_aborted() {
            let message = format!(
                "run_code run is over ({}); {} result discarded",
                self.scope.over_reason(),
                entry.name
            );
            (CallOutcome::Abandoned, Err(message))
        } else if let Some(failure) = result.error() {
            (CallOutcome::Rejected, Err(failure.message.clone()))
        } else {
            (CallOutcome::Resolved, Ok(take_value(result)))
        };
        if let Some(record) = entry
            .seq
            .checked_sub(1)
            .and_then(|index| self.records.get_mut(index))
        {
            record.outcome = outcome;
        }
        let _ = entry.reply.send(reply);
    }

    fn body_done(&mut self, seq: usize, staged: StagedCall) {
        if let Some(entry) = self.started.iter_mut().find(|s| s.seq == seq) {
            entry.fallback = None;
            entry.settled = Some(staged);
        }
    }

    /// Bodies still running past the grace are left to finish on their own; their calls
    /// commit as aborted now.
    fn detach(&mut self, bodies: FuturesUnordered<BodyFuture>) {
        tracing::warn!(
            "run_code ({}): {} tool call(s) ignored the end of their run for {:?}; they continue detached",
            self.scope.parent_call_id,
            bodies.len(),
            self.config.settle_grace
        );
        tokio::spawn(bodies.for_each(|_| std::future::ready(())));
        for entry in &mut self.started {
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

/// Waits on `future` if there is one, forever otherwise (for `select!` branches whose
/// condition already excludes the empty case).
async fn maybe<F: Future + Unpin>(future: Option<&mut F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

/// Drives one run's sub-calls until the run has returned (`run_returned` resolves) and every
/// call it made has committed or been abandoned. Returns every sub-call in submission order.
pub(crate) async fn drive(
    scope: &RunScope,
    config: &DriverConfig,
    ctx: &ToolRunContext,
    mut submissions: mpsc::UnboundedReceiver<Submission>,
    mut run_returned: oneshot::Receiver<()>,
) -> Vec<SubCallRecord> {
    let mut driver = Driver {
        scope,
        config,
        ctx,
        queue: VecDeque::new(),
        started: VecDeque::new(),
        in_lane: None,
        exclusive_active: false,
        records: Vec::new(),
    };
    let mut lane: Option<LaneFuture> = None;
    let mut bodies: FuturesUnordered<BodyFuture> = FuturesUnordered::new();
    let mut returned = false;
    let mut host_signal: Option<AbortSignal> = None;
    let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        while let Ok(submission) = submissions.try_recv() {
            host_signal.get_or_insert_with(|| submission.host_signal.clone());
            driver.accept(submission);
        }
        let over = scope.run_signal.is_aborted();
        if over && grace.is_none() && !bodies.is_empty() {
            grace = Some(Box::pin(tokio::time::sleep(config.settle_grace)));
        }
        if lane.is_none() {
            lane = driver.next_lane(bodies.len(), over);
        }
        if returned
            && lane.is_none()
            && driver.in_lane.is_none()
            && driver.queue.is_empty()
            && driver.started.is_empty()
            && bodies.is_empty()
        {
            return driver.records;
        }
        let host = host_signal.clone();
        tokio::select! {
            done = maybe(lane.as_mut()), if lane.is_some() => {
                lane = None;
                driver.lane_done(done, &mut bodies);
            }
            Some((seq, staged)) = bodies.next(), if !bodies.is_empty() => {
                driver.body_done(seq, staged);
            }
            Some(submission) = submissions.recv() => {
                host_signal.get_or_insert_with(|| submission.host_signal.clone());
                driver.accept(submission);
            }
            _ = scope.run_signal.aborted(), if !over => {}
            _ = async { match &host { Some(signal) => signal.aborted().await, None => std::future::pending().await } },
                if host.is_some() && !over =>
            {
                // The runtime settled the run (it fires its bindings' signal): the run is over
                // now, not only once the runtime has waited for its calls.
                scope.settle();
            }
            _ = &mut run_returned, if !returned => {
                returned = true;
                scope.settle();
            }
            () = maybe(grace.as_mut()), if grace.is_some() && !bodies.is_empty() => {
                driver.detach(std::mem::take(&mut bodies));
            }
        }
    }
}

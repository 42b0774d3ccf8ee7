//! The pipeline's extension points, each run in registration order:
//! pre-execute (a waterfall of allow / deny / ask), execute wrappers (around the body; a
//! wrapper may replace only the signal), post-execute (a waterfall of accept / replace / block),
//! result observers (observe only), and the approval hook that resolves `ask`.
//!
//! Waterfall semantics: a hook gets a `next` handle for the rest of the chain; calling it
//! delegates, returning without calling it short-circuits. Hook failures (errors or panics)
//! are pipeline failures: they end the call with an error result.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;

use super::content::{ContentBlock, ContextMessage};
use super::error::ToolError;
use super::pipeline::{dispatch_body, Dispatch, ToolCall};
use super::registry::Registry;
use super::result::ToolExecutionResult;
use super::scope::AgentScope;
use crate::signal::AbortSignal;

/// The verdict of the pre-execute waterfall. Rewriting arguments is deliberately impossible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreDecision {
    /// Let the call proceed to the guards and the body.
    Allow,
    /// Refuse the call; it still goes through post-execute as an error.
    Deny {
        /// The error message the caller sees.
        reason: String,
    },
    /// Route to the approval hook; without one (or without an agent) the call is denied.
    Ask {
        /// Why approval is needed, shown to the approver and used as the denial if none is
        /// available.
        reason: Option<String>,
    },
}

/// The verdict of the post-execute waterfall. `Block` turns the result into an error whose
/// content is the feedback; every variant may attach contexts for the loop.
#[derive(Clone, Debug, PartialEq)]
pub enum PostDecision {
    /// Keep the outcome, optionally replacing its content.
    Accept {
        /// Replacement content; `None` keeps the result's own.
        content: Option<Vec<ContentBlock>>,
        /// Contexts to hand the loop with the result.
        additional_contexts: Vec<ContextMessage>,
    },
    /// Replace a successful value (validated and rendered again); an error for failed results.
    AcceptValue {
        /// The replacement value.
        value: Value,
        /// Contexts to hand the loop with the result.
        additional_contexts: Vec<ContextMessage>,
    },
    /// Turn the result into an error whose content is `feedback`.
    Block {
        /// The content the model sees instead of the result; its text is also the error message.
        feedback: Vec<ContentBlock>,
        /// Contexts to hand the loop with the result.
        additional_contexts: Vec<ContextMessage>,
    },
}

impl PostDecision {
    /// Accept unchanged.
    pub fn accept() -> Self {
        PostDecision::Accept {
            content: None,
            additional_contexts: Vec::new(),
        }
    }

    /// The contexts this decision hands the loop, whatever the variant.
    pub fn additional_contexts_mut(&mut self) -> &mut Vec<ContextMessage> {
        match self {
            PostDecision::Accept {
                additional_contexts,
                ..
            }
            | PostDecision::AcceptValue {
                additional_contexts,
                ..
            }
            | PostDecision::Block {
                additional_contexts,
                ..
            } => additional_contexts,
        }
    }
}

/// The answers an approval channel can give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// Allow this one call.
    AllowedOnce,
    /// The user refused the call.
    Rejected,
    /// Allow this call and, without asking again, every later call of the same tool in the
    /// scope.
    AllowedFor(ApprovalScope),
    /// Refuse this call and every later call of the same tool in the scope.
    RejectedFor(ApprovalScope),
    /// The request was cancelled before an answer; the call counts as aborted if the caller
    /// was cancelled too.
    Cancelled,
    /// No channel could ask anyone.
    Unavailable,
}

/// How far an approval answer reaches beyond the call it was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ApprovalScope {
    /// The rest of the run the call belongs to (the agent's call and every call its
    /// program makes).
    Run,
    /// The rest of the agent's session (a CLI invocation, an MCP session).
    Session,
}

impl ApprovalScope {
    /// `run` or `session`, as answers spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalScope::Run => "run",
            ApprovalScope::Session => "session",
        }
    }

    /// Reads `call` (`None`: this call only), `run` or `session`; `Err` for anything else.
    pub fn parse(text: &str) -> Result<Option<Self>, String> {
        match text {
            "call" => Ok(None),
            "run" => Ok(Some(ApprovalScope::Run)),
            "session" => Ok(Some(ApprovalScope::Session)),
            other => Err(format!(
                "unknown approval scope {other:?}: use call, run or session"
            )),
        }
    }
}

/// What an approval channel is asked.
#[derive(Clone, Debug)]
pub struct ApprovalRequest {
    /// The agent that made the call.
    pub agent: AgentScope,
    /// The called tool's name.
    pub tool_name: String,
    /// The call's id.
    pub call_id: String,
    /// The call's (snapshotted) arguments, so a person can see what they approve.
    pub arguments: Arc<Value>,
    /// The reason the pre-execute hook gave for asking.
    pub reason: Option<String>,
    /// The caller's cancellation; a channel should stop waiting when it fires.
    pub signal: AbortSignal,
}

/// Resolves `ask` decisions. Anything but an allowing answer denies; a failure fails closed.
/// Scoped answers are remembered by the registry: later calls in their scope are decided
/// without the hook.
pub trait ApprovalHook: Send + Sync + 'static {
    /// Asks for approval of one call and resolves with the answer.
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome>;
}

impl<F, Fut> ApprovalHook for F
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ApprovalOutcome> + Send + 'static,
{
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        self(request).boxed()
    }
}

pub(crate) type PreHook = dyn Fn(Arc<ToolCall>, PreNext) -> BoxFuture<'static, Result<PreDecision, ToolError>>
    + Send
    + Sync;
pub(crate) type ExecuteHook = dyn Fn(ExecuteCall, ExecuteNext) -> BoxFuture<'static, Result<ToolExecutionResult, ToolError>>
    + Send
    + Sync;
pub(crate) type PostHook = dyn Fn(
        Arc<ToolCall>,
        Arc<ToolExecutionResult>,
        PostNext,
    ) -> BoxFuture<'static, Result<PostDecision, ToolError>>
    + Send
    + Sync;
pub(crate) type ResultObserver =
    dyn Fn(&ToolCall, &Arc<ToolExecutionResult>) -> Result<(), ToolError> + Send + Sync;
pub(crate) type CallObserver = dyn Fn(&ToolCall) + Send + Sync;

/// A snapshot of every hook, taken once per call so registrations during a call do not tear it.
#[derive(Default, Clone)]
pub(crate) struct HookSet {
    pub(crate) pre: Vec<(u64, Arc<PreHook>)>,
    pub(crate) execute: Vec<(u64, Arc<ExecuteHook>)>,
    pub(crate) post: Vec<(u64, Arc<PostHook>)>,
    pub(crate) results: Vec<(u64, Arc<ResultObserver>)>,
    pub(crate) calls: Vec<(u64, Arc<CallObserver>)>,
    pub(crate) approval: Option<(u64, Arc<dyn ApprovalHook>)>,
    /// Hooks registered for an agent scope: hook id → scope id. They run only for calls made
    /// by that agent or an agent nested in it.
    pub(crate) scopes: HashMap<u64, u64>,
}

impl HookSet {
    /// Moves the hooks registered under `id` out of this set.
    pub(crate) fn take(&mut self, id: u64) -> HookSet {
        use super::registry::take_entries as split;
        let approval = match &self.approval {
            Some((i, _)) if *i == id => self.approval.take(),
            _ => None,
        };
        HookSet {
            pre: split(&mut self.pre, id),
            execute: split(&mut self.execute, id),
            post: split(&mut self.post, id),
            results: split(&mut self.results, id),
            calls: split(&mut self.calls, id),
            approval,
            scopes: self
                .scopes
                .remove(&id)
                .map(|scope| HashMap::from([(id, scope)]))
                .unwrap_or_default(),
        }
    }

    /// The hooks that apply to a call by `agent` (all of them when none is scoped).
    pub(crate) fn for_agent(self: &Arc<Self>, agent: Option<&AgentScope>) -> Arc<HookSet> {
        if self.scopes.is_empty() {
            return self.clone();
        }
        let chain = agent.map(AgentScope::chain).unwrap_or_default();
        let applies = |id: &u64| {
            self.scopes
                .get(id)
                .is_none_or(|scope| chain.contains(scope))
        };
        fn keep<T: Clone>(entries: &[(u64, T)], applies: &dyn Fn(&u64) -> bool) -> Vec<(u64, T)> {
            entries
                .iter()
                .filter(|(id, _)| applies(id))
                .cloned()
                .collect()
        }
        Arc::new(HookSet {
            pre: keep(&self.pre, &applies),
            execute: keep(&self.execute, &applies),
            post: keep(&self.post, &applies),
            results: keep(&self.results, &applies),
            calls: keep(&self.calls, &applies),
            approval: self.approval.clone(),
            scopes: HashMap::new(),
        })
    }
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<unprintable panic payload>".to_owned()
    }
}

/// Runs a user callback's future, turning a panic (while creating or polling it) into an error.
pub(crate) async fn contained<T>(
    label: &str,
    make: impl FnOnce() -> BoxFuture<'static, Result<T, ToolError>>,
) -> Result<T, ToolError> {
    let future = match catch_unwind(AssertUnwindSafe(make)) {
        Ok(future) => future,
        Err(payload) => {
            return Err(ToolError::new(format!(
                "{label} panicked: {}",
                panic_message(&*payload)
            )))
        }
    };
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => Err(ToolError::new(format!(
            "{label} panicked: {}",
            panic_message(&*payload)
        ))),
    }
}

/// The rest of the pre-execute waterfall.
pub struct PreNext {
    pub(crate) hooks: Arc<HookSet>,
    pub(crate) index: usize,
    pub(crate) call: Arc<ToolCall>,
}

impl PreNext {
    /// Runs the remaining hooks; the end of the chain allows.
    pub fn run(self) -> BoxFuture<'static, Result<PreDecision, ToolError>> {
        let Some((_, hook)) = self.hooks.pre.get(self.index).cloned() else {
            return futures::future::ready(Ok(PreDecision::Allow)).boxed();
        };
        let next = PreNext {
            hooks: self.hooks,
            index: self.index + 1,
            call: self.call.clone(),
        };
        let call = self.call;
        async move { contained("pre-execute hook", || hook(call, next)).await }.boxed()
    }
}

/// What an execute wrapper sees: the call, the signal in force at this layer, and the registry
/// (e.g. to read the tool's declared timeout).
pub struct ExecuteCall {
    /// The call being executed.
    pub call: Arc<ToolCall>,
    /// The signal in force at this layer (the caller's, or an outer wrapper's replacement).
    pub signal: AbortSignal,
    pub(crate) registry: Registry,
}

impl ExecuteCall {
    /// The registry running the call.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// The rest of the execute chain, ending in the tool body. Consumed by `run`, so the body is
/// dispatched at most once per call.
pub struct ExecuteNext {
    pub(crate) dispatch: Arc<Dispatch>,
    pub(crate) index: usize,
}

impl ExecuteNext {
    /// Runs the inner wrappers and the body under `signal` (pass the one you were given to keep
    /// it). The caller's own cancellation is always fused back in before the body runs.
    pub fn run(
        self,
        signal: AbortSignal,
    ) -> BoxFuture<'static, Result<ToolExecutionResult, ToolError>> {
        let dispatch = self.dispatch;
        let Some((_, hook)) = dispatch.hooks.execute.get(self.index).cloned() else {
            return async move { Ok(dispatch_body(dispatch, signal).await) }.boxed();
        };
        let call = ExecuteCall {
            call: dispatch.call.clone(),
            signal,
            registry: dispatch.registry.clone(),
        };
        let next = ExecuteNext {
            dispatch,
            index: self.index + 1,
        };
        async move { contained("execute wrapper", || hook(call, next)).await }.boxed()
    }
}

/// The rest of the post-execute waterfall.
pub struct PostNext {
    pub(crate) hooks: Arc<HookSet>,
    pub(crate) index: usize,
    pub(crate) call: Arc<ToolCall>,
    pub(crate) result: Arc<ToolExecutionResult>,
}

impl PostNext {
    /// Runs the remaining hooks; the end of the chain accepts unchanged.
    pub fn run(self) -> BoxFuture<'static, Result<PostDecision, ToolError>> {
        let Some((_, hook)) = self.hooks.post.get(self.index).cloned() else {
            return futures::future::ready(Ok(PostDecision::accept())).boxed();
        };
        let next = PostNext {
            hooks: self.hooks,
            index: self.index + 1,
            call: self.call.clone(),
            result: self.result.clone(),
        };
        let (call, result) = (self.call, self.result);
        async move { contained("post-execute hook", || hook(call, result, next)).await }.boxed()
    }
}

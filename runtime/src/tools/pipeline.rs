//! One call, stage by stage, in the reference order:
//!
//! 1. argument snapshot, then the Code Mode collapse;
//! 2. caller already cancelled → `ABORTED_BEFORE_DISPATCH`, skipping every stage;
//! 3. pre-execute waterfall (allow / deny / ask → approval);
//! 4. guards (only if allowed);
//! 5. cancellation re-check;
//! 6. execute wrappers around the body (argument validation, body, output validation, render);
//! 7. post-execute waterfall (also for denials);
//! 8. `finalize_content`, exactly once for every outcome;
//! 9. the immutable final result, then result observers.
//!
//! The order is visible in three functions that run in sequence: `prepare` (1–5),
//! [`StagedCall::dispatch`] (6) and [`StagedCall::commit`] (7–9). [`Registry::execute`] runs
//! them back to back; the `run_code` scheduler runs them for many calls, preparing and
//! committing in one lane while bodies overlap.
//!
//! Cancellation precedence: only a successful outcome is replaced by `ABORTED` (body started)
//! or `ABORTED_BEFORE_DISPATCH` (body not started); every failure keeps its own cause.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::Value;

use super::content::ContextMessage;
use super::definition::{FinalizeFn, ToolDefinition, ToolRunContext};
use super::error::ToolError;
use super::hooks::{
    contained, panic_message, ExecuteNext, HookSet, PostDecision, PostNext, PreDecision, PreNext,
};
use super::hooks::{ApprovalOutcome, ApprovalRequest};
use super::registry::Registry;
use super::result::{ToolExecutionResult, ToolFailure, ToolOutcome};
use super::scope::{AgentScope, ExecutionToken};
use super::RUN_CODE_NAME;
use crate::json::is_lossless;
use crate::signal::AbortSignal;

/// What a caller asks the registry to run.
#[derive(Clone, Debug)]
pub struct ToolExecutionInput {
    /// The caller's id for this call.
    pub call_id: String,
    /// Defaults to `call_id`.
    pub root_call_id: Option<String>,
    /// The name of the tool to run.
    pub name: String,
    /// The call's arguments; they must be losslessly JSON-serializable.
    pub arguments: Value,
    /// The calling agent; `None` for a host-level call.
    pub agent: Option<AgentScope>,
    /// Set for nested dispatches (a `run_code` program's calls): exempt from the collapse.
    pub parent: Option<ExecutionToken>,
    /// The caller's cancellation; required.
    pub signal: AbortSignal,
    /// The answers to the questions an earlier call of the tool asked and could not have
    /// answered ([`crate::tools::NeedsInput`]), for the call made again; only the host that
    /// kept them sets this.
    pub answers: Option<Arc<crate::tools::InputAnswers>>,
}

impl ToolExecutionInput {
    /// A host-level, top-level call (no agent, no parent, its own root).
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
        signal: AbortSignal,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            root_call_id: None,
            name: name.into(),
            arguments,
            agent: None,
            parent: None,
            signal,
            answers: None,
        }
    }

    /// Makes the call on behalf of `agent`.
    pub fn agent(mut self, agent: &AgentScope) -> Self {
        self.agent = Some(agent.clone());
        self
    }

    /// Marks the call as nested under the execution `parent`.
    pub fn parent(mut self, parent: ExecutionToken) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Sets the id of the top-level call this one belongs to.
    pub fn root_call_id(mut self, root: impl Into<String>) -> Self {
        self.root_call_id = Some(root.into());
        self
    }
}

/// The immutable identity of one execution, shared by every stage, hook and observer.
#[derive(Debug)]
pub struct ToolCall {
    call_id: String,
    root_call_id: String,
    name: String,
    arguments: Arc<Value>,
    agent: Option<AgentScope>,
    parent: Option<ExecutionToken>,
    token: ExecutionToken,
    signal: AbortSignal,
    started: Instant,
    answers: Option<Arc<crate::tools::InputAnswers>>,
}

impl ToolCall {
    /// The caller's id for this call.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The id of the top-level call this one belongs to (its own id for a top-level call).
    pub fn root_call_id(&self) -> &str {
        &self.root_call_id
    }

    /// The name of the called tool.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The snapshotted arguments (`null` when the input was not lossless JSON).
    pub fn arguments(&self) -> &Arc<Value> {
        &self.arguments
    }

    /// The calling agent; `None` for a host-level call.
    pub fn agent(&self) -> Option<&AgentScope> {
        self.agent.as_ref()
    }

    /// The answers this call is made again with, after an earlier call of the tool needed a
    /// person's input ([`crate::tools::NeedsInput`]).
    pub fn answers(&self) -> Option<&Arc<crate::tools::InputAnswers>> {
        self.answers.as_ref()
    }

    /// The parent execution for a nested dispatch; `None` for a top-level call.
    pub fn parent(&self) -> Option<ExecutionToken> {
        self.parent
    }

    /// This execution's own token, which its nested calls carry as their parent.
    pub fn token(&self) -> ExecutionToken {
        self.token
    }

    /// When the call was made (its creation stage began).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The caller's signal (wrappers' replacements never show here).
    pub fn signal(&self) -> &AbortSignal {
        &self.signal
    }
}

impl Drop for ToolCall {
    fn drop(&mut self) {
        // Arguments may be thousands of levels deep; the last holder takes them apart.
        if let Some(arguments) = Arc::get_mut(&mut self.arguments) {
            crate::json::drop_deep(std::mem::take(arguments));
        }
    }
}

/// Per-call state the body and the pipeline share.
#[derive(Default)]
pub(crate) struct CallShared {
    pub(crate) deferred: Mutex<Vec<ContextMessage>>,
    pub(crate) concluded: AtomicBool,
    pub(crate) body_invoked: AtomicBool,
}

impl CallShared {
    /// Hands `context` to the loop with this call's result.
    pub(crate) fn defer(&self, context: ContextMessage) {
        lock(&self.deferred).push(context);
    }

    /// Asks the loop to end the turn after this call, if it succeeds.
    pub(crate) fn conclude(&self) {
        self.concluded.store(true, Ordering::Release);
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only push/take happen under this lock; a poisoned list is still consistent.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Everything the innermost execute stage needs.
pub(crate) struct Dispatch {
    pub(crate) registry: Registry,
    pub(crate) call: Arc<ToolCall>,
    pub(crate) shared: Arc<CallShared>,
    pub(crate) hooks: Arc<HookSet>,
}

/// Where a call stands between stages.
enum Stage {
    /// Prepared and allowed: the execute chain (wrappers and body) runs next.
    Dispatch(Arc<Dispatch>),
    /// Still subject to post-execute (executed calls, denials).
    Post(ToolExecutionResult),
    /// Final already (pipeline failures, pre-dispatch aborts, collapse).
    Final(ToolExecutionResult),
    /// Its body was left running detached: it commits as aborted after dispatch.
    Detached,
}

/// One call partway through the pipeline, for schedulers that run the stages of several calls
/// in an order of their own (the `run_code` scheduler prepares and commits in one lane and lets
/// bodies overlap). [`Registry::prepare`] runs creation, pre-execute, approval, guards and the
/// cancellation re-check; [`StagedCall::dispatch`] runs the execute wrappers and the body;
/// [`StagedCall::commit`] runs post-execute, `finalize_content` and the result observers.
/// [`Registry::execute`] is exactly these three in a row.
///
/// Dropping a staged call drops the call: it never reaches post-execute or the observers.
pub struct StagedCall {
    registry: Registry,
    call: Arc<ToolCall>,
    hooks: Arc<HookSet>,
    shared: Arc<CallShared>,
    finalizer: Option<Arc<FinalizeFn>>,
    stage: Stage,
}

impl std::fmt::Debug for StagedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedCall")
            .field("call", &self.call)
            .field("needs_dispatch", &self.needs_dispatch())
            .finish_non_exhaustive()
    }
}

/// Stages 1–5: creation (argument snapshot, the collapse), the pre-dispatch abort check,
/// pre-execute, approval, guards and the cancellation re-check.
pub(crate) async fn prepare(registry: Registry, input: ToolExecutionInput) -> StagedCall {
    let ToolExecutionInput {
        call_id,
        root_call_id,
        name,
        arguments,
        agent,
        parent,
        signal,
        answers,
    } = input;
    // 1. Creation: capture the finalizer, snapshot arguments, apply the collapse.
    let nested = parent.is_some();
    let (visible, collapses) = registry.resolve_with_collapse(&name, agent.as_ref(), nested);
    let collapsed = visible.is_some() && collapses;
    let finalizer: Option<Arc<FinalizeFn>> = if collapsed && !signal.is_aborted() {
        None
    } else {
        visible.as_ref().and_then(|d| d.finalize_content.clone())
    };
    let lossless = is_lossless(&arguments);
    let call = Arc::new(ToolCall {
        root_call_id: root_call_id.unwrap_or_else(|| call_id.clone()),
        call_id,
        name,
        arguments: Arc::new(if lossless { arguments } else { Value::Null }),
        agent,
        parent,
        token: ExecutionToken::fresh(),
        signal,
        started: Instant::now(),
        answers,
    });
    let hooks = registry.hooks().for_agent(call.agent.as_ref());
    for (_, observer) in &hooks.calls {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| observer(&call))) {
            tracing::warn!(
                "tool \"{}\" ({}): call observer failed: {}",
                call.name,
                call.call_id,
                panic_message(&*payload)
            );
        }
    }
    let shared = Arc::new(CallShared::default());
    let stage = if !lossless {
        Stage::Final(ToolExecutionResult::failure(
            "tool execution arguments must be losslessly JSON-serializable",
            None,
        ))
    } else if collapsed {
        if call.signal.is_aborted() {
            Stage::Final(ToolExecutionResult::aborted_before_dispatch(None))
        } else {
            let name = &call.name;
            let error = ToolError::coded(
                "ToolNotFoundError",
                super::error::codes::UNKNOWN_TOOL,
                format!(
                    "unknown tool \"{name}\": only `{RUN_CODE_NAME}` is callable directly — call `{name}` from inside a `{RUN_CODE_NAME}` program instead"
                ),
            );
            Stage::Final(ToolExecutionResult::from_error(error))
        }
    } else if call.signal.is_aborted() {
        // 2. Caller already cancelled: no stage runs.
        Stage::Final(ToolExecutionResult::aborted_before_dispatch(None))
    } else {
        let dispatch = Arc::new(Dispatch {
            registry: registry.clone(),
            call: call.clone(),
            shared: shared.clone(),
            hooks: hooks.clone(),
        });
        gate(dispatch).await
    };
    StagedCall {
        registry,
        call,
        hooks,
        shared,
        finalizer,
        stage,
    }
}

impl StagedCall {
    /// The call's immutable identity.
    pub fn call(&self) -> &Arc<ToolCall> {
        &self.call
    }

    /// Host memory the call's result holds once there is one (see
    /// [`ToolExecutionResult::held_bytes`]); nothing before its body has run.
    pub(crate) fn held_bytes(&self) -> usize {
        match &self.stage {
            Stage::Post(result) | Stage::Final(result) => result.held_bytes(),
            Stage::Dispatch(_) | Stage::Detached => 0,
        }
    }

    /// Whether the body stage is still to run (the call was allowed and not cancelled).
    pub fn needs_dispatch(&self) -> bool {
        matches!(self.stage, Stage::Dispatch(_))
    }

    /// What commits in place of this call if its body is left running detached (it ignored
    /// its cancellation past every grace): the same call, aborted after dispatch.
    pub(crate) fn detached_as_aborted(&self) -> StagedCall {
        StagedCall {
            registry: self.registry.clone(),
            call: self.call.clone(),
            hooks: self.hooks.clone(),
            shared: self.shared.clone(),
            finalizer: self.finalizer.clone(),
            stage: Stage::Detached,
        }
    }

    /// Stage 6: the execute wrappers around the body, then output validation and render. A call
    /// that was denied, failed or cancelled earlier passes through unchanged.
    pub async fn dispatch(mut self) -> StagedCall {
        if let Stage::Dispatch(dispatch) = self.stage {
            self.stage = execute_chain(dispatch).await;
        }
        self
    }

    /// Stages 7–9: post-execute (for executed calls and denials), the last cancellation check,
    /// `finalize_content` exactly once, the immutable final result and its observers. A call
    /// not yet dispatched is dispatched first.
    pub async fn commit(self) -> Arc<ToolExecutionResult> {
        let staged = if self.needs_dispatch() {
            self.dispatch().await
        } else {
            self
        };
        let StagedCall {
            registry,
            call,
            hooks,
            shared,
            finalizer,
            stage,
        } = staged;
        let stage = match stage {
            Stage::Detached => Stage::Post(ToolExecutionResult::aborted(None)),
            other => other,
        };
        // 7. Post-execute, then the last cancellation check.
        let result = match stage {
            Stage::Final(result) => result,
            Stage::Post(result) => {
                let posted = post_execute(&registry, &call, &hooks, result).await;
                stage_event("post", if posted.is_ok() { "ok" } else { "error" });
                match posted {
                    Ok(result) if call.signal.is_aborted() && !result.is_error() => {
                        cancellation_result(&shared, &result)
                    }
                    Ok(result) => result,
                    Err(error) => ToolExecutionResult::from_error(error),
                }
            }
            // `dispatch` above leaves no call in this stage, and `Detached` became `Post`.
            Stage::Dispatch(_) | Stage::Detached => {
                ToolExecutionResult::aborted_before_dispatch(None)
            }
        };
        // 8. finalize_content, exactly once.
        let result = finalize(&call, finalizer.as_deref(), result);
        // 9. Freeze and notify.
        let result = Arc::new(result);
        for (_, observer) in &hooks.results {
            let failure = match catch_unwind(AssertUnwindSafe(|| observer(&call, &result))) {
                Ok(Ok(())) => continue,
                Ok(Err(error)) => error.message().to_owned(),
                Err(payload) => panic_message(&*payload),
            };
            tracing::warn!(
                "tool \"{}\" ({}): tools/result observer failed: {failure}",
                call.name,
                call.call_id
            );
        }
        result
    }
}

/// Stages 3–5: pre-execute, approval, guards and the re-check.
async fn gate(dispatch: Arc<Dispatch>) -> Stage {
    let call = &dispatch.call;
    let pre = PreNext {
        hooks: dispatch.hooks.clone(),
        index: 0,
        call: call.clone(),
    };
    let gate = match pre.run().await {
        Ok(gate) => gate,
        Err(error) => return Stage::Final(ToolExecutionResult::from_error(error)),
    };
    stage_event("policy", decision_name(&gate));
    let (decision, approval_cancelled) = match gate {
        PreDecision::Ask { reason } => match ask(&dispatch, reason).await {
            Ok(resolution) => {
                stage_event("approval", decision_name(&resolution.0));
                resolution
            }
            Err(error) => return Stage::Final(ToolExecutionResult::from_error(error)),
        },
        other => (other, false),
    };
    if call.signal.is_aborted() && approval_cancelled {
        return Stage::Post(ToolExecutionResult::aborted_before_dispatch(None));
    }
    let denial = match decision {
        PreDecision::Allow => match dispatch.registry.guard_reason(call) {
            Ok(reason) => reason,
            Err(error) => return Stage::Final(ToolExecutionResult::from_error(error)),
        },
        PreDecision::Deny { reason } => Some(reason),
        // `ask` resolves to allow or deny above; anything else fails closed.
        PreDecision::Ask { reason } => {
            Some(reason.unwrap_or_else(|| default_ask_reason(&call.name)))
        }
    };
    if let Some(reason) = denial {
        return Stage::Post(ToolExecutionResult::failure(reason, None));
    }
    // 5. Cancellation re-check.
    if call.signal.is_aborted() {
        return Stage::Post(ToolExecutionResult::aborted_before_dispatch(None));
    }
    Stage::Dispatch(dispatch)
}

/// Stage 6: the execute chain around the body, normalisation and the deferred contexts.
async fn execute_chain(dispatch: Arc<Dispatch>) -> Stage {
    let call = &dispatch.call;
    let caller_signal = call.signal.clone();
    let chain = ExecuteNext {
        dispatch: dispatch.clone(),
        index: 0,
    };
    let result = match chain.run(caller_signal).await {
        Ok(result) => result,
        Err(error) => return Stage::Final(ToolExecutionResult::from_error(error)),
    };
    let mut result = match normalize(&dispatch, result) {
        Ok(result) => result,
        Err(error) => return Stage::Final(ToolExecutionResult::from_error(error)),
    };
    let deferred = std::mem::take(&mut *lock(&dispatch.shared.deferred));
    if !deferred.is_empty() {
        let own = std::mem::replace(&mut result.additional_contexts, deferred);
        result.additional_contexts.extend(own);
    }
    if call.signal.is_aborted() && !result.is_error() {
        return Stage::Post(cancellation_result(&dispatch.shared, &result));
    }
    Stage::Post(result)
}

/// Marks a stage on the current span (the sub-call's, when a `run_code` program made the call):
/// a span event for a trace, a `debug` record for a log.
fn stage_event(stage: &'static str, result: &'static str) {
    tracing::debug!(
        codemode.stage = stage,
        codemode.stage.result = result,
        "{stage}"
    );
}

fn decision_name(decision: &PreDecision) -> &'static str {
    match decision {
        PreDecision::Allow => "allow",
        PreDecision::Deny { .. } => "deny",
        PreDecision::Ask { .. } => "ask",
    }
}

fn default_ask_reason(name: &str) -> String {
    format!("tool \"{name}\" requires approval (not yet supported)")
}

/// Resolves `ask` through the approval hook: `(decision, whether approval was cancelled)`.
async fn ask(
    dispatch: &Dispatch,
    reason: Option<String>,
) -> Result<(PreDecision, bool), ToolError> {
    let call = &dispatch.call;
    let name = &call.name;
    let deny = |reason: String| PreDecision::Deny { reason };
    let Some((_, approval)) = dispatch.hooks.approval.clone() else {
        return Ok((
            deny(reason.unwrap_or_else(|| default_ask_reason(name))),
            false,
        ));
    };
    let Some(agent) = call.agent.clone() else {
        return Ok((
            deny(format!(
                "tool \"{name}\" requires approval, but the call has no agent to route it through"
            )),
            false,
        ));
    };
    let request = ApprovalRequest {
        agent,
        tool_name: name.clone(),
        call_id: call.call_id.clone(),
        arguments: call.arguments.clone(),
        reason,
        signal: call.signal.clone(),
    };
    let outcome = contained("approval hook", || {
        let pending = approval.request(request);
        Box::pin(async move { Ok::<_, ToolError>(pending.await) })
    })
    .await?;
    Ok(match outcome {
        ApprovalOutcome::AllowedOnce | ApprovalOutcome::AllowedFor(_) => {
            (PreDecision::Allow, false)
        }
        ApprovalOutcome::Rejected => (deny(format!("the user rejected tool \"{name}\"")), false),
        ApprovalOutcome::RejectedFor(scope) => (
            deny(format!(
                "the user rejected tool \"{name}\" for the rest of this {}",
                scope.as_str()
            )),
            false,
        ),
        ApprovalOutcome::Cancelled => (
            deny(format!("approval for tool \"{name}\" was cancelled")),
            true,
        ),
        ApprovalOutcome::Unavailable => (
            deny(format!(
                "tool \"{name}\" requires approval, but no approval channel is available"
            )),
            false,
        ),
    })
}

/// The innermost execute stage: fuse the caller's signal back in, resolve, validate the
/// arguments, run the body to completion, and turn its value into a canonical result.
pub(crate) async fn dispatch_body(
    dispatch: Arc<Dispatch>,
    wrapper_signal: AbortSignal,
) -> ToolExecutionResult {
    let call = &dispatch.call;
    // A fused signal holds its sources, so the wrapper's stays alive as long as `signal`.
    let signal = if call.signal.same(&wrapper_signal) {
        wrapper_signal
    } else {
        AbortSignal::any(&[call.signal.clone(), wrapper_signal])
    };
    if signal.is_aborted() {
        return ToolExecutionResult::aborted_before_dispatch(None);
    }
    let Some(tool) =
        dispatch
            .registry
            .resolve_execution(&call.name, call.agent.as_ref(), call.parent.is_some())
    else {
        return ToolExecutionResult::from_error(ToolError::unknown_tool(&call.name));
    };
    dispatch.shared.body_invoked.store(true, Ordering::Release);
    // Arguments were checked lossless when the call was made (a lossy one became `null`).
    let violations = tool.parameters.validate_lossless(&call.arguments, "");
    if !violations.is_empty() {
        stage_event("validation", "invalid");
        return ToolExecutionResult::from_error(ToolError::invalid_args(&violations));
    }
    stage_event("validation", "valid");
    let Some(execute) = tool.execute.clone() else {
        return ToolExecutionResult::from_error(ToolError::unknown_tool(&call.name));
    };
    let context = ToolRunContext {
        call: call.clone(),
        signal: signal.clone(),
        shared: dispatch.shared.clone(),
    };
    let arguments = call.arguments.clone();
    let returned = contained("tool body", || execute(arguments, context)).await;
    stage_event("execute", if returned.is_ok() { "ok" } else { "error" });
    let result = match returned.and_then(|value| success_result(&dispatch, &tool, value)) {
        Ok(result) => result,
        Err(error) => return ToolExecutionResult::from_error(error),
    };
    if signal.is_aborted() {
        ToolExecutionResult::aborted(Some(&result))
    } else {
        result
    }
}

/// Validates a value against the output schema, renders it and computes presentation metadata.
fn success_result(
    dispatch: &Dispatch,
    tool: &ToolDefinition,
    value: Value,
) -> Result<ToolExecutionResult, ToolError> {
    let name = &tool.name;
    let Some(output) = &tool.output else {
        return Err(ToolError::invalid_output(
            name,
            &["output contract missing".to_owned()],
        ));
    };
    if !is_lossless(&value) {
        return Err(ToolError::invalid_output(
            name,
            &["value is not lossless JSON".to_owned()],
        ));
    }
    let violations = output.schema.validate_lossless(&value, "value");
    if !violations.is_empty() {
        return Err(ToolError::invalid_output(name, &violations));
    }
    let arguments = &dispatch.call.arguments;
    let projection_error = |projector: &str, message: String| {
        ToolError::invalid_output(name, &[format!("output.{projector} failed: {message}")])
    };
    let content = match catch_unwind(AssertUnwindSafe(|| (output.render)(arguments, &value))) {
        Ok(Ok(content)) => content,
        Ok(Err(error)) => return Err(projection_error("render", error.message().to_owned())),
        Err(payload) => return Err(projection_error("render", panic_message(&*payload))),
    };
    let meta = match (&output.presentation_meta, dispatch.call.parent) {
        (Some(meta), None) => match catch_unwind(AssertUnwindSafe(|| meta(arguments, &value))) {
            Ok(Ok(meta)) if is_lossless(&meta) => Some(meta),
            Ok(Ok(_)) => {
                let violation = "output.presentationMeta returned non-lossless JSON".to_owned();
                return Err(ToolError::invalid_output(name, &[violation]));
            }
            Ok(Err(error)) => {
                return Err(projection_error(
                    "presentationMeta",
                    error.message().to_owned(),
                ))
            }
            Err(payload) => {
                return Err(projection_error(
                    "presentationMeta",
                    panic_message(&*payload),
                ))
            }
        },
        _ => None,
    };
    let mut result = ToolExecutionResult {
        outcome: ToolOutcome::Success {
            value,
            concludes_turn: dispatch.shared.concluded.load(Ordering::Acquire),
        },
        content,
        meta,
        additional_contexts: Vec::new(),
        canonical: None,
        input: None,
    };
    result.canonical = Some(dispatch.call.token);
    Ok(result)
}

/// Passes results the body stage produced; re-derives wrapper-authored successes through the
/// output contract (a wrapper cannot smuggle an unvalidated value past it).
fn normalize(
    dispatch: &Dispatch,
    result: ToolExecutionResult,
) -> Result<ToolExecutionResult, ToolError> {
    if result.canonical == Some(dispatch.call.token) || result.is_error() {
        return Ok(result);
    }
    let call = &dispatch.call;
    let Some(tool) =
        dispatch
            .registry
            .resolve_execution(&call.name, call.agent.as_ref(), call.parent.is_some())
    else {
        return Err(ToolError::unknown_tool(&call.name));
    };
    let contexts = result.additional_contexts;
    let value = match result.outcome {
        ToolOutcome::Success { value, .. } => value,
        ToolOutcome::Failure(_) => Value::Null,
    };
    let mut normalized = success_result(dispatch, &tool, value)?;
    normalized.additional_contexts = contexts;
    Ok(normalized)
}

fn cancellation_result(shared: &CallShared, prior: &ToolExecutionResult) -> ToolExecutionResult {
    if shared.body_invoked.load(Ordering::Acquire) {
        ToolExecutionResult::aborted(Some(prior))
    } else {
        ToolExecutionResult::aborted_before_dispatch(Some(prior))
    }
}

/// The message of a `block`: text blocks joined with newlines, other blocks named by type.
fn blocked_message(feedback: &[super::content::ContentBlock]) -> String {
    let parts: Vec<String> = feedback
        .iter()
        .map(|block| match block {
            super::content::ContentBlock::Text { text } => text.clone(),
            other => format!("[{} content]", other.kind()),
        })
        .collect();
    let message = parts.join("\n");
    if message.is_empty() {
        "tool result blocked by post-execute policy".to_owned()
    } else {
        message
    }
}

async fn post_execute(
    registry: &Registry,
    call: &Arc<ToolCall>,
    hooks: &Arc<HookSet>,
    result: ToolExecutionResult,
) -> Result<ToolExecutionResult, ToolError> {
    let result = Arc::new(result);
    let chain = PostNext {
        hooks: hooks.clone(),
        index: 0,
        call: call.clone(),
        result: result.clone(),
    };
    let decision = chain.run().await?;
    let result = Arc::try_unwrap(result).unwrap_or_else(|shared| copy_result(&shared));
    match decision {
        PostDecision::Block {
            feedback,
            additional_contexts,
        } => Ok(ToolExecutionResult {
            outcome: ToolOutcome::Failure(ToolFailure {
                message: blocked_message(&feedback),
                info: None,
            }),
            content: feedback,
            meta: None,
            additional_contexts,
            canonical: None,
            input: None,
        }),
        PostDecision::Accept {
            content,
            additional_contexts,
        } => {
            let mut accepted = result;
            if let Some(content) = content {
                accepted.content = content;
            }
            accepted.additional_contexts.extend(additional_contexts);
            Ok(accepted)
        }
        PostDecision::AcceptValue {
            value,
            additional_contexts,
        } => {
            if result.is_error() {
                return Err(ToolError::new(
                    "tools/post-execute cannot replace the value of a failed result",
                ));
            }
            let Some(tool) =
                registry.resolve_execution(&call.name, call.agent.as_ref(), call.parent.is_some())
            else {
                return Err(ToolError::unknown_tool(&call.name));
            };
            let dispatch = Dispatch {
                registry: registry.clone(),
                call: call.clone(),
                shared: Arc::new(CallShared::default()),
                hooks: hooks.clone(),
            };
            // The replacement keeps the original's turn conclusion.
            dispatch
                .shared
                .concluded
                .store(result.concludes_turn(), Ordering::Release);
            let mut replaced = success_result(&dispatch, &tool, value)?;
            replaced.additional_contexts = result.additional_contexts;
            replaced.additional_contexts.extend(additional_contexts);
            Ok(replaced)
        }
    }
}

/// A copy for when a hook kept the shared result: values may be deep, so no recursive clone.
fn copy_result(result: &ToolExecutionResult) -> ToolExecutionResult {
    let outcome = match &result.outcome {
        ToolOutcome::Success {
            value,
            concludes_turn,
        } => ToolOutcome::Success {
            value: crate::json::clone_deep(value),
            concludes_turn: *concludes_turn,
        },
        ToolOutcome::Failure(failure) => ToolOutcome::Failure(failure.clone()),
    };
    ToolExecutionResult {
        outcome,
        content: result.content.clone(),
        meta: result.meta.as_ref().map(crate::json::clone_deep),
        additional_contexts: result.additional_contexts.clone(),
        canonical: result.canonical,
        input: result.input.clone(),
    }
}

fn finalize(
    call: &ToolCall,
    finalizer: Option<&FinalizeFn>,
    mut result: ToolExecutionResult,
) -> ToolExecutionResult {
    let Some(finalizer) = finalizer else {
        return result;
    };
    match catch_unwind(AssertUnwindSafe(|| finalizer(call, &result))) {
        Ok(Some(content)) => {
            result.content = content;
            result
        }
        Ok(None) => result,
        Err(payload) => {
            let message = format!("finalize_content panicked: {}", panic_message(&*payload));
            ToolExecutionResult::failure(message, None)
        }
    }
}

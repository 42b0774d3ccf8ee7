//! What a tool is: its model-facing schema, its mandatory output contract, its async body and
//! the optional classifier, timeout, finalizer and presenters. Built with
//! [`ToolDefinition::builder`]; checked when registered.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use super::content::{ContentBlock, ContextMessage};
use super::error::ToolError;
use super::pipeline::{CallShared, ToolCall};
use super::result::ToolExecutionResult;
use super::schema::Schema;
use super::scope::{AgentScope, ExecutionToken};
use crate::signal::AbortSignal;

pub(crate) type ExecuteFn = dyn Fn(Arc<Value>, ToolRunContext) -> BoxFuture<'static, Result<Value, ToolError>>
    + Send
    + Sync;
type RenderFn = dyn Fn(&Value, &Value) -> Result<Vec<ContentBlock>, ToolError> + Send + Sync;
type MetaFn = dyn Fn(&Value, &Value) -> Result<Value, ToolError> + Send + Sync;
pub(crate) type FinalizeFn =
    dyn Fn(&ToolCall, &ToolExecutionResult) -> Option<Vec<ContentBlock>> + Send + Sync;
type ClassifierFn = dyn Fn(&Value) -> bool + Send + Sync;
type PresentCallFn = dyn Fn(&Value) -> Option<Value> + Send + Sync;
type PresentResultFn = dyn Fn(&Value, &ToolResultView) -> Option<Value> + Send + Sync;

/// The output contract: the canonical value's schema, how it renders for the model, and
/// optional presentation metadata (persisted with the result, top-level calls only).
#[derive(Clone)]
pub struct ToolOutput {
    pub(crate) schema: Schema,
    pub(crate) render: Arc<RenderFn>,
    pub(crate) presentation_meta: Option<Arc<MetaFn>>,
}

impl ToolOutput {
    /// `render(args, value)` turns the validated value into content blocks.
    pub fn new<R>(schema: Schema, render: R) -> Self
    where
        R: Fn(&Value, &Value) -> Result<Vec<ContentBlock>, ToolError> + Send + Sync + 'static,
    {
        Self {
            schema,
            render: Arc::new(render),
            presentation_meta: None,
        }
    }

    /// A string output rendered as one text block: the common case.
    pub fn text() -> Self {
        let schema = Schema::raw(serde_json::json!({"type": "string"}));
        // The literal above is in the subset; the fallback only keeps this total.
        let schema = schema.unwrap_or_else(|_| Schema::empty_parameters());
        Self::new(schema, |_, value| {
            Ok(vec![ContentBlock::text(value.as_str().unwrap_or_default())])
        })
    }

    /// Adds `meta(args, value)`, presentation metadata persisted with the result of top-level
    /// calls; it must return lossless JSON.
    pub fn presentation_meta<M>(mut self, meta: M) -> Self
    where
        M: Fn(&Value, &Value) -> Result<Value, ToolError> + Send + Sync + 'static,
    {
        self.presentation_meta = Some(Arc::new(meta));
        self
    }

    /// The schema every successful value must satisfy.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
}

/// What presenters see of a finished call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResultView {
    /// The final content the model saw.
    pub content: Vec<ContentBlock>,
    /// Whether the call failed.
    pub is_error: bool,
    /// The result's presentation metadata, if any.
    pub meta: Option<Value>,
}

/// A registrable tool. Clone is cheap (callbacks are shared).
#[derive(Clone)]
pub struct ToolDefinition {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: Schema,
    pub(crate) output: Option<ToolOutput>,
    pub(crate) execute: Option<Arc<ExecuteFn>>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) is_concurrency_safe: Option<Arc<ClassifierFn>>,
    pub(crate) finalize_content: Option<Arc<FinalizeFn>>,
    pub(crate) present_call: Option<Arc<PresentCallFn>>,
    pub(crate) present_result: Option<Arc<PresentResultFn>>,
    /// Where typed `run_code` requests wait for the call they belong to (`run_code` only).
    pub(crate) code_inbox: Option<Arc<crate::run_code::Inbox>>,
    /// The tool fetches URLs with the Web's `fetch` arguments: programs get a global `fetch`
    /// through it, and preflight checks their literal URLs with this.
    pub(crate) web_fetch: Option<crate::code::UrlCheck>,
}

impl std::fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("parameters", self.parameters.json())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ToolDefinition {
    /// Starts a definition for the tool called `name`.
    pub fn builder(name: impl Into<String>) -> ToolDefinitionBuilder {
        ToolDefinitionBuilder {
            definition: ToolDefinition {
                name: name.into(),
                description: String::new(),
                parameters: Schema::empty_parameters(),
                output: None,
                execute: None,
                timeout: None,
                is_concurrency_safe: None,
                finalize_content: None,
                present_call: None,
                present_result: None,
                code_inbox: None,
                web_fetch: None,
            },
        }
    }

    /// The name the model calls the tool by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model-facing description (empty unless set).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The argument schema.
    pub fn parameters(&self) -> &Schema {
        &self.parameters
    }

    /// The output contract; registration refuses a definition without one.
    pub fn output(&self) -> Option<&ToolOutput> {
        self.output.as_ref()
    }

    /// The model-facing projection: name, description and parameters, and the output schema
    /// when `with_output` (the SDK declares results; a wire listing does not).
    pub fn schema(&self, with_output: bool) -> super::ToolSchema {
        super::ToolSchema {
            name: self.name.clone(),
            description: Some(self.description.clone()),
            parameters: crate::json::clone_deep(self.parameters.json()),
            output: self
                .output
                .as_ref()
                .filter(|_| with_output)
                .map(|output| crate::json::clone_deep(output.schema().json())),
        }
    }

    /// The cooperative per-call budget the timeout policy enforces.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The URL check of a tool that fetches with the Web's arguments (see
    /// [`ToolDefinitionBuilder::web_fetch`]).
    pub fn web_fetch(&self) -> Option<&crate::code::UrlCheck> {
        self.web_fetch.as_ref()
    }

    fn args_valid(&self, args: &Value) -> bool {
        self.parameters.validate(args, "").is_empty()
    }

    /// Whether a call with `args` may overlap its siblings: only when the classifier exists,
    /// the arguments are valid and the classifier returns `true` without panicking.
    pub fn is_concurrency_safe(&self, args: &Value) -> bool {
        let Some(classifier) = &self.is_concurrency_safe else {
            return false;
        };
        if !self.args_valid(args) {
            return false;
        }
        catch_unwind(AssertUnwindSafe(|| classifier(args))).unwrap_or(false)
    }

    /// The tool's own pending-call card, or `None` for the generic one (also for arguments
    /// that do not validate, e.g. obsolete logged ones).
    pub fn present_call(&self, args: &Value) -> Option<Value> {
        let present = self.present_call.as_ref()?;
        if !self.args_valid(args) {
            return None;
        }
        catch_unwind(AssertUnwindSafe(|| present(args)))
            .ok()
            .flatten()
    }

    /// The tool's own result card, or `None` for the generic one.
    pub fn present_result(&self, args: &Value, result: &ToolResultView) -> Option<Value> {
        let present = self.present_result.as_ref()?;
        if !self.args_valid(args) {
            return None;
        }
        catch_unwind(AssertUnwindSafe(|| present(args, result)))
            .ok()
            .flatten()
    }
}

/// Builds a [`ToolDefinition`]; every check happens at registration, so building never fails.
pub struct ToolDefinitionBuilder {
    definition: ToolDefinition,
}

/// Continue building from an existing definition (e.g. to add a timeout to a shared tool).
impl From<ToolDefinition> for ToolDefinitionBuilder {
    fn from(definition: ToolDefinition) -> Self {
        Self { definition }
    }
}

impl ToolDefinitionBuilder {
    /// The model-facing description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.definition.description = description.into();
        self
    }

    /// The argument schema (default: an open object with no properties).
    pub fn parameters(mut self, schema: Schema) -> Self {
        self.definition.parameters = schema;
        self
    }

    /// The output contract (required to register).
    pub fn output(mut self, output: ToolOutput) -> Self {
        self.definition.output = Some(output);
        self
    }

    /// The body, given the validated arguments and the run context.
    pub fn execute<F, Fut>(mut self, body: F) -> Self
    where
        F: Fn(Arc<Value>, ToolRunContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.definition.execute = Some(Arc::new(move |args, ctx| body(args, ctx).boxed()));
        self
    }

    /// The body, given arguments decoded into `A` after schema validation; a decoding failure
    /// is `INVALID_ARGS` like any other argument violation.
    pub fn execute_typed<A, F, Fut>(mut self, body: F) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        F: Fn(A, ToolRunContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        let body = Arc::new(body);
        self.definition.execute = Some(Arc::new(move |args: Arc<Value>, ctx| {
            match decode_args::<A>(&args) {
                Ok(decoded) => body(decoded, ctx).boxed(),
                Err(error) => futures::future::ready(Err(error)).boxed(),
            }
        }));
        self
    }

    /// A cooperative budget: the timeout policy fuses a deadline into the body's signal.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.definition.timeout = Some(timeout);
        self
    }

    /// Opts calls into parallel scheduling when the classifier returns `true` for their args.
    pub fn concurrency_safe<F>(mut self, classifier: F) -> Self
    where
        F: Fn(&Value) -> bool + Send + Sync + 'static,
    {
        self.definition.is_concurrency_safe = Some(Arc::new(classifier));
        self
    }

    /// Replaces the final content of every outcome, exactly once per call (`None` keeps it).
    pub fn finalize_content<F>(mut self, finalize: F) -> Self
    where
        F: Fn(&ToolCall, &ToolExecutionResult) -> Option<Vec<ContentBlock>> + Send + Sync + 'static,
    {
        self.definition.finalize_content = Some(Arc::new(finalize));
        self
    }

    /// Builds the tool's own pending-call card from valid arguments (`None` for the generic one).
    pub fn present_call<F>(mut self, present: F) -> Self
    where
        F: Fn(&Value) -> Option<Value> + Send + Sync + 'static,
    {
        self.definition.present_call = Some(Arc::new(present));
        self
    }

    /// Builds the tool's own result card from valid arguments and the finished call (`None` for
    /// the generic one).
    pub fn present_result<F>(mut self, present: F) -> Self
    where
        F: Fn(&Value, &ToolResultView) -> Option<Value> + Send + Sync + 'static,
    {
        self.definition.present_result = Some(Arc::new(present));
        self
    }

    /// Marks the tool as a Web fetch (`{url, method?, headers?, body?}`): a TypeScript
    /// program's global `fetch(url, init?)` calls it, and preflight refuses a literal URL
    /// `check` refuses.
    pub fn web_fetch(mut self, check: crate::code::UrlCheck) -> Self {
        self.definition.web_fetch = Some(check);
        self
    }

    /// The finished definition, checked only when registered.
    pub fn build(self) -> ToolDefinition {
        self.definition
    }
}

/// What a tool body receives: the call's immutable identity, its cancellation signal (the
/// caller's fused with any wrapper's), and the two channels back to the agent loop.
pub struct ToolRunContext {
    pub(crate) call: Arc<ToolCall>,
    pub(crate) signal: AbortSignal,
    pub(crate) shared: Arc<CallShared>,
}

impl ToolRunContext {
    /// The call's immutable identity.
    pub fn call(&self) -> &Arc<ToolCall> {
        &self.call
    }

    /// The caller's id for this call.
    pub fn call_id(&self) -> &str {
        self.call.call_id()
    }

    /// The id of the top-level call this one belongs to.
    pub fn root_call_id(&self) -> &str {
        self.call.root_call_id()
    }

    /// The name the tool was called by.
    pub fn name(&self) -> &str {
        self.call.name()
    }

    /// The call's snapshotted arguments.
    pub fn arguments(&self) -> &Arc<Value> {
        self.call.arguments()
    }

    /// The calling agent; `None` for a host-level call.
    pub fn agent(&self) -> Option<&AgentScope> {
        self.call.agent()
    }

    /// The answers this call is made again with, after an earlier call of the tool needed a
    /// person's input ([`crate::tools::ToolError::needs_input`]).
    pub fn answers(&self) -> Option<&Arc<crate::tools::InputAnswers>> {
        self.call.answers()
    }

    /// The parent execution for a nested dispatch; `None` for a top-level call.
    pub fn parent(&self) -> Option<ExecutionToken> {
        self.call.parent()
    }

    /// This execution's token: pass it as the parent of calls the body makes itself.
    pub fn token(&self) -> ExecutionToken {
        self.call.token()
    }

    /// Stop cooperatively when this fires; settle only after owned work has stopped.
    pub fn signal(&self) -> &AbortSignal {
        &self.signal
    }

    /// Hands a context to the loop with this call's final result, even if the call later fails
    /// or is cancelled (a post-execute block discards it).
    pub fn defer_context(&self, context: ContextMessage) {
        self.shared.defer(context);
    }

    /// Asks the loop to end the turn after this call, if it succeeds.
    pub fn conclude_turn(&self) {
        self.shared.conclude();
    }

    /// The channel back to the loop, for work that outlives a borrow of this context.
    pub(crate) fn shared(&self) -> &Arc<CallShared> {
        &self.shared
    }
}

/// Decodes arguments with serde: a convenience for bodies registered with [`ToolDefinitionBuilder::execute`].
pub fn decode_args<'de, A: Deserialize<'de>>(args: &'de Value) -> Result<A, ToolError> {
    A::deserialize(args).map_err(|error| ToolError::invalid_args(&[error.to_string()]))
}

//! The `run_code` tool: the model writes one program, a [`CodeRuntime`] runs it, and every
//! tool call the program makes goes through the registry's full pipeline.
//!
//! [`install`] puts `run_code` on a registry as its Code Mode transport. A call binds the
//! calling scope's visible tools (never `run_code` itself) as the program's `tools` namespace,
//! with `ToolCallError` / `toolName` for rejections, and runs the program. Each binding call
//! becomes a sub-call `<callId>:code:<n>` (numbered in submission order) with `parent` set, so
//! it skips the Code Mode collapse but meets every policy, guard, approval, timeout and
//! observer a direct call meets. The scheduler (`scheduler.rs`) orders them; its events
//! (`tool/code-dispatch-start`, `tool/code-dispatch`) go to the configured sink, for calls made
//! by an agent. `run_code` returns only after every sub-call has settled.
//!
//! The value is `{logs, result?}`, rendered as one text block; a failed run is the
//! `CODE_RUN_FAILED` error `code run failed (<kind>): <message>`, followed by the captured
//! output. Hosts call it typed through [`run`]: a [`CodeRequest`] (the program, its language,
//! budgets and resumption) in, a [`CodeOutcome`] (the logs, the value or the failure with its
//! kind, cause and position, the pause, every sub-call and how it ended) out, through the same
//! pipeline a model's call takes. [`RunCodeConfig::on_run`] observes every run, typed or not.
//!
//! Architecture invariant: nothing here knows about wasm; any [`CodeRuntime`] will do.

pub mod prompt;
mod render;
mod request;
mod scheduler;
mod tool;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::code::{CallOutcome, CodeRuntime, RunResult};
use crate::tools::{EventSink, RegistrationGuard, Registry};

pub use render::{excerpt, output_text, paused_text, pretty_json, render_value, NO_OUTPUT};
pub(crate) use request::Inbox;
pub use request::{run, CodeOutcome, CodeRequest, CodeRun};
pub use scheduler::DEFERRED_IMAGE_PLUGIN;
pub use tool::{paused_json, Flavor, DESCRIPTION_PARAMETER, PYTHON_FLAVOR, TYPESCRIPT_FLAVOR};

/// How many sub-call bodies may run at once by default.
pub const DEFAULT_MAX_PARALLEL_SUB_CALLS: usize = 10;

/// How long, by default, a sub-call body may keep running after its run ended and its signal
/// fired, before it is detached and its call commits as aborted.
pub const DEFAULT_SETTLE_GRACE: Duration = Duration::from_secs(1);

/// One call a program made, in submission order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubCallRecord {
    /// `<callId>:code:<n>`.
    pub sub_call_id: String,
    /// The tool the program called.
    pub tool: String,
    /// `Resolved` or `Rejected` once the call committed; `Abandoned` when the run ended before
    /// it did (it never started, or it was aborted while running).
    pub outcome: CallOutcome,
}

/// What [`RunCodeConfig::on_run`] observers see of a run that reached the runtime.
#[derive(Debug, Clone, Copy)]
pub struct RunReport<'a> {
    /// The `run_code` call's id.
    pub call_id: &'a str,
    /// The runtime's result: logs, value or the structured failure.
    pub result: &'a RunResult,
    /// Every sub-call, in submission order.
    pub sub_calls: &'a [SubCallRecord],
}

/// Observes every run that reached the runtime, before `run_code` returns.
pub type RunObserver = Arc<dyn Fn(&RunReport<'_>) + Send + Sync>;

/// How `run_code` schedules and reports sub-calls.
#[derive(Clone)]
pub struct RunCodeConfig {
    /// Most sub-call bodies running at once (`>= 1`; `1` is strictly serial).
    pub max_parallel_sub_calls: usize,
    /// How long a sub-call body may ignore its run's end before it is detached.
    pub settle_grace: Duration,
    /// Where `tool/code-dispatch-start` and `tool/code-dispatch` go (calls by an agent only).
    pub events: Option<Arc<dyn EventSink>>,
    /// Called with each run's structured result and sub-calls.
    pub on_run: Option<RunObserver>,
    /// Tools whose calls pause the run instead of running (see `RunRequest::pause_on`); the
    /// runtime must keep paused runs.
    pub pause_on: BTreeSet<String>,
    /// Tools whose calls pause the run for an approval (see `RunRequest::approve_on`).
    pub approve_on: BTreeSet<String>,
    /// Check each program's tool calls against the tools' schemas before it runs (on by
    /// default; see [`crate::code::Preflight`]).
    pub preflight: bool,
    /// Caps on the calls each program may make (see `RunRequest::call_caps`).
    pub call_caps: crate::code::CallCaps,
}

/// The id of a program's `seq`th call (from 1) in the `run_code` call `parent`.
pub(crate) fn sub_call_id(parent: &str, seq: usize) -> String {
    format!("{parent}{SUB_CALL_MARK}{seq}")
}

const SUB_CALL_MARK: &str = ":code:";

/// Whether `call_id` names a call a program made (inside a `run_code` call), rather than a
/// call the agent made itself.
pub fn is_sub_call_id(call_id: &str) -> bool {
    call_id.contains(SUB_CALL_MARK)
}

/// The id of the call the agent made that `call_id` belongs to: its own, or for a program's
/// call, its `run_code` call's.
pub fn root_call_id(call_id: &str) -> &str {
    call_id.split(SUB_CALL_MARK).next().unwrap_or(call_id)
}

impl Default for RunCodeConfig {
    fn default() -> Self {
        Self {
            max_parallel_sub_calls: DEFAULT_MAX_PARALLEL_SUB_CALLS,
            settle_grace: DEFAULT_SETTLE_GRACE,
            events: None,
            on_run: None,
            pause_on: BTreeSet::new(),
            approve_on: BTreeSet::new(),
            preflight: true,
            call_caps: crate::code::CallCaps::default(),
        }
    }
}

impl fmt::Debug for RunCodeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunCodeConfig")
            .field("max_parallel_sub_calls", &self.max_parallel_sub_calls)
            .field("settle_grace", &self.settle_grace)
            .field("events", &self.events.is_some())
            .field("on_run", &self.on_run.is_some())
            .field("pause_on", &self.pause_on)
            .field("approve_on", &self.approve_on)
            .field("preflight", &self.preflight)
            .field("call_caps", &self.call_caps)
            .finish()
    }
}

impl RunCodeConfig {
    /// Sets [`RunCodeConfig::max_parallel_sub_calls`].
    pub fn max_parallel_sub_calls(mut self, n: usize) -> Self {
        self.max_parallel_sub_calls = n;
        self
    }

    /// Sets [`RunCodeConfig::settle_grace`].
    pub fn settle_grace(mut self, grace: Duration) -> Self {
        self.settle_grace = grace;
        self
    }

    /// Sends sub-call events to `sink`.
    pub fn events(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = Some(sink);
        self
    }

    /// Caps the calls each program may make: in all, and per tool by name.
    pub fn call_caps(mut self, caps: crate::code::CallCaps) -> Self {
        self.call_caps = caps;
        self
    }

    /// Makes calls of `tools` pause the run instead of running.
    pub fn pause_on(mut self, tools: impl IntoIterator<Item = String>) -> Self {
        self.pause_on.extend(tools);
        self
    }

    /// Makes calls of `tools` pause the run until a human approves or denies them.
    pub fn approve_on(mut self, tools: impl IntoIterator<Item = String>) -> Self {
        self.approve_on.extend(tools);
        self
    }

    /// Sets [`RunCodeConfig::preflight`]: `false` runs programs without checking their calls
    /// first.
    pub fn preflight(mut self, on: bool) -> Self {
        self.preflight = on;
        self
    }

    /// Observes every run's structured result.
    pub fn on_run(mut self, observer: impl Fn(&RunReport<'_>) + Send + Sync + 'static) -> Self {
        self.on_run = Some(Arc::new(observer));
        self
    }
}

/// Why `run_code` cannot be installed, or its prompt assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunCodeError {
    /// [`RunCodeConfig::max_parallel_sub_calls`] is 0.
    #[error("maxParallelSubCalls must be a positive integer")]
    NoParallelSubCalls,
    /// A non-native mode with no code runtime to run programs.
    #[error("codemode: mode \"{mode}\" requires a code runtime — pass one to run_code::install (codemode_host::WasmCodeRuntime runs TypeScript in a wasm sandbox) or set the tools mode to \"native\"")]
    MissingRuntime {
        /// The scope's mode.
        mode: crate::tools::ToolMode,
    },
}

/// Installs `run_code` as `registry`'s Code Mode transport, running programs on `runtime`.
///
/// Without a runtime the tool is still listed (with the TypeScript texts), and every call
/// fails with an error saying a runtime is required. Refused: `max_parallel_sub_calls` of 0.
/// Dropping the guard uninstalls it.
pub fn install(
    registry: &Registry,
    runtime: Option<Arc<dyn CodeRuntime>>,
    config: RunCodeConfig,
) -> Result<RegistrationGuard, RunCodeError> {
    if config.max_parallel_sub_calls == 0 {
        return Err(RunCodeError::NoParallelSubCalls);
    }
    let flavor = match &runtime {
        Some(runtime) => Flavor::of(runtime.language()),
        None => &TYPESCRIPT_FLAVOR,
    };
    let definition = tool::definition(registry, runtime, config, flavor);
    Ok(registry.set_code_transport(definition))
}

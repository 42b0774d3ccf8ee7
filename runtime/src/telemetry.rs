//! The spans a run opens, named once here so that whatever reads them (an OpenTelemetry
//! exporter, a metrics layer, a log) agrees on their names and fields.
//!
//! A `run_code` call is one [`RUN_SPAN`]; each sub-call its program makes is an
//! [`SUB_CALL_SPAN`] inside it, with the pipeline's stages as events. Attribute names follow
//! OpenTelemetry's GenAI conventions for tool execution (`gen_ai.*`); what they do not cover is
//! under `codemode.*`. The spans are at `info`: a subscriber that does not want them (the
//! default `warn` log filter) disables them at their callsite, which is all they then cost.

use tracing::field::Empty;
use tracing::Span;

use crate::code::{CallOutcome, RunResult};

/// The span of one `run_code` call (a run, from its program's start to its last sub-call).
pub const RUN_SPAN: &str = "run_code";
/// The span of one sub-call a program made, from its start to its commit.
pub const SUB_CALL_SPAN: &str = "execute_tool";

/// How the run or sub-call ended: `value`, `paused` or the failure kind for a run
/// (`timeout`, `exception`, …); `resolved`, `rejected` or `abandoned` for a sub-call.
pub const OUTCOME: &str = "codemode.outcome";
/// What ran out or broke, for a failed run (`compute`, `wall`, `memory`, …).
pub const CAUSE: &str = "codemode.cause";
/// The called tool (`run_code` for a run).
pub const TOOL: &str = "gen_ai.tool.name";
/// Fuel the guest burned.
pub const FUEL: &str = "codemode.fuel";
/// Busy compute time, in milliseconds.
pub const COMPUTE_MS: &str = "codemode.compute_ms";
/// Wall-clock time from the run's start to its result, in milliseconds.
pub const WALL_MS: &str = "codemode.wall_ms";
/// Bytes of output the run's result holds (the ledger's count).
pub const OUTPUT_BYTES: &str = "codemode.output_bytes";
/// Sub-calls the program made.
pub const CALLS: &str = "codemode.calls";
/// A pipeline stage an event marks (`policy`, `approval`, `validation`, `execute`, `post`).
pub const STAGE: &str = "codemode.stage";

/// Opens the span of the `run_code` call `call_id`.
pub fn run_span(call_id: &str) -> Span {
    tracing::info_span!(
        "run_code",
        otel.name = "execute_tool run_code",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = "run_code",
        gen_ai.tool.call.id = call_id,
        codemode.outcome = Empty,
        codemode.cause = Empty,
        codemode.fuel = Empty,
        codemode.compute_ms = Empty,
        codemode.wall_ms = Empty,
        codemode.output_bytes = Empty,
        codemode.calls = Empty,
        "error.type" = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    )
}

/// How a run ended: `value`, `paused`, or its failure's kind.
pub fn outcome(result: &RunResult) -> &'static str {
    match (&result.error, &result.paused) {
        (Some(failure), _) => failure.kind.as_str(),
        (None, Some(_)) => "paused",
        (None, None) => "value",
    }
}

/// Records how a run ended on its span (the runtime records what it cost:
/// [`record_run_cost`]).
pub fn record_run(span: &Span, result: &RunResult, calls: usize) {
    // Recording looks each field up by name: skipped when nothing listens.
    if span.is_disabled() {
        return;
    }
    span.record(CALLS, whole(calls as u64));
    span.record(OUTCOME, outcome(result));
    if let Some(failure) = &result.error {
        span.record("error.type", failure.kind.as_str());
        if let Some(cause) = failure.cause {
            span.record(CAUSE, cause.as_str());
        }
        span.record("otel.status_code", "ERROR");
        span.record("otel.status_description", failure.message.as_str());
    }
}

/// What one run cost, as a runtime measures it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCost {
    /// Fuel the guest burned.
    pub fuel: u64,
    /// Busy compute time, in milliseconds.
    pub compute_ms: u64,
    /// Wall-clock time, in milliseconds.
    pub wall_ms: u64,
    /// Bytes of output the result holds.
    pub output_bytes: u64,
}

/// Records what a run cost on the `run_code` span it runs in (the current span when a runtime
/// runs a request).
pub fn record_run_cost(span: &Span, cost: RunCost) {
    span.record(FUEL, whole(cost.fuel));
    span.record(COMPUTE_MS, whole(cost.compute_ms));
    span.record(WALL_MS, whole(cost.wall_ms));
    span.record(OUTPUT_BYTES, whole(cost.output_bytes));
}

/// A count as a signed 64-bit integer, the integer type of OpenTelemetry attributes (an
/// unsigned one would be recorded as text).
fn whole(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Opens the span of sub-call `sub_call_id` to `tool`, inside the run's span.
pub fn sub_call_span(run: &Span, tool: &str, sub_call_id: &str) -> Span {
    tracing::info_span!(
        parent: run,
        "execute_tool",
        otel.name = format!("execute_tool {tool}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = sub_call_id,
        codemode.outcome = Empty,
        "error.type" = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    )
}

/// Records how a sub-call ended; a rejected one carries an error status with its message.
pub fn record_sub_call(span: &Span, outcome: CallOutcome, error: Option<(&str, &str)>) {
    if span.is_disabled() {
        return;
    }
    span.record(OUTCOME, outcome.as_str());
    if let Some((kind, message)) = error {
        span.record("error.type", kind);
        span.record("otel.status_code", "ERROR");
        span.record("otel.status_description", message);
    }
}

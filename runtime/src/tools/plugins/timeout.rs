//! The timeout policy: an execute wrapper that turns a tool's declared `timeout` into a
//! cooperative deadline. It fuses a timer into the signal the body sees, always hands the
//! caller's own signal back to later stages (it passes the fused one only downstream), and
//! replaces the outcome with `TOOL_TIMEOUT` only when its own timer fired first; a caller abort
//! that came first stays the registry's `ABORTED`.
//!
//! Enforcement is cooperative: the body is still awaited to completion after the deadline.
//! Needs a tokio runtime with the time driver.

use serde_json::Number;

use crate::json::write_number;
use crate::signal::{AbortController, AbortSignal};
use crate::tools::error::codes;
use crate::tools::hooks::{ExecuteCall, ExecuteNext};
use crate::tools::registry::{RegistrationGuard, Registry};
use crate::tools::result::ToolExecutionResult;
use crate::tools::ToolError;

/// The abort reason of the policy's own timer.
pub const TIMEOUT_REASON: &str = codes::TOOL_TIMEOUT;

/// `tool call timed out after <ms>ms`, the model-facing `TOOL_TIMEOUT` failure.
pub fn timeout_result(timeout: std::time::Duration) -> ToolExecutionResult {
    let ms = timeout.as_secs_f64() * 1000.0;
    let mut text = String::new();
    write_number(&Number::from_f64(ms).unwrap_or_else(|| 0.into()), &mut text);
    ToolExecutionResult::coded_failure(
        "ToolTimeoutError",
        codes::TOOL_TIMEOUT,
        format!("tool call timed out after {text}ms"),
    )
}

/// Installs the policy on `registry` (zero configuration: budgets come from definitions).
pub fn install(registry: &Registry) -> RegistrationGuard {
    registry.on_execute(wrap)
}

async fn wrap(exec: ExecuteCall, next: ExecuteNext) -> Result<ToolExecutionResult, ToolError> {
    let budget = exec
        .registry()
        .get(exec.call.name(), exec.call.agent())
        .and_then(|definition| definition.timeout());
    let Some(budget) = budget else {
        // No budget: delegate with the signal untouched.
        return next.run(exec.signal).await;
    };
    let timer = AbortController::new();
    let deadline = AbortSignal::any(&[exec.signal.clone(), timer.signal()]);
    let body = next.run(deadline);
    tokio::pin!(body);
    let sleep = tokio::time::sleep(budget);
    tokio::pin!(sleep);
    let mut timer_won = false;
    let mut slept = false;
    let result = loop {
        tokio::select! {
            biased;
            result = &mut body => break result,
            _ = &mut sleep, if !slept => {
                slept = true;
                // Ours only if the caller had not already cancelled: that abort keeps priority.
                timer_won = !exec.signal.is_aborted();
                timer.abort(TIMEOUT_REASON);
            }
        }
    };
    if timer_won {
        return Ok(timeout_result(budget));
    }
    result
}

//! The timeout policy (ported from the reference's timeout-policy suite).

mod tools_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_runtime::signal::{AbortController, AbortSignal};
use codemode_runtime::tools::plugins::timeout;
use codemode_runtime::tools::*;
use serde_json::json;
use tools_support::{keep, run, signalled, tool};

fn timed(
    name: &str,
    budget: Duration,
    body: impl Fn(
            Arc<serde_json::Value>,
            ToolRunContext,
        ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, ToolError>>
        + Send
        + Sync
        + 'static,
) -> ToolDefinition {
    ToolDefinitionBuilder::from(tool(name, body))
        .timeout(budget)
        .build()
}

/// A cooperative body: settles with its own abort error when its signal fires, else after `work`.
fn cooperative(
    work: Duration,
) -> impl Fn(
    Arc<serde_json::Value>,
    ToolRunContext,
) -> futures::future::BoxFuture<'static, Result<serde_json::Value, ToolError>>
       + Send
       + Sync
       + 'static {
    move |_, run_ctx| {
        Box::pin(async move {
            tokio::select! {
                reason = run_ctx.signal().aborted() => Err(ToolError::new(format!("provider aborted: {reason}"))),
                _ = tokio::time::sleep(work) => Ok(json!("done")),
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn delegates_untouched_without_a_budget() {
    let registry = Registry::new();
    timeout::install(&registry).keep();
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    keep(
        &registry,
        tool("plain", move |_, run_ctx| {
            *s.lock().unwrap() = Some(run_ctx.signal().clone());
            async { Ok(json!(1)) }
        }),
    );
    let caller = AbortController::new();
    let result = registry
        .execute(signalled("plain", json!({}), caller.signal()))
        .await;
    assert!(!result.is_error());
    assert!(
        seen.lock()
            .unwrap()
            .as_ref()
            .unwrap()
            .same(&caller.signal()),
        "the body got the caller's own signal"
    );
}

#[tokio::test(start_paused = true)]
async fn the_body_sees_the_derived_signal_and_post_execute_sees_the_callers() {
    let registry = Registry::new();
    timeout::install(&registry).keep();
    let body_signal = Arc::new(Mutex::new(None));
    let b = body_signal.clone();
    keep(
        &registry,
        timed("t", Duration::from_millis(50), move |_, run_ctx| {
            *b.lock().unwrap() = Some(run_ctx.signal().clone());
            Box::pin(async { Ok(json!(1)) })
        }),
    );
    let post_signal = Arc::new(Mutex::new(None));
    let p = post_signal.clone();
    registry
        .on_post_execute(move |call, _, next| {
            *p.lock().unwrap() = Some(call.signal().clone());
            next.run()
        })
        .keep();
    let caller = AbortController::new();
    let result = registry
        .execute(signalled("t", json!({}), caller.signal()))
        .await;
    assert!(!result.is_error());
    assert!(!body_signal
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .same(&caller.signal()));
    assert!(post_signal
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .same(&caller.signal()));
}

#[tokio::test(start_paused = true)]
async fn tool_timeout_replaces_a_provider_abort_error() {
    let registry = Registry::new();
    timeout::install(&registry).keep();
    keep(
        &registry,
        timed(
            "slow",
            Duration::from_millis(50),
            cooperative(Duration::from_secs(10)),
        ),
    );
    let started = tokio::time::Instant::now();
    let result = run(&registry, "slow", json!({})).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the deadline reached the body"
    );
    assert_eq!(result.error_code(), Some("TOOL_TIMEOUT"));
    assert_eq!(
        result.error().unwrap().message,
        "tool call timed out after 50ms"
    );
    assert_eq!(
        result.error().unwrap().info.as_ref().unwrap().name,
        "ToolTimeoutError"
    );
    assert_eq!(result.text(), "Error: tool call timed out after 50ms");
}

#[tokio::test(start_paused = true)]
async fn tool_timeout_replaces_a_cooperative_success_after_the_deadline() {
    let registry = Registry::new();
    timeout::install(&registry).keep();
    keep(
        &registry,
        timed("ignores", Duration::from_millis(20), |_, run_ctx| {
            Box::pin(async move {
                run_ctx.signal().aborted().await;
                Ok(json!("finished anyway"))
            })
        }),
    );
    assert_eq!(
        run(&registry, "ignores", json!({})).await.error_code(),
        Some("TOOL_TIMEOUT")
    );
}

#[tokio::test(start_paused = true)]
async fn a_fast_body_is_untouched() {
    let registry = Registry::new();
    timeout::install(&registry).keep();
    keep(
        &registry,
        timed(
            "fast",
            Duration::from_secs(1),
            cooperative(Duration::from_millis(10)),
        ),
    );
    assert_eq!(
        run(&registry, "fast", json!({})).await.value(),
        Some(&json!("done"))
    );
}

/// A tool with a `budget_ms` timeout that waits for its signal, then keeps working `work_ms`;
/// its caller aborts at `abort_at_ms`. Returns how the call ended.
async fn race(budget_ms: u64, work_ms: u64, abort_at_ms: u64) -> Arc<ToolExecutionResult> {
    let registry = Registry::new();
    timeout::install(&registry).keep();
    keep(
        &registry,
        timed("t", Duration::from_millis(budget_ms), move |_, run_ctx| {
            Box::pin(async move {
                run_ctx.signal().aborted().await;
                tokio::time::sleep(Duration::from_millis(work_ms)).await;
                Ok(json!("late"))
            })
        }),
    );
    let caller = AbortController::new();
    let pending = registry.execute(signalled("t", json!({}), caller.signal()));
    tokio::join!(pending, async {
        tokio::time::sleep(Duration::from_millis(abort_at_ms)).await;
        caller.abort("user-cancel");
    })
    .0
}

#[tokio::test(start_paused = true)]
async fn a_caller_abort_that_comes_first_stays_aborted() {
    // Keep working past the deadline: the caller's abort still came first.
    assert_eq!(race(100, 500, 10).await.error_code(), Some("ABORTED"));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_that_comes_first_stays_tool_timeout_after_a_later_caller_abort() {
    assert_eq!(race(10, 100, 50).await.error_code(), Some("TOOL_TIMEOUT"));
}

#[tokio::test(start_paused = true)]
async fn the_budget_follows_the_scope_resolved_definition() {
    let registry = Registry::new();
    timeout::install(&registry).keep();
    let agent = AgentScope::root();
    registry
        .register(tool("t", cooperative(Duration::from_millis(100))), None)
        .unwrap()
        .keep();
    registry
        .register(
            timed(
                "t",
                Duration::from_millis(10),
                cooperative(Duration::from_millis(100)),
            ),
            Some(&agent),
        )
        .unwrap()
        .keep();
    assert!(!run(&registry, "t", json!({})).await.is_error());
    let scoped = registry
        .execute(ToolExecutionInput::new("c", "t", json!({}), AbortSignal::never()).agent(&agent))
        .await;
    assert_eq!(scoped.error_code(), Some("TOOL_TIMEOUT"));
}

#[test]
fn the_code_constant_and_fractional_budgets_are_spelled_like_the_reference() {
    assert_eq!(timeout::TIMEOUT_REASON, "TOOL_TIMEOUT");
    assert_eq!(
        timeout::timeout_result(Duration::from_micros(1500))
            .error()
            .unwrap()
            .message,
        "tool call timed out after 1.5ms"
    );
}

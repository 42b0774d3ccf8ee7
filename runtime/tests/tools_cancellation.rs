//! Cancellation precedence through the pipeline: a call aborted before, during and after each
//! stage ends as the reference says (aborted before dispatch, a denial that stays a denial, a
//! late success replaced, an uncooperative body waited for).

mod tools_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_runtime::signal::{AbortController, AbortSignal};
use codemode_runtime::tools::*;
use serde_json::json;
use tools_support::{contexts, ctx, echo, entries, keep, log, push, run, signalled, tool};

#[tokio::test]
async fn materializes_a_pre_aborted_call_without_entering_any_stage() {
    let registry = Registry::new();
    let stages = log();
    let s = stages.clone();
    let definition = ToolDefinitionBuilder::from(echo("echo"))
        .finalize_content(move |_, result| {
            push(
                &s,
                format!("finalize:{}", result.error_code().unwrap_or("")),
            );
            None
        })
        .build();
    registry.register(definition, None).unwrap().keep();
    for (kind, s) in [("pre", stages.clone()), ("post", stages.clone())] {
        if kind == "pre" {
            registry
                .on_pre_execute(move |_, next| {
                    push(&s, "pre");
                    next.run()
                })
                .keep();
        } else {
            registry
                .on_post_execute(move |_, _, next| {
                    push(&s, "post");
                    next.run()
                })
                .keep();
        }
    }
    let s = stages.clone();
    registry
        .on_result(move |_, _| {
            push(&s, "observe");
            Ok(())
        })
        .keep();
    let result = registry
        .execute(signalled(
            "echo",
            json!({}),
            AbortSignal::aborted_with("too-late"),
        ))
        .await;
    assert_eq!(result.error_code(), Some("ABORTED_BEFORE_DISPATCH"));
    assert_eq!(
        result.error().unwrap().info.as_ref().unwrap().name,
        "AbortError"
    );
    assert_eq!(
        entries(&stages),
        ["finalize:ABORTED_BEFORE_DISPATCH", "observe"]
    );
}

#[tokio::test]
async fn skips_dispatch_when_cancellation_arrives_while_pre_execute_awaits() {
    let registry = Registry::new();
    let bodies = Arc::new(AtomicUsize::new(0));
    let b = bodies.clone();
    keep(
        &registry,
        tool("t", move |_, _| {
            b.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!(1)) }
        }),
    );
    let caller = Arc::new(AbortController::new());
    let c = caller.clone();
    registry
        .on_pre_execute(move |_, next| {
            let c = c.clone();
            async move {
                c.abort("user-cancel");
                next.run().await
            }
        })
        .keep();
    let result = registry
        .execute(signalled("t", json!({}), caller.signal()))
        .await;
    assert_eq!(result.error_code(), Some("ABORTED_BEFORE_DISPATCH"));
    assert_eq!(bodies.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_denial_settling_after_cancellation_stays_a_denial() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let caller = Arc::new(AbortController::new());
    let c = caller.clone();
    registry
        .on_pre_execute(move |_, _| {
            c.abort("user-cancel");
            async {
                Ok(PreDecision::Deny {
                    reason: "denied".into(),
                })
            }
        })
        .keep();
    let result = registry
        .execute(signalled("echo", json!({}), caller.signal()))
        .await;
    assert_eq!(result.error().unwrap().message, "denied");
}

#[tokio::test]
async fn uses_aborted_before_dispatch_when_cancellation_overtakes_a_wrapper_short_circuit() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let caller = Arc::new(AbortController::new());
    let c = caller.clone();
    registry
        .on_execute(move |_, _| {
            c.abort("user-cancel");
            async { Ok(ToolExecutionResult::success(json!("short"))) }
        })
        .keep();
    let result = registry
        .execute(signalled("echo", json!({}), caller.signal()))
        .await;
    assert_eq!(result.error_code(), Some("ABORTED_BEFORE_DISPATCH"));
}

#[tokio::test]
async fn replaces_a_late_body_success_with_aborted_and_keeps_deferred_contexts() {
    let registry = Registry::new();
    let caller = Arc::new(AbortController::new());
    let c = caller.clone();
    keep(
        &registry,
        tool("t", move |_, run_ctx| {
            let c = c.clone();
            async move {
                run_ctx.defer_context(ctx("deferred"));
                c.abort("user-cancel");
                Ok(json!("done anyway"))
            }
        }),
    );
    let result = registry
        .execute(signalled("t", json!({}), caller.signal()))
        .await;
    assert_eq!(result.error_code(), Some("ABORTED"));
    assert_eq!(result.text(), "Error: tool call aborted");
    assert_eq!(contexts(&result), ["deferred"]);
}

#[tokio::test]
async fn a_tool_owned_failure_after_cancellation_keeps_its_message() {
    let registry = Registry::new();
    keep(
        &registry,
        tool("t", |_, run_ctx| async move {
            let reason = run_ctx.signal().aborted().await;
            Err(ToolError::new(format!("stopped: {reason}")))
        }),
    );
    let caller = AbortController::new();
    let pending = registry.execute(signalled("t", json!({}), caller.signal()));
    let result = tokio::join!(pending, async {
        tokio::task::yield_now().await;
        caller.abort("user-cancel");
    })
    .0;
    assert_eq!(result.error().unwrap().message, "stopped: user-cancel");
}

#[tokio::test]
async fn replaces_a_late_post_execute_success_with_aborted() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let caller = Arc::new(AbortController::new());
    let c = caller.clone();
    registry
        .on_post_execute(move |_, _, next| {
            c.abort("user-cancel");
            async move {
                let mut decision = next.run().await?;
                decision.additional_contexts_mut().push(ctx("post"));
                Ok(decision)
            }
        })
        .keep();
    let result = registry
        .execute(signalled("echo", json!({}), caller.signal()))
        .await;
    assert_eq!(result.error_code(), Some("ABORTED"));
    assert_eq!(contexts(&result), ["post"]);
}

#[tokio::test]
async fn a_post_policy_failure_after_cancellation_stays() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let caller = Arc::new(AbortController::new());
    let c = caller.clone();
    registry
        .on_post_execute(move |_, _, _| {
            c.abort("user-cancel");
            async { Err(ToolError::new("post failed")) }
        })
        .keep();
    let result = registry
        .execute(signalled("echo", json!({}), caller.signal()))
        .await;
    assert_eq!(result.error().unwrap().message, "post failed");
}

#[tokio::test]
async fn fuses_caller_cancellation_back_into_a_wrapper_replacement() {
    let registry = Registry::new();
    keep(
        &registry,
        tool("t", |_, run_ctx| async move {
            let reason = run_ctx.signal().aborted().await;
            Ok(json!(reason))
        }),
    );
    let replaced = Arc::new(Mutex::new(None));
    let r = replaced.clone();
    registry
        .on_execute(move |exec, next| {
            // A replacement that never fires: the caller's abort must still reach the body.
            let own = AbortSignal::never();
            *r.lock().unwrap() = Some(exec.signal.clone());
            next.run(own)
        })
        .keep();
    let caller = AbortController::new();
    let pending = registry.execute(signalled("t", json!({}), caller.signal()));
    let result = tokio::join!(pending, async {
        tokio::task::yield_now().await;
        caller.abort("user-cancel");
    })
    .0;
    assert_eq!(result.error_code(), Some("ABORTED"));
    assert!(replaced
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .same(&caller.signal()));
}

#[tokio::test]
async fn skips_dispatch_when_a_wrapper_supplies_an_already_aborted_signal() {
    let registry = Registry::new();
    let bodies = Arc::new(AtomicUsize::new(0));
    let b = bodies.clone();
    keep(
        &registry,
        tool("t", move |_, _| {
            b.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!(1)) }
        }),
    );
    registry
        .on_execute(|_, next| next.run(AbortSignal::aborted_with("wrapper")))
        .keep();
    let result = run(&registry, "t", json!({})).await;
    assert_eq!(result.error_code(), Some("ABORTED_BEFORE_DISPATCH"));
    assert_eq!(bodies.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn waits_for_an_uncooperative_started_body_before_returning_aborted() {
    let registry = Registry::new();
    let finished = Arc::new(AtomicUsize::new(0));
    let f = finished.clone();
    keep(
        &registry,
        tool("slow", move |_, _| {
            let f = f.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                f.store(1, Ordering::SeqCst);
                Ok(json!(1))
            }
        }),
    );
    let caller = AbortController::new();
    let pending = registry.execute(signalled("slow", json!({}), caller.signal()));
    let result = tokio::join!(pending, async {
        tokio::task::yield_now().await;
        caller.abort("user-cancel");
    })
    .0;
    assert_eq!(result.error_code(), Some("ABORTED"));
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the body settled before the result"
    );
}

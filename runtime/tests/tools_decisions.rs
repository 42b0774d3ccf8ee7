//! Decisions and what follows them: pre-execute denials, `ask` through the approval hook, hook
//! failures, the stage order, post-execute replacements and blocks, and deferred contexts.

mod tools_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use codemode_runtime::signal::AbortController;
use codemode_runtime::tools::*;
use serde_json::json;
use tools_support::{contexts, ctx, echo, entries, input, keep, log, push, run, tool, Log};

#[tokio::test]
async fn pre_execute_deny_carries_no_info_and_still_reaches_post_execute() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let order = log();
    let o = order.clone();
    registry
        .on_pre_execute(move |_, _| {
            push(&o, "pre");
            async {
                Ok(PreDecision::Deny {
                    reason: "not on my watch".into(),
                })
            }
        })
        .keep();
    let o = order.clone();
    registry
        .on_execute(move |exec, next| {
            push(&o, "execute");
            next.run(exec.signal)
        })
        .keep();
    let o = order.clone();
    registry
        .on_post_execute(move |_, result, next| {
            push(
                &o,
                format!("post:{}", result.error().map_or("", |e| e.message.as_str())),
            );
            next.run()
        })
        .keep();
    let result = run(&registry, "echo", json!({})).await;
    assert_eq!(
        result.error(),
        Some(&ToolFailure {
            message: "not on my watch".into(),
            info: None
        })
    );
    assert_eq!(result.text(), "Error: not on my watch");
    assert_eq!(entries(&order), ["pre", "post:not on my watch"]);
}

#[tokio::test]
async fn ask_degrades_to_deny_without_an_approval_hook() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let reason = Arc::new(Mutex::new(Some("needs a human".to_owned())));
    let r = reason.clone();
    registry
        .on_pre_execute(move |_, _| {
            let reason = r.lock().unwrap().clone();
            async move { Ok(PreDecision::Ask { reason }) }
        })
        .keep();
    assert_eq!(
        run(&registry, "echo", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "needs a human"
    );
    *reason.lock().unwrap() = None;
    assert_eq!(
        run(&registry, "echo", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "tool \"echo\" requires approval (not yet supported)"
    );
}

#[tokio::test]
async fn ask_routes_through_the_approval_hook_with_four_outcomes() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    registry
        .on_pre_execute(|_, _| async {
            Ok(PreDecision::Ask {
                reason: Some("why".into()),
            })
        })
        .keep();
    let answer = Arc::new(Mutex::new(ApprovalOutcome::AllowedOnce));
    let asked: Log = log();
    let (a, l) = (answer.clone(), asked.clone());
    registry
        .set_approval(move |request: ApprovalRequest| {
            push(
                &l,
                format!(
                    "{}:{}:{:?}",
                    request.tool_name, request.call_id, request.reason
                ),
            );
            let outcome = *a.lock().unwrap();
            async move { outcome }
        })
        .keep();
    let agent = AgentScope::root();
    let call = |registry: Registry, agent: AgentScope| async move {
        registry
            .execute(input("echo", json!({})).agent(&agent))
            .await
    };

    assert!(!call(registry.clone(), agent.clone()).await.is_error());
    assert_eq!(entries(&asked), ["echo:call-1:Some(\"why\")"]);
    for (outcome, message) in [
        (ApprovalOutcome::Rejected, "the user rejected tool \"echo\""),
        (
            ApprovalOutcome::Cancelled,
            "approval for tool \"echo\" was cancelled",
        ),
        (
            ApprovalOutcome::Unavailable,
            "tool \"echo\" requires approval, but no approval channel is available",
        ),
    ] {
        *answer.lock().unwrap() = outcome;
        assert_eq!(
            call(registry.clone(), agent.clone())
                .await
                .error()
                .unwrap()
                .message,
            message
        );
    }
    let agentless = run(&registry, "echo", json!({})).await;
    assert_eq!(
        agentless.error().unwrap().message,
        "tool \"echo\" requires approval, but the call has no agent to route it through"
    );
    assert_eq!(entries(&asked).len(), 4, "the agent-less call is not asked");
}

#[tokio::test]
async fn caller_cancellation_overtaking_approval_is_aborted_before_dispatch() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    registry
        .on_pre_execute(|_, _| async { Ok(PreDecision::Ask { reason: None }) })
        .keep();
    let caller = Arc::new(AbortController::new());
    let c = caller.clone();
    registry
        .set_approval(move |request: ApprovalRequest| {
            c.abort("user-cancel");
            assert!(request.signal.is_aborted());
            async { ApprovalOutcome::Cancelled }
        })
        .keep();
    let agent = AgentScope::root();
    let result = registry
        .execute(ToolExecutionInput::new("c", "echo", json!({}), caller.signal()).agent(&agent))
        .await;
    assert_eq!(result.error_code(), Some("ABORTED_BEFORE_DISPATCH"));
    assert_eq!(result.text(), "Error: tool call aborted before dispatch");
}

#[tokio::test]
async fn hook_failures_are_final_and_skip_post_execute() {
    for stage in ["pre", "execute", "post"] {
        let registry = Registry::new();
        registry.register(echo("echo"), None).unwrap().keep();
        let posts = Arc::new(AtomicUsize::new(0));
        match stage {
            "pre" => registry
                .on_pre_execute(|_, _| async { Err(ToolError::new("gate exploded")) })
                .keep(),
            "execute" => registry
                .on_execute(|_, _| async { Err(ToolError::new("gate exploded")) })
                .keep(),
            _ => registry
                .on_post_execute(|_, _, _| async { Err(ToolError::new("gate exploded")) })
                .keep(),
        }
        let p = posts.clone();
        registry
            .on_post_execute(move |_, _, next| {
                p.fetch_add(1, Ordering::SeqCst);
                next.run()
            })
            .keep();
        let result = run(&registry, "echo", json!({})).await;
        assert_eq!(result.error().unwrap().message, "gate exploded", "{stage}");
        if stage != "post" {
            assert_eq!(posts.load(Ordering::SeqCst), 0, "{stage}");
        }
    }
}

#[tokio::test]
async fn coded_hook_failures_keep_their_info() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    registry
        .on_pre_execute(|_, _| async { Err(ToolError::coded("PolicyError", "POLICY", "policy")) })
        .keep();
    assert_eq!(
        run(&registry, "echo", json!({})).await.error_code(),
        Some("POLICY")
    );
}

#[tokio::test]
async fn stage_order_is_pre_guard_execute_body_post_finalize_observe() {
    let registry = Registry::new();
    let order = log();
    let o = order.clone();
    let definition = ToolDefinitionBuilder::from(tool("t", {
        let o = o.clone();
        move |_, _| {
            push(&o, "body");
            async { Ok(json!(1)) }
        }
    }))
    .finalize_content({
        let o = o.clone();
        move |_, _| {
            push(&o, "finalize");
            None
        }
    })
    .build();
    registry.register(definition, None).unwrap().keep();
    let o1 = order.clone();
    registry
        .on_pre_execute(move |_, next| {
            push(&o1, "pre");
            next.run()
        })
        .keep();
    let o2 = order.clone();
    registry
        .guard(None, move |_| {
            push(&o2, "guard");
            None
        })
        .keep();
    let o3 = order.clone();
    registry
        .on_execute(move |exec, next| {
            push(&o3, "execute:before");
            let o = o3.clone();
            async move {
                let result = next.run(exec.signal).await;
                push(&o, "execute:after");
                result
            }
        })
        .keep();
    let o4 = order.clone();
    registry
        .on_post_execute(move |_, _, next| {
            push(&o4, "post");
            next.run()
        })
        .keep();
    let o5 = order.clone();
    registry
        .on_result(move |_, _| {
            push(&o5, "observe");
            Ok(())
        })
        .keep();
    run(&registry, "t", json!({})).await;
    assert_eq!(
        entries(&order),
        [
            "pre",
            "guard",
            "execute:before",
            "body",
            "execute:after",
            "post",
            "finalize",
            "observe"
        ]
    );
}

#[tokio::test]
async fn post_execute_accept_replaces_content_and_value_replacement_rerenders() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let mode = Arc::new(Mutex::new("content"));
    let m = mode.clone();
    registry
        .on_post_execute(move |_, _, _| {
            let mode = *m.lock().unwrap();
            async move {
                Ok(match mode {
                    "content" => PostDecision::Accept {
                        content: Some(vec![ContentBlock::text("spilled")]),
                        additional_contexts: vec![],
                    },
                    "value" => PostDecision::AcceptValue {
                        value: json!("replaced"),
                        additional_contexts: vec![],
                    },
                    "bad-value" => PostDecision::AcceptValue {
                        value: json!(5),
                        additional_contexts: vec![],
                    },
                    _ => PostDecision::accept(),
                })
            }
        })
        .keep();
    let result = run(&registry, "echo", json!({"text": "orig"})).await;
    assert_eq!(
        (result.value(), result.text()),
        (Some(&json!("orig")), "spilled".to_owned())
    );
    *mode.lock().unwrap() = "value";
    let result = run(&registry, "echo", json!({"text": "orig"})).await;
    assert_eq!(
        (result.value(), result.text()),
        (Some(&json!("replaced")), "replaced".to_owned())
    );
    *mode.lock().unwrap() = "bad-value";
    let result = run(&registry, "echo", json!({})).await;
    assert_eq!(result.error_code(), Some("INVALID_TOOL_OUTPUT"));
}

#[tokio::test]
async fn value_replacement_on_a_failed_result_is_an_error() {
    let registry = Registry::new();
    keep(
        &registry,
        tool("boom", |_, _| async { Err(ToolError::new("x")) }),
    );
    registry
        .on_post_execute(|_, _, _| async {
            Ok(PostDecision::AcceptValue {
                value: json!(1),
                additional_contexts: vec![],
            })
        })
        .keep();
    assert_eq!(
        run(&registry, "boom", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "tools/post-execute cannot replace the value of a failed result"
    );
}

#[tokio::test]
async fn a_block_becomes_a_valueless_failure_with_its_feedback() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let feedback = Arc::new(Mutex::new(vec![
        ContentBlock::text("line one"),
        ContentBlock::Image {
            data: "AA==".into(),
            mime_type: "image/png".into(),
        },
    ]));
    let f = feedback.clone();
    registry
        .on_post_execute(move |_, _, _| {
            let feedback = f.lock().unwrap().clone();
            async move {
                Ok(PostDecision::Block {
                    feedback,
                    additional_contexts: vec![ctx("because")],
                })
            }
        })
        .keep();
    let result = run(&registry, "echo", json!({})).await;
    assert_eq!(
        result.error(),
        Some(&ToolFailure {
            message: "line one\n[image content]".into(),
            info: None
        })
    );
    assert_eq!(result.content.len(), 2);
    assert_eq!(result.value(), None);
    assert_eq!(contexts(&result), ["because"]);
    feedback.lock().unwrap().clear();
    assert_eq!(
        run(&registry, "echo", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "tool result blocked by post-execute policy"
    );
}

#[tokio::test]
async fn preserves_deferred_wrapper_and_post_execute_contexts_in_order() {
    let registry = Registry::new();
    let definition = tool("t", |_, run_ctx| async move {
        run_ctx.defer_context(ctx("deferred"));
        Ok(json!(1))
    });
    registry.register(definition, None).unwrap().keep();
    registry
        .on_execute(|exec, next| async move {
            let mut result = next.run(exec.signal).await?;
            result.additional_contexts.push(ctx("wrapper"));
            Ok(result)
        })
        .keep();
    registry
        .on_post_execute(|_, _, _| async {
            Ok(PostDecision::Accept {
                content: None,
                additional_contexts: vec![ctx("post")],
            })
        })
        .keep();
    assert_eq!(
        contexts(&*run(&registry, "t", json!({})).await),
        ["deferred", "wrapper", "post"]
    );
}

#[tokio::test]
async fn deferred_contexts_survive_a_failing_body_but_not_a_block() {
    let registry = Registry::new();
    let definition = tool("t", |_, run_ctx| async move {
        run_ctx.defer_context(ctx("kept"));
        Err(ToolError::new("failed"))
    });
    registry.register(definition, None).unwrap().keep();
    let result = run(&registry, "t", json!({})).await;
    assert!(result.is_error());
    assert_eq!(contexts(&result), ["kept"]);
    registry
        .on_post_execute(|_, _, _| async {
            Ok(PostDecision::Block {
                feedback: vec![ContentBlock::text("no")],
                additional_contexts: vec![],
            })
        })
        .keep();
    assert!(contexts(&*run(&registry, "t", json!({})).await).is_empty());
}

#[tokio::test]
async fn conclude_turn_marks_a_successful_result() {
    let registry = Registry::new();
    keep(
        &registry,
        tool("done", |_, run_ctx| async move {
            run_ctx.conclude_turn();
            Ok(json!(true))
        }),
    );
    let result = run(&registry, "done", json!({})).await;
    assert!(result.concludes_turn());
    assert_eq!(
        serde_json::to_value(&*result).unwrap()["concludesTurn"],
        json!(true)
    );
}

#[tokio::test]
async fn a_wrapper_short_circuit_is_validated_through_the_output_contract() {
    let registry = Registry::new();
    let bodies = Arc::new(AtomicUsize::new(0));
    let b = bodies.clone();
    keep(
        &registry,
        ToolDefinition::builder("t")
            .output(ToolOutput::text())
            .execute(move |_, _| {
                b.fetch_add(1, Ordering::SeqCst);
                async { Ok(json!("body")) }
            })
            .build(),
    );
    let value = Arc::new(Mutex::new(json!("cached")));
    let v = value.clone();
    let _wrapper = registry.on_execute(move |_, _| {
        let value = v.lock().unwrap().clone();
        async move { Ok(ToolExecutionResult::success(value)) }
    });
    let result = run(&registry, "t", json!({})).await;
    assert_eq!(result.text(), "cached");
    *value.lock().unwrap() = json!(7);
    assert_eq!(
        run(&registry, "t", json!({})).await.error_code(),
        Some("INVALID_TOOL_OUTPUT")
    );
    assert_eq!(bodies.load(Ordering::SeqCst), 0);
}

//! The pipeline stage by stage: results, output contract, decisions, approval, error codes,
//! cancellation precedence, finalize_content and observers (ported from the reference's tools
//! and invariant suites where they apply).

mod tools_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_runtime::signal::{AbortController, AbortSignal};
use codemode_runtime::tools::schema::dsl::*;
use codemode_runtime::tools::*;
use serde_json::{json, Value};
use tools_support::{echo, input, keep, run, signalled, tool};

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn push(log: &Log, entry: impl Into<String>) {
    log.lock().unwrap().push(entry.into());
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

fn ctx(text: &str) -> ContextMessage {
    ContextMessage {
        content: vec![ContentBlock::text(text)],
        source: ContextSource::plugin("test"),
    }
}

fn contexts(result: &ToolExecutionResult) -> Vec<String> {
    result
        .additional_contexts
        .iter()
        .map(|c| match &c.content[0] {
            ContentBlock::Text { text } => text.clone(),
            other => other.kind().to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn executes_a_tool_and_returns_its_content() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let result = run(&registry, "echo", json!({"text": "hi"})).await;
    assert!(!result.is_error());
    assert_eq!(result.value(), Some(&json!("hi")));
    assert_eq!(result.content, vec![ContentBlock::text("hi")]);
    assert_eq!(
        serde_json::to_value(&*result).unwrap(),
        json!({"isError": false, "value": "hi", "content": [{"type": "text", "text": "hi"}]})
    );
}

#[tokio::test]
async fn schemas_carry_only_name_description_and_parameters() {
    let registry = Registry::new();
    let definition = ToolDefinitionBuilder::from(echo("echo"))
        .timeout(Duration::from_secs(5))
        .build();
    registry.register(definition, None).unwrap().keep();
    let schemas = serde_json::to_value(registry.schemas(None)).unwrap();
    assert_eq!(
        schemas,
        json!([{"name": "echo", "description": "echo tool", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}])
    );
}

#[tokio::test]
async fn projects_presentation_metadata_for_top_level_calls_only() {
    let registry = Registry::new();
    let output = ToolOutput::text()
        .presentation_meta(|_, value| Ok(json!({"len": value.as_str().map_or(0, str::len)})));
    let definition = ToolDefinition::builder("meta")
        .output(output)
        .execute(|_, _| async { Ok(json!("abc")) })
        .build();
    registry.register(definition, None).unwrap().keep();
    let top = run(&registry, "meta", json!({})).await;
    assert_eq!(top.meta, Some(json!({"len": 3})));
    let parent = top_token(&registry).await;
    let nested = registry
        .execute(input("meta", json!({})).parent(parent))
        .await;
    assert_eq!(nested.meta, None);
    registry.register(echo("plain"), None).unwrap().keep();
    assert_eq!(run(&registry, "plain", json!({})).await.meta, None);
}

async fn top_token(registry: &Registry) -> ExecutionToken {
    let seen = Arc::new(Mutex::new(None));
    let sink = seen.clone();
    let _guard = registry.on_call(move |call| *sink.lock().unwrap() = Some(call.token()));
    let _ = run(registry, "meta", json!({})).await;
    let token = seen.lock().unwrap().take();
    token.expect("a call was observed")
}

#[test]
fn registration_fails_early() {
    let registry = Registry::new();
    let no_output = ToolDefinition::builder("x")
        .execute(|_, _| async { Ok(json!(1)) })
        .build();
    assert_eq!(
        registry
            .register(no_output, None)
            .err()
            .unwrap()
            .to_string(),
        "tool \"x\" must declare output { schema, render, presentationMeta? }"
    );
    let zero = ToolDefinitionBuilder::from(echo("t"))
        .timeout(Duration::ZERO)
        .build();
    assert_eq!(
        registry.register(zero, None).err().unwrap().to_string(),
        "tool \"t\" timeoutMs must be a positive finite number"
    );
    assert_eq!(
        registry.register(echo("run_code"), None).err().unwrap().to_string(),
        "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed"
    );
    let scope = AgentScope::root();
    assert!(registry.register(echo("run_code"), Some(&scope)).is_err());
    registry.register(echo("dup"), None).unwrap().keep();
    assert_eq!(
        registry.register(echo("dup"), None).err().unwrap().to_string(),
        "tool \"dup\" is already registered (for a per-agent variant, register through that agent's `agent.ctx` instead)"
    );
    registry.register(echo("dup"), Some(&scope)).unwrap().keep();
    assert_eq!(
        registry
            .register(echo("dup"), Some(&scope))
            .err()
            .unwrap()
            .to_string(),
        "tool \"dup\" is already registered in this scope"
    );
}

#[tokio::test]
async fn dropping_the_registration_guard_unregisters() {
    let registry = Registry::new();
    let guard = registry.register(echo("temp"), None).unwrap();
    assert!(registry.get("temp", None).is_some());
    drop(guard);
    assert!(registry.get("temp", None).is_none());
    let result = run(&registry, "temp", json!({})).await;
    assert_eq!(result.error_code(), Some("UNKNOWN_TOOL"));
    // Re-registering the name works once the guard is gone.
    registry.register(echo("temp"), None).unwrap().keep();
}

#[tokio::test]
async fn rejects_lossy_and_schema_mismatched_body_values_before_post_execute() {
    let registry = Registry::new();
    let posts = Arc::new(AtomicUsize::new(0));
    let seen = posts.clone();
    registry
        .on_post_execute(move |_, result, next| {
            seen.fetch_add(1, Ordering::SeqCst);
            let code = result.error_code().map(str::to_owned);
            async move {
                assert_eq!(code.as_deref(), Some("INVALID_TOOL_OUTPUT"));
                next.run().await
            }
        })
        .keep();
    let lossy = ToolDefinition::builder("lossy")
        .output(ToolOutput::new(Schema::value(json()).unwrap(), |_, _| {
            Ok(vec![])
        }))
        .execute(|_, _| async { Ok(json!(-0.0)) })
        .build();
    registry.register(lossy, None).unwrap().keep();
    let result = run(&registry, "lossy", json!({})).await;
    assert_eq!(
        result.error().unwrap().message,
        "tool \"lossy\" returned invalid output: value is not lossless JSON"
    );
    let mismatch = ToolDefinition::builder("mismatch")
        .output(ToolOutput::text())
        .execute(|_, _| async { Ok(json!(1)) })
        .build();
    registry.register(mismatch, None).unwrap().keep();
    let result = run(&registry, "mismatch", json!({})).await;
    assert_eq!(
        result.error().unwrap().message,
        "tool \"mismatch\" returned invalid output: \"value\" must be a string"
    );
    assert_eq!(result.error_code(), Some("INVALID_TOOL_OUTPUT"));
    assert_eq!(
        result.text(),
        "Error: tool \"mismatch\" returned invalid output: \"value\" must be a string"
    );
    assert_eq!(posts.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn render_and_meta_failures_are_invalid_output() {
    let registry = Registry::new();
    let bad_render = ToolDefinition::builder("r")
        .output(ToolOutput::new(Schema::value(json()).unwrap(), |_, _| {
            Err(ToolError::new("no pixels"))
        }))
        .execute(|_, _| async { Ok(json!(1)) })
        .build();
    registry.register(bad_render, None).unwrap().keep();
    assert_eq!(
        run(&registry, "r", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "tool \"r\" returned invalid output: output.render failed: no pixels"
    );
    let bad_meta = ToolDefinition::builder("m")
        .output(ToolOutput::text().presentation_meta(|_, _| Ok(json!(-0.0))))
        .execute(|_, _| async { Ok(json!("x")) })
        .build();
    registry.register(bad_meta, None).unwrap().keep();
    assert_eq!(
        run(&registry, "m", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "tool \"m\" returned invalid output: output.presentationMeta returned non-lossless JSON"
    );
}

#[tokio::test]
async fn returns_error_results_for_unknown_throwing_and_panicking_tools() {
    let registry = Registry::new();
    let result = run(&registry, "nope", json!({})).await;
    assert!(result.is_error());
    assert_eq!(result.text(), "Error: unknown tool \"nope\"");
    let info = result.error().unwrap().info.clone().unwrap();
    assert_eq!(
        (info.name.as_str(), info.code.as_str()),
        ("ToolNotFoundError", "UNKNOWN_TOOL")
    );

    keep(
        &registry,
        tool("boom", |_, _| async {
            Err(ToolError::new("deliberate failure"))
        }),
    );
    let result = run(&registry, "boom", json!({})).await;
    assert_eq!(
        result.error(),
        Some(&ToolFailure {
            message: "deliberate failure".into(),
            info: None
        })
    );
    assert_eq!(result.text(), "Error: deliberate failure");

    keep(
        &registry,
        tool("coded", |_, _| async {
            Err(ToolError::coded("QuotaError", "QUOTA", "over quota"))
        }),
    );
    assert_eq!(
        run(&registry, "coded", json!({})).await.error_code(),
        Some("QUOTA")
    );

    keep(
        &registry,
        tool("io", |_, _| async {
            Err(std::io::Error::other("disk gone").into())
        }),
    );
    assert_eq!(
        run(&registry, "io", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "disk gone"
    );

    keep(
        &registry,
        tool("panics", |_, _| async {
            if true {
                panic!("body exploded");
            }
            Ok(json!(1))
        }),
    );
    assert_eq!(
        run(&registry, "panics", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "tool body panicked: body exploded"
    );
}

#[tokio::test]
async fn invalid_arguments_are_reported_with_every_violation() {
    let registry = Registry::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let definition = ToolDefinition::builder("read")
        .parameters(
            Schema::parameters(
                Parameters::new()
                    .required("path", string())
                    .optional("limit", integer()),
            )
            .unwrap(),
        )
        .output(ToolOutput::text())
        .execute(move |_, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!("x")) }
        })
        .build();
    registry.register(definition, None).unwrap().keep();
    let result = run(&registry, "read", json!({"limit": "ten"})).await;
    assert_eq!(
        result.error().unwrap().message,
        "invalid arguments: missing required property \"path\"; \"limit\" must be an integer"
    );
    assert_eq!(result.error_code(), Some("INVALID_ARGS"));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[derive(serde::Deserialize)]
struct Greet {
    name: String,
    #[serde(default)]
    times: Option<u32>,
}

#[tokio::test]
async fn typed_bodies_receive_decoded_arguments() {
    let registry = Registry::new();
    let definition = ToolDefinition::builder("greet")
        .parameters(
            Schema::parameters(
                Parameters::new()
                    .required("name", string())
                    .optional("times", integer()),
            )
            .unwrap(),
        )
        .output(ToolOutput::text())
        .execute_typed(|args: Greet, _| async move {
            Ok(json!(format!(
                "hi {} x{}",
                args.name,
                args.times.unwrap_or(1)
            )))
        })
        .build();
    registry.register(definition, None).unwrap().keep();
    assert_eq!(
        run(&registry, "greet", json!({"name": "ada", "times": 2}))
            .await
            .text(),
        "hi ada x2"
    );
    let negative = run(&registry, "greet", json!({"name": "ada", "times": -2})).await;
    assert_eq!(negative.error_code(), Some("INVALID_ARGS"));
    assert!(negative
        .error()
        .unwrap()
        .message
        .starts_with("invalid arguments: "));
}

#[tokio::test]
async fn non_lossless_arguments_fail_before_anything_else_even_when_pre_aborted() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let result = registry
        .execute(signalled(
            "echo",
            json!({"x": -0.0}),
            AbortSignal::aborted_with("late"),
        ))
        .await;
    assert_eq!(
        result.error(),
        Some(&ToolFailure {
            message: "tool execution arguments must be losslessly JSON-serializable".into(),
            info: None
        })
    );
}

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

#[tokio::test]
async fn finalize_content_runs_once_for_every_outcome() {
    let registry = Registry::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let definition = ToolDefinitionBuilder::from(tool("t", |args, _| async move {
        match args.get("fail") {
            Some(_) => Err(ToolError::new("failed")),
            None => Ok(json!(1)),
        }
    }))
    .finalize_content(move |_, result| {
        r.fetch_add(1, Ordering::SeqCst);
        Some(vec![ContentBlock::text(format!(
            "final:{}",
            result.is_error()
        ))])
    })
    .build();
    registry.register(definition, None).unwrap().keep();
    assert_eq!(run(&registry, "t", json!({})).await.text(), "final:false");
    assert_eq!(
        run(&registry, "t", json!({"fail": 1})).await.text(),
        "final:true"
    );
    let deny = registry.guard(None, |_| Some("guarded".into()));
    let denied = run(&registry, "t", json!({})).await;
    assert_eq!(
        (denied.text(), denied.error().unwrap().message.as_str()),
        ("final:true".to_owned(), "guarded")
    );
    drop(deny);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_panicking_finalizer_becomes_an_error_without_running_again() {
    let registry = Registry::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let definition = ToolDefinitionBuilder::from(echo("echo"))
        .finalize_content(move |_, _| {
            r.fetch_add(1, Ordering::SeqCst);
            panic!("finalizer broke")
        })
        .build();
    registry.register(definition, None).unwrap().keep();
    let result = run(&registry, "echo", json!({})).await;
    assert_eq!(
        result.error().unwrap().message,
        "finalize_content panicked: finalizer broke"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn observers_see_the_final_result_and_their_failures_never_propagate() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let seen: Arc<Mutex<Option<Arc<ToolExecutionResult>>>> = Arc::new(Mutex::new(None));
    registry
        .on_result(|_, _| Err(ToolError::new("observer broke")))
        .keep();
    registry
        .on_result(|_, _| panic!("observer panicked"))
        .keep();
    let s = seen.clone();
    registry
        .on_result(move |_, result| {
            *s.lock().unwrap() = Some(result.clone());
            Ok(())
        })
        .keep();
    let result = run(&registry, "echo", json!({})).await;
    assert!(!result.is_error());
    assert!(Arc::ptr_eq(&result, seen.lock().unwrap().as_ref().unwrap()));
}

#[tokio::test]
async fn call_identity_is_immutable_and_root_defaults_to_the_call_id() {
    let registry = Registry::new();
    let identity = log();
    let i = identity.clone();
    keep(
        &registry,
        tool("t", move |args, run_ctx| {
            push(
                &i,
                format!(
                    "{}|{}|{}|{}",
                    run_ctx.call_id(),
                    run_ctx.root_call_id(),
                    run_ctx.name(),
                    args
                ),
            );
            async { Ok(json!(1)) }
        }),
    );
    run(&registry, "t", json!({"a": 1})).await;
    registry
        .execute(input("t", json!({})).root_call_id("root-9"))
        .await;
    assert_eq!(
        entries(&identity),
        ["call-1|call-1|t|{\"a\":1}", "call-1|root-9|t|{}"]
    );
}

#[tokio::test]
async fn deeply_nested_arguments_flow_through_the_pipeline() {
    let registry = Registry::new();
    registry
        .register(tool("t", |_, _| async { Ok(json!("ok")) }), None)
        .unwrap()
        .keep();
    let mut args = json!(1);
    for _ in 0..5_000 {
        args = Value::Object([("a".to_owned(), args)].into_iter().collect());
    }
    let result = run(&registry, "t", args).await;
    assert!(!result.is_error());
}

#[tokio::test]
async fn presenters_and_classifiers_validate_arguments_softly() {
    let definition = ToolDefinition::builder("p")
        .parameters(Schema::parameters(Parameters::new().required("path", string())).unwrap())
        .output(ToolOutput::text())
        .execute(|_, _| async { Ok(json!("x")) })
        .present_call(|args| Some(json!({"card": "read", "title": args["path"]})))
        .present_result(|_, result| Some(json!({"isError": result.is_error})))
        .build();
    assert_eq!(
        definition.present_call(&json!({"path": "/a"})),
        Some(json!({"card": "read", "title": "/a"}))
    );
    assert_eq!(definition.present_call(&json!({"path": 1})), None);
    let view = ToolResultView {
        content: vec![],
        is_error: false,
        meta: None,
    };
    assert_eq!(
        definition.present_result(&json!({"path": "/a"}), &view),
        Some(json!({"isError": false}))
    );
    assert_eq!(definition.present_result(&json!({}), &view), None);
}

#[tokio::test]
async fn foreign_parameter_schemas_are_validated_like_any_other() {
    let registry = Registry::new();
    let parameters = Schema::foreign(json!({
        "type": "object",
        "properties": {"path": {"type": "string", "minLength": 1}, "mode": {"anyOf": [{"const": "r"}, {"const": "w"}]}},
        "required": ["path"],
    }))
    .unwrap();
    let definition = ToolDefinition::builder("mcp__fs__open")
        .parameters(parameters)
        .output(ToolOutput::text())
        .execute(|args, _| async move { Ok(args["path"].clone()) })
        .build();
    registry.register(definition, None).unwrap().keep();
    assert_eq!(
        run(
            &registry,
            "mcp__fs__open",
            json!({"path": "/a", "mode": "r"})
        )
        .await
        .text(),
        "/a"
    );
    let result = run(&registry, "mcp__fs__open", json!({"mode": "x"})).await;
    assert_eq!(result.error_code(), Some("INVALID_ARGS"));
    let message = &result.error().unwrap().message;
    assert!(message.starts_with("invalid arguments: "), "{message}");
    assert!(
        message.contains("missing required property \"path\""),
        "{message}"
    );
    assert!(message.contains("\"mode\" \"x\" is not valid"), "{message}");
    assert_eq!(
        registry.schemas(None)[0].parameters["properties"]["mode"]["anyOf"][0],
        json!({"const": "r"})
    );
}

//! The pipeline stage by stage: results, the output contract, error codes, argument
//! validation, finalize_content and observers. Decisions and approval are in
//! `tools_decisions.rs`, cancellation precedence in `tools_cancellation.rs`.

mod tools_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::schema::dsl::*;
use codemode_runtime::tools::*;
use serde_json::{json, Value};
use tools_support::{echo, entries, input, keep, log, push, run, signalled, tool};

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

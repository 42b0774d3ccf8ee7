//! `run_code` over the real wasm runtime: the reference's Code Mode cases (the bridge, the
//! scheduler, events, failures, cancellation), each through the full tool pipeline.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_e2e::harness::{probed, tool, CodeMode, Probe};
use codemode_host::Budgets;
use codemode_runtime::code::{CallOutcome, FailureKind};
use codemode_runtime::run_code::{RunCodeConfig, DEFERRED_IMAGE_PLUGIN, NO_OUTPUT};
use codemode_runtime::signal::{AbortController, AbortSignal};
use codemode_runtime::tools::events::SessionEvent;
use codemode_runtime::tools::{
    ContentBlock, ContextMessage, ContextSource, PostDecision, PreDecision, ToolError,
    ToolExecutionInput, RUN_CODE_NAME,
};
use serde_json::{json, Value};

mod caps;
mod scheduling;
mod typed;

fn echo() -> codemode_runtime::tools::ToolDefinition {
    tool("echo", |args, _| async move {
        Ok(codemode_runtime::json::clone_deep(&args))
    })
}

fn failing(name: &str, message: &'static str) -> codemode_runtime::tools::ToolDefinition {
    tool(
        name,
        move |_, _| async move { Err(ToolError::new(message)) },
    )
}

#[tokio::test]
async fn curated_output_is_the_logs_then_the_result() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    let result = cm
        .run("const r = await tools.echo({ v: 'one' }); console.log('saw echo:' + r.v); return 'echo:two';")
        .await;
    assert!(!result.is_error(), "{}", result.text());
    assert_eq!(result.text(), "saw echo:one\necho:two");
    assert_eq!(
        result.value(),
        Some(&json!({"logs": ["saw echo:one"], "result": "echo:two"}))
    );
}

#[tokio::test]
async fn content_covers_logs_only_result_only_both_and_neither() {
    let cm = CodeMode::new();
    assert_eq!(
        cm.run("console.log('a'); console.log('b');").await.text(),
        "a\nb"
    );
    assert_eq!(
        cm.run("return { n: 1, list: [1, 2] };").await.text(),
        "{\n  \"n\": 1,\n  \"list\": [\n    1,\n    2\n  ]\n}"
    );
    assert_eq!(cm.run("console.log('x'); return 2;").await.text(), "x\n2");
    let neither = cm.run("const x = 1;\nif (x > 1) console.log(x);").await;
    assert_eq!(neither.text(), NO_OUTPUT);
    assert_eq!(neither.value(), Some(&json!({"logs": []})));
    assert_eq!(
        cm.run("return null;").await.value(),
        Some(&json!({"logs": [], "result": null}))
    );
}

#[tokio::test]
async fn a_failed_run_is_code_run_failed_with_kind_message_and_captured_output() {
    let cm = CodeMode::new();
    let result = cm
        .run("console.log('captured before failure'); throw new Error('boom');")
        .await;
    assert!(result.is_error());
    assert_eq!(result.error_code(), Some("CODE_RUN_FAILED"));
    let info = result.error().unwrap().info.clone().unwrap();
    assert_eq!(info.name, "CodeRunFailedError");
    assert_eq!(
        result.text(),
        "Error: code run failed (exception): Error: boom\n    1 | console.log('captured before failure'); throw new Error('boom');\n      |                                               ^\nCaptured output:\ncaptured before failure"
    );
    let report = cm.report();
    let failure = report.result.error.expect("structured failure");
    assert_eq!(failure.kind, FailureKind::Exception);
    assert_eq!(failure.line, Some(1));
}

#[tokio::test]
async fn an_output_limit_failure_keeps_what_fits() {
    let cm = CodeMode::with(
        RunCodeConfig::default(),
        Budgets {
            max_output_bytes: 64,
            ..Budgets::default()
        },
    );
    let result = cm.run("return 'x'.repeat(100);").await;
    assert_eq!(
        result.text(),
        "Error: code run failed (output-limit): outer output exceeded 64 bytes"
    );
}

#[tokio::test]
async fn every_sub_call_goes_through_the_pipeline_with_numbered_ids_and_events() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hooked = seen.clone();
    cm.keep(cm.registry.on_pre_execute(move |call, next| {
        hooked.lock().unwrap().push((
            call.call_id().to_owned(),
            call.root_call_id().to_owned(),
            call.parent().is_some(),
        ));
        next.run()
    }));
    let result = cm
        .run("await tools.echo({ a: 1 }); return await tools.echo({ b: 2 });")
        .await;
    assert!(!result.is_error(), "{}", result.text());
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("call-1".to_owned(), "call-1".to_owned(), false),
            ("call-1:code:1".to_owned(), "call-1".to_owned(), true),
            ("call-1:code:2".to_owned(), "call-1".to_owned(), true),
        ]
    );
    assert_eq!(
        cm.events.summary(),
        vec![
            "tool/call call-1",
            "start call-1:code:1",
            "settle call-1:code:1",
            "start call-1:code:2",
            "settle call-1:code:2",
            "tool/result call-1",
        ]
    );
    let events = cm.events.all();
    let SessionEvent::CodeDispatch {
        root_call_id,
        parent_call_id,
        sub_call_id,
        name,
        arguments,
        is_error,
        content,
        ..
    } = &events[4]
    else {
        panic!("a settle event: {events:?}");
    };
    assert_eq!(
        (
            root_call_id.as_str(),
            parent_call_id.as_str(),
            sub_call_id.as_str(),
            name.as_str()
        ),
        ("call-1", "call-1", "call-1:code:2", "echo")
    );
    assert_eq!(**arguments, json!({"b": 2}));
    assert!(!is_error);
    assert_eq!(content, &vec![ContentBlock::text("{\"b\":2}")]);
    let report = cm.report();
    assert_eq!(
        report
            .sub_calls
            .iter()
            .map(|c| (c.sub_call_id.as_str(), c.tool.as_str(), c.outcome))
            .collect::<Vec<_>>(),
        vec![
            ("call-1:code:1", "echo", CallOutcome::Resolved),
            ("call-1:code:2", "echo", CallOutcome::Resolved),
        ]
    );
}

#[tokio::test]
async fn programs_see_the_visible_tools_but_never_run_code() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    let result = cm
        .run("return [typeof tools.echo, typeof tools.run_code, Object.keys(tools)];")
        .await;
    assert_eq!(
        result.value().unwrap()["result"],
        json!(["function", "undefined", ["echo"]])
    );
}

#[tokio::test]
async fn a_tool_error_reaches_the_program_as_a_tool_call_error_with_its_message() {
    let mut cm = CodeMode::new();
    cm.add(failing("broken", "deliberate failure"));
    let result = cm
        .run(
            "try { await tools.broken({}); } catch (e) { return [e instanceof ToolCallError, e.name, e.toolName, e.message]; }",
        )
        .await;
    assert_eq!(
        result.value().unwrap()["result"],
        json!([true, "ToolCallError", "broken", "deliberate failure"])
    );
    assert_eq!(
        cm.events.summary()[1..3],
        ["start call-1:code:1", "settle call-1:code:1 error"]
    );
    assert_eq!(cm.report().sub_calls[0].outcome, CallOutcome::Rejected);
}

#[tokio::test]
async fn a_denial_reaches_the_program_as_a_rejection_with_the_reason() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    cm.keep(cm.registry.on_pre_execute(|call, next| async move {
        if call.name() == "echo" {
            return Ok(PreDecision::Deny {
                reason: "not on my watch".into(),
            });
        }
        next.run().await
    }));
    let result = cm
        .run("try { await tools.echo({}); } catch (e) { return e.message; }")
        .await;
    assert_eq!(result.value().unwrap()["result"], json!("not on my watch"));
}

#[tokio::test]
async fn a_guard_denies_calls_from_programs_as_it_denies_direct_ones() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    cm.keep(cm.registry.guard(None, |call| {
        (call.name() == "echo").then(|| "echo is off limits".to_owned())
    }));
    let result = cm
        .run("try { await tools.echo({}); return 'called'; } catch (e) { return `${e.toolName}: ${e.message}`; }")
        .await;
    assert_eq!(
        result.value().unwrap()["result"],
        json!("echo: echo is off limits")
    );
}

#[tokio::test]
async fn a_throwing_pre_execute_hook_skips_post_execute_but_is_still_logged() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    let post_ran = Arc::new(AtomicBool::new(false));
    let flag = post_ran.clone();
    cm.keep(cm.registry.on_pre_execute(|call, next| async move {
        if call.parent().is_some() {
            return Err(ToolError::new("gate exploded"));
        }
        next.run().await
    }));
    cm.keep(cm.registry.on_post_execute(move |call, _result, next| {
        if call.parent().is_some() {
            flag.store(true, Ordering::SeqCst);
        }
        next.run()
    }));
    let result = cm
        .run("try { await tools.echo({}); } catch (e) { return e.message; }")
        .await;
    assert_eq!(result.value().unwrap()["result"], json!("gate exploded"));
    assert!(!post_ran.load(Ordering::SeqCst));
    assert!(cm
        .events
        .summary()
        .contains(&"settle call-1:code:1 error".to_owned()));
}

#[tokio::test]
async fn invalid_arguments_are_refused_before_the_tool_with_a_path() {
    // Preflight would refuse the literal before the run: this is the pipeline's own check.
    let mut cm = CodeMode::with(
        RunCodeConfig::default().preflight(false),
        Budgets::default(),
    );
    cm.add(
        codemode_runtime::tools::ToolDefinitionBuilder::from(echo())
            .parameters(
                codemode_runtime::tools::Schema::parameters(
                    codemode_runtime::tools::schema::dsl::Parameters::new()
                        .required("path", codemode_runtime::tools::schema::dsl::string()),
                )
                .unwrap(),
            )
            .build(),
    );
    let result = cm
        .run("try { await tools.echo({ path: 3 }); } catch (e) { return e.message; }")
        .await;
    assert_eq!(
        result.value().unwrap()["result"],
        json!("invalid arguments: \"path\" must be a string")
    );
}

#[tokio::test]
async fn lossy_arguments_are_refused_in_the_sandbox_and_nothing_is_dispatched() {
    let mut cm = CodeMode::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    cm.add(tool("echo", move |args, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { Ok(codemode_runtime::json::clone_deep(&args)) }
    }));
    let result = cm
        .run(
            r#"
            const out = [];
            for (const bad of [undefined, { n: 1n }, { d: new Date(0) }, { f() {} }, { get g() { throw new Error('getter') } }]) {
                try { await tools.echo(bad); out.push('called'); } catch (e) { out.push(e.message); }
            }
            return out;
            "#,
        )
        .await;
    let out = result.value().unwrap()["result"].clone();
    assert_eq!(out.as_array().map(Vec::len), Some(5), "{out}");
    for message in out.as_array().unwrap() {
        assert_eq!(message, "binding arguments must be lossless JSON");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(
        cm.events.summary(),
        vec!["tool/call call-1", "tool/result call-1"]
    );
}

#[tokio::test]
async fn deep_arguments_are_dispatched_logged_and_returned() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    let result = cm
        .run("let v = 0; for (let i = 0; i < 4990; i++) v = [v]; const r = await tools.echo({ v }); let d = 0; for (let x = r.v; Array.isArray(x); x = x[0]) d++; return d;")
        .await;
    assert_eq!(
        result.value().unwrap()["result"],
        json!(4990),
        "{}",
        result.text()
    );
    assert!(matches!(
        &cm.events.all()[1],
        SessionEvent::CodeDispatchStart { .. }
    ));
}

#[tokio::test]
async fn a_tool_named_proto_is_an_ordinary_binding() {
    let mut cm = CodeMode::new();
    cm.add(tool("__proto__", |_, _| async {
        Ok(json!("proto called"))
    }));
    let result = cm.run("return await tools['__proto__']({});").await;
    assert_eq!(result.value().unwrap()["result"], json!("proto called"));
}

#[tokio::test]
async fn sub_call_results_carry_no_presentation_meta_and_observers_see_the_parent() {
    let mut cm = CodeMode::new();
    cm.add(
        codemode_runtime::tools::ToolDefinitionBuilder::from(echo())
            .output(
                codemode_runtime::tools::ToolOutput::new(
                    codemode_runtime::tools::Schema::value(
                        codemode_runtime::tools::schema::dsl::json(),
                    )
                    .unwrap(),
                    |_, v| Ok(vec![ContentBlock::text(v.to_string())]),
                )
                .presentation_meta(|_, _| Ok(json!({"shown": true}))),
            )
            .build(),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let observed = seen.clone();
    cm.keep(cm.registry.on_result(move |call, result| {
        observed.lock().unwrap().push((
            call.name().to_owned(),
            call.parent().is_some(),
            result.meta.clone(),
        ));
        Ok(())
    }));
    cm.run("await tools.echo({});").await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], ("echo".to_owned(), true, None));
    assert_eq!(seen[1].0, RUN_CODE_NAME);
    assert!(!seen[1].1);
}

#[tokio::test]
async fn contexts_images_and_turn_conclusion_are_forwarded_in_dispatch_order() {
    let mut cm = CodeMode::new();
    let note = |text: &str| ContextMessage {
        content: vec![ContentBlock::text(text)],
        source: ContextSource::plugin("test"),
    };
    let (first, second) = (note("first"), note("second"));
    cm.add(tool("a", move |_, ctx| {
        ctx.defer_context(first.clone());
        async { Ok(json!("a")) }
    }));
    cm.add(tool("b", move |_, ctx| {
        ctx.defer_context(second.clone());
        ctx.conclude_turn();
        async { Ok(json!("b")) }
    }));
    cm.add(
        codemode_runtime::tools::ToolDefinitionBuilder::from(tool("shot", |_, _| async {
            Ok(json!("png"))
        }))
        .output(codemode_runtime::tools::ToolOutput::new(
            codemode_runtime::tools::Schema::value(codemode_runtime::tools::schema::dsl::json())
                .unwrap(),
            |_, _| {
                Ok(vec![ContentBlock::Image {
                    data: "iVBORw0K".into(),
                    mime_type: "image/png".into(),
                }])
            },
        ))
        .build(),
    );
    let result = cm
        .run("await tools.a({}); await tools.shot({}); await tools.b({}); return 'done';")
        .await;
    assert!(!result.is_error(), "{}", result.text());
    assert!(result.concludes_turn());
    let contexts = &result.additional_contexts;
    assert_eq!(contexts.len(), 3, "{contexts:?}");
    assert_eq!(contexts[0].content, vec![ContentBlock::text("first")]);
    assert_eq!(
        contexts[1].source.plugin.as_deref(),
        Some(DEFERRED_IMAGE_PLUGIN)
    );
    assert!(matches!(contexts[1].content[0], ContentBlock::Image { .. }));
    assert_eq!(contexts[2].content, vec![ContentBlock::text("second")]);
}

#[tokio::test]
async fn an_image_removed_by_a_nested_block_is_not_deferred_and_contexts_survive_a_failed_run() {
    let mut cm = CodeMode::new();
    let kept = ContextMessage {
        content: vec![ContentBlock::text("kept")],
        source: ContextSource::plugin("test"),
    };
    cm.add(tool("noted", move |_, ctx| {
        ctx.defer_context(kept.clone());
        async { Ok(json!(1)) }
    }));
    cm.add(
        codemode_runtime::tools::ToolDefinitionBuilder::from(tool("shot", |_, _| async {
            Ok(json!("png"))
        }))
        .output(codemode_runtime::tools::ToolOutput::new(
            codemode_runtime::tools::Schema::value(codemode_runtime::tools::schema::dsl::json())
                .unwrap(),
            |_, _| {
                Ok(vec![ContentBlock::Image {
                    data: "iVBORw0K".into(),
                    mime_type: "image/png".into(),
                }])
            },
        ))
        .build(),
    );
    cm.keep(
        cm.registry
            .on_post_execute(|call, result, next| async move {
                if call.name() == "shot" && !result.is_error() {
                    return Ok(PostDecision::Block {
                        feedback: vec![ContentBlock::text("no screenshots")],
                        additional_contexts: Vec::new(),
                    });
                }
                next.run().await
            }),
    );
    let result = cm
        .run("await tools.noted({}); try { await tools.shot({}); } catch (e) { console.log(e.message); } throw new Error('late');")
        .await;
    assert!(result.is_error());
    assert_eq!(
        result.text(),
        "Error: code run failed (exception): Error: late\n    1 | await tools.noted({}); try { await tools.shot({}); } catch (e) { console.log(e.message); } throw new Error('late');\n      |                                                                                                  ^\nCaptured output:\nno screenshots"
    );
    assert_eq!(result.additional_contexts.len(), 1);
    assert_eq!(
        result.additional_contexts[0].content,
        vec![ContentBlock::text("kept")]
    );
}

#[tokio::test]
async fn runs_without_an_agent_dispatch_but_log_nothing() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    let input = ToolExecutionInput::new(
        "solo",
        RUN_CODE_NAME,
        json!({"code": "return (await tools.echo({ x: 1 })).x;", "description": "No agent"}),
        AbortSignal::never(),
    );
    let result = cm.registry.execute(input).await;
    assert_eq!(result.value().unwrap()["result"], json!(1));
    assert_eq!(
        cm.events.summary(),
        vec!["tool/call solo", "tool/result solo"]
    );
}

#[tokio::test]
async fn a_blank_description_and_a_non_string_program_are_refused() {
    let cm = CodeMode::new();
    let blank = ToolExecutionInput::new(
        "c",
        RUN_CODE_NAME,
        json!({"code": "return 1", "description": "  \n "}),
        AbortSignal::never(),
    );
    let result = cm.registry.execute(blank).await;
    assert_eq!(
        result.text(),
        "Error: invalid description: expected a non-empty string"
    );
    let not_code = ToolExecutionInput::new(
        "c",
        RUN_CODE_NAME,
        json!({"code": 42, "description": "Numbers"}),
        AbortSignal::never(),
    );
    let result = cm.registry.execute(not_code).await;
    assert_eq!(result.error_code(), Some("INVALID_ARGS"));
    assert_eq!(
        result.text(),
        "Error: invalid arguments: \"code\" must be a string"
    );
    let missing = ToolExecutionInput::new("c", RUN_CODE_NAME, json!({}), AbortSignal::never());
    assert_eq!(
        cm.registry.execute(missing).await.error_code(),
        Some("INVALID_ARGS")
    );
    assert!(cm.reports.lock().unwrap().is_empty());
}

#[tokio::test]
async fn run_code_presents_its_call_with_the_description_and_no_result_card() {
    let cm = CodeMode::new();
    let definition = cm.registry.get(RUN_CODE_NAME, Some(&cm.agent)).unwrap();
    assert_eq!(
        definition.present_call(&json!({"code": "return 1", "description": "Count things"})),
        Some(
            json!({"card": "generic", "title": "Count things", "kind": "execute", "rawInput": "return 1"})
        )
    );
    let view = codemode_runtime::tools::ToolResultView {
        content: vec![],
        is_error: false,
        meta: None,
    };
    assert_eq!(
        definition.present_result(&json!({"code": "1", "description": "d"}), &view),
        None
    );
}

#[tokio::test]
async fn a_direct_call_to_a_tool_under_code_mode_collapses_but_a_program_reaches_it() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    let direct =
        ToolExecutionInput::new("d", "echo", json!({}), AbortSignal::never()).agent(&cm.agent);
    let result = cm.registry.execute(direct).await;
    assert_eq!(
        result.text(),
        "Error: unknown tool \"echo\": only `run_code` is callable directly — call `echo` from inside a `run_code` program instead"
    );
    let result = cm.run("return (await tools.echo({ ok: true })).ok;").await;
    assert_eq!(result.value().unwrap()["result"], json!(true));
}

#[tokio::test]
async fn a_tool_timeout_reaches_the_program_as_its_message() {
    let mut cm = CodeMode::new();
    cm.keep(codemode_runtime::tools::plugins::timeout::install(
        &cm.registry,
    ));
    cm.add(
        codemode_runtime::tools::ToolDefinitionBuilder::from(tool("slow", |_, ctx| async move {
            ctx.signal().aborted().await;
            Ok(json!("stopped"))
        }))
        .timeout(Duration::from_millis(30))
        .build(),
    );
    let result = cm
        .run("try { await tools.slow({}); } catch (e) { return e.message; }")
        .await;
    assert_eq!(
        result.value().unwrap()["result"],
        json!("tool call timed out after 30ms")
    );
}

#[tokio::test]
async fn concurrent_runs_keep_their_sub_calls_apart() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    let cm = Arc::new(cm);
    let mut runs = Vec::new();
    for i in 0..20 {
        let cm = cm.clone();
        runs.push(tokio::spawn(async move {
            let input = ToolExecutionInput::new(
                format!("run-{i}"),
                RUN_CODE_NAME,
                json!({"code": format!("let s = 0; for (let k = 0; k < 5; k++) s += (await tools.echo({{ k }})).k; return s + {i};"), "description": "Sum"}),
                AbortSignal::never(),
            )
            .agent(&cm.agent);
            cm.registry.execute(input).await
        }));
    }
    for (i, run) in runs.into_iter().enumerate() {
        let result = run.await.unwrap();
        assert_eq!(
            result.value().unwrap()["result"],
            json!(10 + i),
            "{}",
            result.text()
        );
    }
    let events: Vec<Value> = cm
        .events
        .all()
        .iter()
        .filter_map(|e| match e {
            SessionEvent::CodeDispatch {
                sub_call_id,
                parent_call_id,
                ..
            } => Some(json!([sub_call_id, parent_call_id])),
            _ => None,
        })
        .collect();
    assert_eq!(events.len(), 100);
    for pair in events {
        let sub = pair[0].as_str().unwrap();
        assert!(sub.starts_with(&format!("{}:code:", pair[1].as_str().unwrap())));
    }
}

//! Python programs: the Monty guest behind the same sandbox, bridge, pipeline and budgets as
//! TypeScript programs, through `run_code` as a model calls it and as an embedder does.

use std::sync::Arc;

use codemode_e2e::harness::{probed, tool, CodeMode, Probe};
use codemode_host::Budgets;
use codemode_runtime::code::{CallOutcome, FailureCause, FailureKind};
use codemode_runtime::run_code::{self, CodeOutcome, CodeRequest, RunCodeConfig};
use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::ToolError;
use codemode_sdk_gen::Language;
use serde_json::json;

fn request(program: &str) -> CodeRequest {
    let id = uuid::Uuid::new_v4().to_string();
    CodeRequest::new(id, program, "A Python run", AbortSignal::never()).language(Language::Python)
}

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

async fn run(cm: &CodeMode, program: &str) -> CodeOutcome {
    run_code::run(&cm.registry, request(program).agent(&cm.agent)).await
}

fn python_with_tools() -> CodeMode {
    let mut cm = CodeMode::python();
    cm.add(echo())
        .add(failing("broken", "it broke"))
        .add(tool("my-tool", |_, _| async move { Ok(json!("dashed")) }));
    cm
}

#[tokio::test]
async fn a_python_program_calls_tools_prints_and_ends_with_its_last_expression() {
    let cm = python_with_tools();
    let program = r#"print("start")
r = await tools.echo({"v": 1, "xs": [1, 2.5, "three", True, None]})
try:
    await tools.broken({})
except ToolCallError as e:
    print("failed:", e.tool_name, str(e))
{"got": r["v"], "xs": r["xs"], "dashed": await tools["my-tool"]({})}"#;
    let outcome = run(&cm, program).await;
    let run = outcome.run.as_ref().expect("the program ran");
    assert_eq!(run.failure, None, "{:?}", run.failure);
    assert_eq!(run.logs, ["start", "failed: broken it broke"]);
    assert_eq!(
        outcome.value(),
        Some(&json!({"got": 1, "xs": [1, 2.5, "three", true, null], "dashed": "dashed"}))
    );
    let calls: Vec<_> = run
        .calls
        .iter()
        .map(|c| (c.tool.as_str(), c.outcome))
        .collect();
    assert_eq!(
        calls,
        [
            ("echo", CallOutcome::Resolved),
            ("broken", CallOutcome::Rejected),
            ("my-tool", CallOutcome::Resolved)
        ]
    );
}

#[tokio::test]
async fn a_model_call_with_python_reads_as_a_typescript_one_does() {
    let cm = python_with_tools();
    let result = cm
        .run("r = await tools.echo({'v': 'one'})\nprint('saw echo:' + r['v'])\n'echo:two'")
        .await;
    assert!(!result.is_error(), "{}", result.text());
    assert_eq!(result.text(), "saw echo:one\necho:two");
}

#[tokio::test]
async fn a_tool_call_error_is_an_exception_and_keyword_arguments_are_the_arguments_object() {
    let cm = python_with_tools();
    let program = r#"caught = []
try:
    await tools.broken(path="x")
except Exception as e:
    caught.append([type(e).__name__, e.tool_name, isinstance(e, ToolCallError)])
r = await tools.echo(path="a.txt", head=2)
try:
    await tools.echo({"a": 1}, {"b": 2})
except TypeError as e:
    caught.append(str(e))
[caught, r]"#;
    let outcome = run(&cm, program).await;
    let run = outcome.run.as_ref().expect("the program ran");
    assert_eq!(run.failure, None, "{:?}", run.failure);
    let value = outcome.value().expect("a value");
    assert_eq!(value[0][0], json!(["ToolCallError", "broken", true]));
    assert!(
        value[0][1].as_str().unwrap().contains("takes one argument"),
        "{value}"
    );
    assert_eq!(value[1], json!({"path": "a.txt", "head": 2}));
}

#[tokio::test]
async fn an_uncaught_tool_call_error_fails_the_run_at_the_line_that_awaited_it() {
    let cm = python_with_tools();
    let outcome = run(&cm, "x = 1\nawait tools.broken({})\n").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(failure.kind, FailureKind::Exception);
    assert_eq!(failure.line, Some(2));
    assert!(
        failure.message.starts_with("ToolCallError: it broke"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn errors_name_what_cpython_names_with_the_line_column_and_a_caret() {
    let cm = python_with_tools();
    let outcome = run(&cm, "a = 1\nprint(a)\nb = x + 1\n").await;
    let failure = outcome
        .run
        .as_ref()
        .and_then(|r| r.failure.clone())
        .expect("a failure");
    assert_eq!(failure.kind, FailureKind::Exception);
    assert_eq!(failure.message, "NameError: name 'x' is not defined");
    assert_eq!((failure.line, failure.column), (Some(3), Some(5)));
    let text = outcome.result.text();
    assert!(text.contains("    3 | b = x + 1"), "{text}");
    assert!(text.contains('^'), "{text}");

    let outcome = run(&cm, "d = {'a': 1}\nd.foo\n").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(
        failure.message,
        "AttributeError: 'dict' object has no attribute 'foo'"
    );
    assert_eq!(failure.line, Some(2));

    // A failure inside functions says which calls led there.
    let outcome = run(
        &cm,
        "def f(n):\n    return g(n)\n\ndef g(n):\n    return n / 0\n\nf(1)\n",
    )
    .await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert!(
        failure
            .message
            .starts_with("ZeroDivisionError: division by zero"),
        "{}",
        failure.message
    );
    assert_eq!(failure.line, Some(5));
    assert!(
        failure.message.contains("line 7, in <module>"),
        "{}",
        failure.message
    );
    assert!(
        failure.message.contains("line 2, in f"),
        "{}",
        failure.message
    );

    // A syntax error is placed too.
    let outcome = run(&cm, "x = (1,\n").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(failure.kind, FailureKind::Exception);
    assert!(
        failure.message.starts_with("SyntaxError"),
        "{}",
        failure.message
    );
    assert!(failure.line.is_some());

    // Unknown tools are refused before anything runs; reached another way, they are
    // AttributeErrors worded as CPython words them.
    let outcome = run(&cm, "await tools.nope({})").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(failure.cause, Some(FailureCause::Preflight));
    assert_eq!((failure.line, failure.column), (Some(1), Some(13)));
    let outcome = run(&cm, "t = tools\nawait t.nope({})").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(
        failure.message,
        "AttributeError: 'Tools' object has no attribute 'nope'"
    );
}

#[tokio::test]
async fn only_lossless_json_leaves_the_sandbox() {
    let cm = python_with_tools();
    let outcome = run(&cm, "{1, 2}").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(failure.kind, FailureKind::InvalidOutput);
    assert!(failure.message.contains("a set"), "{}", failure.message);

    let outcome = run(&cm, "{'a': [1, float('nan')]}").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(failure.kind, FailureKind::InvalidOutput);
    assert!(failure.message.contains("['a'][1]"), "{}", failure.message);

    // A tool's arguments follow the same rule, as a ToolCallError the program can catch.
    let outcome = run(
        &cm,
        "try:\n    await tools.echo({'when': b'x'})\nexcept ToolCallError as e:\n    r = str(e)\nr",
    )
    .await;
    let value = outcome
        .value()
        .expect("a value")
        .as_str()
        .unwrap()
        .to_owned();
    assert!(value.contains("lossless JSON"), "{value}");

    // None is no value, as undefined is in TypeScript; floats print as JSON numbers.
    let outcome = run(&cm, "print('only logs')").await;
    assert_eq!(outcome.value(), None);
    let outcome = run(&cm, "[1.0, 0.5, 2**53 - 1, -3]").await;
    assert_eq!(
        outcome.value(),
        Some(&json!([1, 0.5, 9007199254740991i64, -3]))
    );
    let outcome = run(&cm, "[10**20]").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(failure.kind, FailureKind::InvalidOutput);
    assert!(
        failure.message.contains("make it a str"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn gathered_calls_overlap_within_max_parallel() {
    let probe = Arc::new(Probe::default());
    let config = RunCodeConfig::default().max_parallel_sub_calls(2);
    let mut cm = CodeMode::for_language(Language::Python, config, Budgets::default());
    cm.add(probed("slow", probe.clone(), 50, true));
    let program = "import asyncio\nrs = await asyncio.gather(*[tools.slow({'i': i}) for i in range(5)])\nlen(rs)";
    let outcome = run(&cm, program).await;
    let run = outcome.run.as_ref().expect("the program ran");
    assert_eq!(run.failure, None, "{:?}", run.failure);
    assert_eq!(outcome.value(), Some(&json!(5)));
    assert_eq!(probe.peak(), 2, "{:?}", probe.log());
}

#[tokio::test]
async fn asyncio_sleep_waits_on_a_host_timer_beside_a_tool_call() {
    let cm = python_with_tools();
    let program = r#"import asyncio
order = []
async def later():
    await asyncio.sleep(0.01)
    order.append("slept")
async def call():
    r = await tools.echo({"x": 1})
    order.append("called")
await asyncio.gather(later(), call())
order"#;
    let outcome = run(&cm, program).await;
    let run = outcome.run.as_ref().expect("the program ran");
    assert_eq!(run.failure, None, "{:?}", run.failure);
    let order = outcome.value().expect("a value");
    assert_eq!(order.as_array().map(Vec::len), Some(2), "{order}");
}

#[tokio::test]
async fn budgets_hold_for_python_as_for_typescript() {
    let budgets = Budgets {
        compute_ms: 50,
        memory_mb: 64,
        ..Budgets::default()
    };
    let cm = CodeMode::for_language(Language::Python, RunCodeConfig::default(), budgets);
    let outcome = run(&cm, "while True:\n    pass").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(failure.kind, FailureKind::Timeout);
    assert_eq!(failure.cause, Some(FailureCause::Compute));

    let outcome = run(&cm, "s = 'x' * 10**9\nlen(s)").await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert!(
        failure.cause == Some(FailureCause::Memory) || failure.kind == FailureKind::Exception,
        "{failure:?}"
    );
}

#[tokio::test]
async fn the_sandbox_has_no_filesystem_environment_or_network_and_survives_hostile_programs() {
    let cm = python_with_tools();
    for (program, expect) in [
        ("open('/etc/passwd').read()", "Error"),
        ("import os\nos.getenv('HOME')", ""),
        ("import socket", "ModuleNotFoundError"),
        ("def f(n):\n    return f(n + 1)\nf(0)", "RecursionError"),
        ("raise ValueError('x' * 100)", "ValueError"),
    ] {
        let outcome = run(&cm, program).await;
        let run = outcome.run.as_ref().expect("the program ran");
        match &run.failure {
            Some(failure) => assert!(failure.message.contains(expect), "{program}: {failure:?}"),
            None => assert!(
                outcome
                    .value()
                    .is_none_or(|v| !v.to_string().contains("/root")),
                "{program}: {:?}",
                outcome.value()
            ),
        }
    }
    // The host is still there for the next program.
    let outcome = run(&cm, "1 + 1").await;
    assert_eq!(outcome.value(), Some(&json!(2)));
}

#[tokio::test]
async fn a_runtime_refuses_programs_in_the_other_language() {
    let python = python_with_tools();
    let typescript_request =
        CodeRequest::new("id-ts", "return 1", "ts", AbortSignal::never()).agent(&python.agent);
    let outcome = run_code::run(&python.registry, typescript_request).await;
    assert!(outcome.run.is_none());
    let text = outcome.result.text();
    assert!(text.contains("Python"), "{text}");

    let typescript = CodeMode::new();
    let outcome = run_code::run(
        &typescript.registry,
        request("1 + 1").agent(&typescript.agent),
    )
    .await;
    assert!(outcome.run.is_none());
}

/// What CPython makes of a corpus program (`tests/e2e/python/cpython.py`).
fn under_cpython(path: &std::path::Path) -> serde_json::Value {
    let script = codemode_e2e::fixtures().join("../tests/e2e/python/cpython.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(path)
        .output()
        .expect("python3 runs");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test]
async fn a_corpus_of_programs_prints_and_fails_as_cpython_does() {
    let mut cm = CodeMode::python();
    cm.add(echo()).add(tool("fail", |args, _| async move {
        let message = args
            .get("message")
            .and_then(|m| m.as_str())
            .unwrap_or("failed")
            .to_owned();
        Err(ToolError::new(message))
    }));
    let dir = codemode_e2e::fixtures().join("python/corpus");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 20, "{} programs", paths.len());
    let mut differences = Vec::new();
    for path in &paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let program = std::fs::read_to_string(path).expect("readable");
        let cpython = under_cpython(path);
        let outcome = run(&cm, &program).await;
        let Some(ran) = outcome.run.as_ref() else {
            differences.push(format!("{name}: did not run: {}", outcome.result.text()));
            continue;
        };
        let logs = serde_json::to_value(&ran.logs).unwrap();
        if logs != cpython["logs"] {
            differences.push(format!(
                "{name}: printed\n  {logs}\nCPython printed\n  {}",
                cpython["logs"]
            ));
        }
        let ours = ran.failure.as_ref().map(|f| {
            let first = f.message.lines().next().unwrap_or_default().to_owned();
            (first, f.line)
        });
        let theirs = cpython["error"].as_object().map(|e| {
            let message = e["message"].as_str().unwrap_or_default();
            let summary = if message.is_empty() {
                e["type"].as_str().unwrap_or_default().to_owned()
            } else {
                format!("{}: {message}", e["type"].as_str().unwrap_or_default())
            };
            (summary, e["line"].as_u64().map(|l| l as u32))
        });
        if ours != theirs {
            differences.push(format!(
                "{name}: failed with {ours:?}, CPython with {theirs:?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
}

/// Programs outside the subset Monty runs: each fails with the error its first line names (or
/// gives the result it names), and the sandbox is fine after it. COMPATIBILITY.md lists them.
#[tokio::test]
async fn programs_outside_the_subset_fail_saying_what_is_not_supported() {
    let mut cm = CodeMode::python();
    cm.add(echo());
    let dir = codemode_e2e::fixtures().join("python/unsupported");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("the programs")
        .map(|e| e.expect("entry").path())
        .collect();
    paths.sort();
    assert!(paths.len() >= 5);
    for path in paths {
        let program = std::fs::read_to_string(&path).expect("readable");
        let first = program.lines().next().unwrap_or_default();
        let outcome = run(&cm, &program).await;
        let ran = outcome.run.as_ref().expect("the program ran");
        if let Some(error) = first.strip_prefix("# error: ") {
            let failure = ran.failure.as_ref().expect("a failure");
            assert_eq!(failure.message, error, "{}", path.display());
            assert!(failure.line.is_some(), "{}", path.display());
        } else {
            let result = first
                .strip_prefix("# result: ")
                .expect("# error: or # result:");
            let value = outcome.value().expect("a value").to_string();
            assert_eq!(value, result, "{}", path.display());
        }
    }
    assert_eq!(run(&cm, "1 + 1").await.value(), Some(&json!(2)));
}

#[tokio::test]
async fn a_reply_that_comes_while_time_sleep_holds_the_program_is_not_lost() {
    let cm = python_with_tools();
    // The call starts when it is made; its reply comes while the program sleeps.
    let program = r#"import time
pending = tools.echo({"v": 7})
time.sleep(0.05)
r = await pending
[r["v"], (1, "two")]"#;
    let outcome = run(&cm, program).await;
    let run = outcome.run.as_ref().expect("the program ran");
    assert_eq!(run.failure, None, "{:?}", run.failure);
    assert_eq!(outcome.value(), Some(&json!([7, [1, "two"]])));
}

#[tokio::test]
async fn a_python_programs_calls_meet_the_guards_and_make_the_events_a_typescript_ones_do() {
    let mut cm = python_with_tools();
    cm.keep(cm.registry.guard(None, |call| {
        (call.name() == "my-tool").then(|| "my-tool is not allowed here".to_owned())
    }));
    let program = r#"await tools.echo({"a": 1})
try:
    await tools["my-tool"]({})
except ToolCallError as e:
    print(e.tool_name, "refused:", e)
"#;
    let result = cm.run(program).await;
    assert!(!result.is_error(), "{}", result.text());
    assert_eq!(
        result.text(),
        "my-tool refused: my-tool is not allowed here"
    );
    assert_eq!(
        cm.events.summary(),
        [
            "tool/call call-1",
            "start call-1:code:1",
            "settle call-1:code:1",
            "start call-1:code:2",
            "settle call-1:code:2 error",
            "tool/result call-1",
        ]
    );
    let report = cm.report();
    let outcomes: Vec<_> = report.sub_calls.iter().map(|c| c.outcome).collect();
    assert_eq!(outcomes, [CallOutcome::Resolved, CallOutcome::Rejected]);
}

#[tokio::test]
async fn a_program_that_ends_by_assigning_gets_the_hint_to_end_with_the_name() {
    let cm = python_with_tools();
    let outcome = run(&cm, "r = await tools.echo({'n': 1})\ntotal = r['n'] + 1\n").await;
    let ran = outcome.run.as_ref().expect("the program ran");
    assert_eq!(outcome.value(), None);
    assert_eq!(
        ran.hint.as_deref(),
        Some("hint: the program returned nothing; its last statement (line 2) assigns `total`: end with `total` (or `return total`) to return it")
    );
    let outcome = run(&cm, "total = 2\nprint(total)").await;
    assert_eq!(outcome.run.and_then(|r| r.hint), None);
}

//! Shared helpers for the end-to-end suites: build a runtime, bind tools, run a program; and
//! (in [`harness`]) a Code Mode registry over the real runtime.

pub mod fuzz_targets;
pub mod harness;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use codemode_host::{Budgets, WasmCodeRuntime};
use codemode_runtime::code::{
    binding, BindingFn, BindingNamespace, CodeRuntime, ErrorClass, FailureKind, RunRequest,
    RunResult,
};
use codemode_runtime::signal::AbortSignal;
use serde_json::Value;

pub use serde_json::json;

/// A runtime with the default budgets.
pub fn runtime() -> WasmCodeRuntime {
    runtime_with(Budgets::default())
}

pub fn runtime_with(budgets: Budgets) -> WasmCodeRuntime {
    WasmCodeRuntime::new(budgets).expect("runtime")
}

/// A `tools` namespace with `ToolCallError` / `toolName`.
pub fn tools(functions: Vec<(&str, BindingFn)>) -> BindingNamespace {
    namespace("tools", functions, Some(("ToolCallError", "toolName")))
}

pub fn namespace(
    global: &str,
    functions: Vec<(&str, BindingFn)>,
    class: Option<(&str, &str)>,
) -> BindingNamespace {
    BindingNamespace {
        global: global.into(),
        functions: functions
            .into_iter()
            .map(|(n, f)| (n.to_owned(), f))
            .collect::<BTreeMap<_, _>>(),
        error_class: class.map(|(name, member)| ErrorClass {
            name: name.into(),
            member_name_property: member.into(),
        }),
    }
}

/// A binding that returns its arguments.
pub fn echo() -> BindingFn {
    binding(|args, _| async move { Ok(args) })
}

/// A binding that counts its invocations and returns its arguments.
pub fn counted(counter: Arc<AtomicUsize>) -> BindingFn {
    binding(move |args, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { Ok(args) }
    })
}

/// A binding that resolves with `value` after `ms` milliseconds, or rejects as soon as the
/// run tells it to stop.
pub fn slow(ms: u64, value: Value) -> BindingFn {
    binding(move |_, signal| {
        let value = value.clone();
        async move {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => Ok(value),
                reason = signal.aborted() => Err(reason),
            }
        }
    })
}

/// A binding that always rejects with `message`.
pub fn failing(message: &str) -> BindingFn {
    let message = message.to_owned();
    binding(move |_, _| {
        let message = message.clone();
        async move { Err(message) }
    })
}

pub async fn run_on(
    rt: &WasmCodeRuntime,
    program: &str,
    bindings: Vec<BindingNamespace>,
    signal: Option<AbortSignal>,
) -> RunResult {
    rt.run(RunRequest {
        program: program.into(),
        bindings,
        signal,
        ..Default::default()
    })
    .await
    .expect("run resolves")
}

/// Runs `program` with the default budgets and an echo tool.
pub async fn run(program: &str) -> RunResult {
    run_on(
        &runtime(),
        program,
        vec![tools(vec![("echo", echo())])],
        None,
    )
    .await
}

/// Asserts a failure of `kind` and returns its message.
#[track_caller]
pub fn failure(result: &RunResult, kind: FailureKind) -> String {
    let error = result
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("expected a {kind} failure, got {result:?}"));
    assert_eq!(error.kind, kind, "{result:?}");
    assert!(result.value.is_none(), "a failed run carries no value");
    error.message.clone()
}

/// Asserts success and returns the value.
#[track_caller]
pub fn value(result: &RunResult) -> Value {
    assert!(
        result.error.is_none(),
        "expected success, got {:?}",
        result.error
    );
    result
        .value
        .as_ref()
        .map(codemode_runtime::json::clone_deep)
        .unwrap_or(Value::Null)
}

/// Runs the program `fixtures/<fixture>` as the body of an async function in Node and in
/// codemode (default budgets, an echo tool) and returns the cases each made, Node's first.
/// Both must return arrays of the same length, of at least `at_least` cases.
pub async fn fixture_cases_beside_node(fixture: &str, at_least: usize) -> (Vec<Value>, Vec<Value>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(fixture);
    let body = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the fixture {}: {e}", path.display()));
    let script = format!(
        "(async function () {{'use strict';\n{body}\n}})().then((v) => process.stdout.write(JSON.stringify(v)), (e) => {{ console.error(e); process.exit(1); }});"
    );
    let out = std::process::Command::new("node")
        .args(["-e", &script])
        .output()
        .expect("node must be on PATH (.ci/run installs it with the test toolchain)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node: Value = serde_json::from_slice(&out.stdout).expect("node's JSON");
    let result = run(&body).await;
    assert!(result.error.is_none(), "{:?}", result.error);
    let (Value::Array(node), Some(Value::Array(ours))) = (node, result.value) else {
        panic!("both return arrays");
    };
    assert!(node.len() >= at_least, "the fixture makes its cases");
    assert_eq!(ours.len(), node.len());
    (node, ours)
}

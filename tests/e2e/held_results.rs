//! Tool results waiting for the program count against its memory budget, with the arguments of
//! its calls in flight: a program that starts many calls whose results are larger than their
//! arguments (a hundred reads of a large file, never awaited) fails with the memory cause while
//! the host stays within a bound of its budget, instead of holding every result; results that
//! fit reach the program as before, and what was charged is released as the program takes it.
//! Through the real paths: the `codemode` binary, `run_code` over the runtime with the built-in
//! tools, and the runtime with a binding of its own.

use std::sync::Arc;

use codemode_e2e::harness::{self, CodeMode};
use codemode_e2e::{failure, run_on, runtime_with, temp_dir, tools, TempDir};
use codemode_host::{builtins, Budgets};
use codemode_runtime::code::{binding, FailureCause, FailureKind, RunResult};
use codemode_runtime::run_code::RunCodeConfig;
use codemode_runtime::tools::ToolError;
use serde_json::{json, Value};

use super::hostile_corpus::run_cli;

const MIB: usize = 1024 * 1024;

/// A workspace holding `name`, `mib` MiB of one letter.
fn workspace_with(name: &str, mib: usize) -> TempDir {
    let dir = temp_dir("held");
    std::fs::write(dir.join(name), "a".repeat(mib * MIB)).expect("write the file");
    dir
}

fn budgets(memory_mb: u64) -> Budgets {
    Budgets {
        memory_mb,
        ..Budgets::default()
    }
}

/// `program` through `run_code` with the built-in tools rooted at `root`.
async fn run_code_over(root: &TempDir, memory_mb: u64, program: &str) -> RunResult {
    let mut cm = CodeMode::with(RunCodeConfig::default(), budgets(memory_mb));
    let guard = builtins::register(&cm.registry, root.path()).expect("the built-in tools");
    cm.keep(guard);
    cm.run(program).await;
    cm.report().result
}

#[track_caller]
fn assert_memory_failure(result: &RunResult) -> String {
    let message = failure(result, FailureKind::WorkerExit);
    let cause = result.error.as_ref().and_then(|e| e.cause);
    assert_eq!(cause, Some(FailureCause::Memory), "{result:?}");
    message
}

/// The reproduction: a hundred reads of a 15 MiB file started at once under a 64 MiB budget,
/// then a computation. Every result used to wait in host memory (1.9 GB resident; four hundred
/// reads were killed at 4 GB). Now the run fails with the memory cause, and the host's peak is
/// bounded by the budget plus the reads running at once (`--max-parallel`, 10): well under five
/// budgets above an idle run.
#[test]
fn unawaited_reads_of_a_large_file_fail_with_the_memory_cause_and_the_host_stays_bounded() {
    let root = workspace_with("big.txt", 15);
    let b = budgets(64);
    let program = r#"
        const calls = [];
        for (let i = 0; i < 100; i++) calls.push(tools.read_file({ path: "big.txt" }).then((t) => t.length));
        let x = 0;
        for (let i = 0; i < 30_000_000; i++) x = (x + i) % 1000003;
        return [x, (await Promise.all(calls)).length];
    "#;
    let root_flag = root.path().to_str().expect("a UTF-8 path");
    let (text, stderr, peak) = run_cli(Err(program), &b, &["--root", root_flag]);
    let outcome: Value =
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text} {stderr}"));
    let error = &outcome["error"];
    assert_eq!(error["kind"], "worker-exit", "{outcome}");
    assert_eq!(error["cause"], "memory", "{outcome}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("memory limit exceeded (64 MiB): the tool results")),
        "{outcome}"
    );
    let (idle_out, _, idle) = run_cli(Err("return 1"), &b, &["--root", root_flag]);
    assert!(idle_out.contains("\"result\""), "{idle_out}");
    let bound = 5.0 * b.memory_mb as f64;
    eprintln!("peak {peak:.0} MiB, idle {idle:.0} MiB, bound idle + {bound} MiB");
    assert!(
        peak - idle < bound,
        "the host peaked at {peak:.0} MiB, {:.0} MiB over an idle run's {idle:.0} (bound {bound})",
        peak - idle
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_result_larger_than_the_budget_fails_with_the_memory_cause() {
    let root = workspace_with("big.txt", 15);
    let result = run_code_over(
        &root,
        12,
        r#"const text = await tools.read_file({ path: "big.txt" }); return text.length;"#,
    )
    .await;
    let message = assert_memory_failure(&result);
    assert!(
        message.starts_with("memory limit exceeded (12 MiB): the tool results waiting"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_that_fit_reach_the_program_and_their_charge_is_released() {
    let root = workspace_with("one.txt", 1);
    // Ten at once under the default budget.
    let result = run_code_over(
        &root,
        Budgets::default().memory_mb,
        r#"const texts = await Promise.all(Array.from({ length: 10 }, () => tools.read_file({ path: "one.txt" })));
           return texts.map((t) => t.length);"#,
    )
    .await;
    assert_eq!(result.value, Some(json!(vec![MIB; 10])), "{result:?}");
}

/// What was charged is released as the program takes it: three hundred calls one after another,
/// each failing with a 1 MiB message (held on the host whole, and again as the error's text,
/// while the program gets 64 KiB of it), put 600 MiB through a 64 MiB account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_answer_is_no_longer_charged() {
    let mut cm = CodeMode::with(RunCodeConfig::default(), budgets(64));
    cm.add(harness::tool("shout", |_, _| async {
        Err(ToolError::new("x".repeat(MIB)))
    }));
    cm.run(
        r#"let heard = 0;
           for (let i = 0; i < 300; i++) {
             try { await tools.shout({}); } catch (e) { heard += e.message.length; }
           }
           return heard;"#,
    )
    .await;
    let result = cm.report().result;
    let heard = result.value.as_ref().and_then(Value::as_u64);
    assert!(
        heard.is_some_and(|n| n >= 300 * 64 * 1024),
        "{:?}",
        result.error
    );
}

/// The runtime counts what its own bindings answer, not only what `run_code` holds: a binding
/// answering 8 MiB strings, called sixty times at once by a program that then computes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bindings_answers_count_against_the_budget_too() {
    let big = Arc::new("b".repeat(8 * MIB));
    let answer = binding(move |_, _| {
        let big = big.clone();
        async move { Ok(Value::String(big.as_str().to_owned())) }
    });
    let runtime = runtime_with(budgets(64));
    let program = r#"
        const calls = Array.from({ length: 60 }, () => tools.big({}).then((t) => t.length));
        let x = 0;
        for (let i = 0; i < 10_000_000; i++) x = (x + i) % 7;
        return (await Promise.all(calls)).length;
    "#;
    let bindings = || vec![tools(vec![("big", answer.clone())])];
    let result = run_on(&runtime, program, bindings(), None).await;
    let message = assert_memory_failure(&result);
    assert!(message.contains("the tool results waiting"), "{message}");
    // Five of them, each awaited: nothing waits long, and the run succeeds.
    let awaited =
        r#"let n = 0; for (let i = 0; i < 5; i++) n += (await tools.big({})).length; return n;"#;
    let result = run_on(&runtime, awaited, bindings(), None).await;
    assert_eq!(result.value, Some(json!(5 * 8 * MIB)), "{result:?}");
}

//! The hostile program corpus (`fixtures/hostile/programs/*.ts`, and `*.py` run by the Python
//! guest, with `#` for `//`): escapes, resource attacks, hostile values, bridge abuse and
//! host-side amplifications, each file with its expected outcome in a header:
//!
//! ```text
//! // budgets: {"compute_ms": 200, "memory_mb": 64, "max_output_bytes": 100000}
//! // expect: {"kind": "timeout", "cause": "compute"}
//! // via: cli                         (run by the `codemode` binary, not in process)
//! // peak_rss_mb_below: 200           (the host process's own peak memory, CLI cases)
//! // peak_over_idle_below_memory_budgets: 2
//! ```
//!
//! The last bounds what the run cost the host beyond an idle run (`return 1` under the same
//! budgets), in multiples of its memory budget: the sandbox's own memory plus what the host
//! holds on its behalf.
//!
//! `expect` may name `result` (exact), `result_at_least` (a number), `kind` or `kind_any`,
//! `cause`, `message_contains` or `message_any`. In-process cases run through `run_code` over
//! the real runtime with the built-in tools; every case must end with its one typed outcome.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use codemode_e2e::codemode_binary;
use codemode_e2e::harness::CodeMode;
use codemode_host::{builtins, Budgets};
use codemode_runtime::code::RunResult;
use codemode_runtime::run_code::RunCodeConfig;
use codemode_sdk_gen::Language;
use serde_json::{json, Value};

fn corpus() -> Vec<PathBuf> {
    let dir = codemode_e2e::manifest_dir().join("../fixtures/hostile/programs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "ts" || e == "py"))
        .collect();
    files.sort();
    files
}

/// The JSON of a `// key: …` header line.
fn header(program: &str, key: &str) -> Option<Value> {
    let slashes = format!("// {key}:");
    let hash = format!("# {key}:");
    program
        .lines()
        .find_map(|line| {
            line.strip_prefix(&slashes)
                .or_else(|| line.strip_prefix(&hash))
        })
        .map(|rest| serde_json::from_str(rest.trim()).unwrap_or(Value::String(rest.trim().into())))
}

fn budgets(program: &str) -> Budgets {
    let mut budgets = Budgets::default();
    if let Some(b) = header(program, "budgets") {
        let get = |k: &str| b.get(k).and_then(Value::as_u64);
        budgets.compute_ms = get("compute_ms").unwrap_or(budgets.compute_ms);
        budgets.wall_ms = get("wall_ms").unwrap_or(budgets.wall_ms);
        budgets.memory_mb = get("memory_mb").unwrap_or(budgets.memory_mb);
        budgets.max_output_bytes = get("max_output_bytes").unwrap_or(budgets.max_output_bytes);
    }
    budgets
}

/// Checks an outcome (`{"result": …}` or `{"error": {kind, message, cause?}}`) against the
/// file's `expect`.
fn check(name: &str, expect: &Value, outcome: &Value) {
    let error = &outcome["error"];
    let fail = |what: &str| panic!("{name}: {what}; outcome {outcome}");
    if let Some(result) = expect.get("result") {
        if &outcome["result"] != result {
            fail(&format!("expected result {result}"));
        }
    }
    if let Some(at_least) = expect.get("result_at_least").and_then(Value::as_f64) {
        if outcome["result"].as_f64().is_none_or(|r| r < at_least) {
            fail(&format!("expected a result of at least {at_least}"));
        }
    }
    if let Some(kind) = expect.get("kind") {
        if &error["kind"] != kind {
            fail(&format!("expected kind {kind}"));
        }
    }
    if let Some(kinds) = expect.get("kind_any").and_then(Value::as_array) {
        if !kinds.contains(&error["kind"]) {
            fail(&format!("expected a kind in {kinds:?}"));
        }
    }
    if let Some(cause) = expect.get("cause") {
        if &error["cause"] != cause {
            fail(&format!("expected cause {cause}"));
        }
    }
    let message = error["message"].as_str().unwrap_or_default();
    if let Some(part) = expect.get("message_contains").and_then(Value::as_str) {
        if !message.contains(part) {
            fail(&format!("expected a message containing {part:?}"));
        }
    }
    if let Some(parts) = expect.get("message_any").and_then(Value::as_array) {
        if !parts
            .iter()
            .any(|p| p.as_str().is_some_and(|p| message.contains(p)))
        {
            fail(&format!("expected a message containing one of {parts:?}"));
        }
    }
}

fn outcome_of(result: &RunResult) -> Value {
    match &result.error {
        Some(e) => {
            json!({"error": {"kind": e.kind.as_str(), "message": e.message, "cause": e.cause.map(|c| c.as_str())}})
        }
        None => json!({"result": result.value.clone().unwrap_or(Value::Null)}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_in_process_case_ends_with_its_expected_outcome() {
    let mut ran = 0;
    for path in corpus() {
        let program = std::fs::read_to_string(&path).unwrap();
        if header(&program, "via").is_some() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let expect = header(&program, "expect").unwrap_or_else(|| panic!("{name}: no expect"));
        let language = if path.extension().is_some_and(|e| e == "py") {
            Language::Python
        } else {
            Language::TypeScript
        };
        let mut cm = CodeMode::for_language(language, RunCodeConfig::default(), budgets(&program));
        let tools = builtins::register(&cm.registry, ".").unwrap();
        cm.keep(tools);
        let result = cm.run(&program).await;
        let report = cm.report();
        assert!(
            result.is_error() == report.result.error.is_some(),
            "{name}: exactly one outcome"
        );
        check(&name, &expect, &outcome_of(&report.result));
        ran += 1;
    }
    assert!(ran >= 15, "the corpus ran ({ran} cases)");
}

/// The peak resident memory of `pid` so far, in MiB (`VmHWM`).
pub(crate) fn peak_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
}

/// Runs `program` (a file, or stdin's text) with `codemode run --json` under `b` and `extra`
/// flags, returning its stdout, its stderr and the process's peak resident memory in MiB.
pub(crate) fn run_cli(
    program: Result<&Path, &str>,
    b: &Budgets,
    extra: &[&str],
) -> (String, String, f64) {
    let mut child = Command::new(codemode_binary())
        .args(["run", "--json"])
        .args(["--compute-ms", &b.compute_ms.to_string()])
        .args(["--memory-mb", &b.memory_mb.to_string()])
        .args(["--max-output-bytes", &b.max_output_bytes.to_string()])
        .args(extra)
        .arg(program.map_or(Path::new("-"), |path| path))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn codemode");
    // The peak is read while the process lives; its last reading is the run's peak.
    let pid = child.id();
    let watcher = std::thread::spawn(move || {
        let mut peak = 0f64;
        while let Some(now) = peak_mib(pid) {
            peak = peak.max(now);
            std::thread::sleep(Duration::from_millis(5));
        }
        peak
    });
    let mut stdin = child.stdin.take().expect("piped stdin");
    if let Err(text) = program {
        stdin.write_all(text.as_bytes()).expect("write the program");
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let peak = watcher.join().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        peak,
    )
}

#[test]
fn amplifications_stay_within_the_hosts_own_bounds() {
    let mut ran = 0;
    for path in corpus() {
        let program = std::fs::read_to_string(&path).unwrap();
        if header(&program, "via").is_none() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let expect = header(&program, "expect").unwrap_or_else(|| panic!("{name}: no expect"));
        let b = budgets(&program);
        let (text, stderr, peak) = run_cli(Ok(path.as_path()), &b, &[]);
        let outcome: Value = serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("{name}: {e}: {text} {stderr}"));
        check(&name, &expect, &outcome);
        if let Some(bound) = header(&program, "peak_rss_mb_below").and_then(|v| v.as_f64()) {
            assert!(
                peak < bound,
                "{name}: the host peaked at {peak:.0} MiB (bound {bound})"
            );
        }
        if let Some(budgets) =
            header(&program, "peak_over_idle_below_memory_budgets").and_then(|v| v.as_f64())
        {
            let (idle_out, _, idle) = if path.extension().is_some_and(|e| e == "py") {
                run_cli(Err("1"), &b, &["--lang", "python"])
            } else {
                run_cli(Err("return 1"), &b, &[])
            };
            assert!(
                idle_out.contains("\"result\""),
                "{name}: idle run: {idle_out}"
            );
            let bound = budgets * b.memory_mb as f64;
            eprintln!("{name}: peak {peak:.0} MiB, idle {idle:.0} MiB, bound idle + {bound} MiB");
            assert!(
                peak - idle < bound,
                "{name}: the host peaked at {peak:.0} MiB, {:.0} MiB over an idle run's {idle:.0} \
                 (bound {budgets} × {} MiB)",
                peak - idle,
                b.memory_mb
            );
        }
        ran += 1;
    }
    assert!(ran >= 4, "the amplification cases ran ({ran})");
}

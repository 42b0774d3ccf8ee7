//! Caps on the calls a program makes: in all (`--max-calls`) and per tool
//! (`--max-calls-per-tool`). Past one the run stops as an `exception` with cause `calls`, and
//! the `calls` record shows what ran.

use std::process::Command;

use codemode_e2e::harness::CodeMode;
use codemode_e2e::{codemode_binary, temp_dir};
use codemode_host::Budgets;
use codemode_runtime::code::{CallCaps, CallOutcome, FailureCause, FailureKind};
use codemode_runtime::run_code::{self, CodeRequest, RunCodeConfig};
use codemode_runtime::signal::AbortSignal;
use codemode_sdk_gen::Language;
use serde_json::{json, Value};

use super::echo;

fn capped(caps: CallCaps, language: Language) -> CodeMode {
    let mut cm = CodeMode::for_language(
        language,
        RunCodeConfig::default().call_caps(caps),
        Budgets::default(),
    );
    cm.add(echo());
    cm
}

fn request(program: &str, language: Language) -> CodeRequest {
    let id = uuid::Uuid::new_v4().to_string();
    CodeRequest::new(id, program, "Capped calls", AbortSignal::never()).language(language)
}

#[tokio::test]
async fn a_loop_past_the_cap_stops_with_cause_calls_and_the_record_shows_what_ran() {
    let caps = CallCaps {
        total: Some(5),
        ..CallCaps::default()
    };
    let cm = capped(caps, Language::TypeScript);
    let program =
        "let n = 0;\nfor (let i = 0; i < 100; i++) { await tools.echo({ i }); n++; }\nreturn n;";
    let outcome = run_code::run(
        &cm.registry,
        request(program, Language::TypeScript).agent(&cm.agent),
    )
    .await;
    let run = outcome.run.as_ref().expect("the program ran");
    let failure = run.failure.as_ref().expect("the cap stops the run");
    assert_eq!(failure.kind, FailureKind::Exception);
    assert_eq!(failure.cause, Some(FailureCause::Calls));
    assert!(
        failure.message.contains("cap of 5 tool calls"),
        "{}",
        failure.message
    );
    assert_eq!(run.calls.len(), 5);
    assert!(run.calls.iter().all(|c| c.outcome == CallOutcome::Resolved));
    // The model reads why.
    assert!(
        outcome.result.text().contains("cap of 5 tool calls"),
        "{}",
        outcome.result.text()
    );
}

#[tokio::test]
async fn a_cap_per_tool_counts_that_tool_only_in_either_language() {
    let caps = CallCaps {
        per_function: [("echo".to_owned(), 3)].into(),
        ..CallCaps::default()
    };
    let cm = capped(caps.clone(), Language::Python);
    let program = "for i in range(10):\n    await tools.echo({'i': i})\n";
    let outcome = run_code::run(
        &cm.registry,
        request(program, Language::Python).agent(&cm.agent),
    )
    .await;
    let run = outcome.run.as_ref().expect("the program ran");
    let failure = run.failure.as_ref().expect("the cap stops the run");
    assert_eq!(failure.cause, Some(FailureCause::Calls));
    assert!(
        failure.message.contains("cap of 3 calls of echo"),
        "{}",
        failure.message
    );
    assert_eq!(run.calls.len(), 3);

    // Under the cap, nothing happens.
    let cm = capped(caps, Language::TypeScript);
    let program = "await tools.echo({}); await tools.echo({}); return 'fine';";
    let outcome = run_code::run(
        &cm.registry,
        request(program, Language::TypeScript).agent(&cm.agent),
    )
    .await;
    assert_eq!(outcome.value(), Some(&json!("fine")));
}

fn run_cli(program: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
    let dir = temp_dir("caps");
    let file = dir.path().join("program.ts");
    std::fs::write(&file, program).expect("write");
    let out = Command::new(codemode_binary())
        .arg("run")
        .arg("--json")
        .args(extra)
        .arg(&file)
        .output()
        .expect("codemode runs");
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_takes_both_caps_and_refuses_a_cap_on_a_tool_it_does_not_have() {
    let program = "for (let i = 0; i < 50; i++) await tools.echo({ i });\nreturn 'done';";
    let (code, out, stderr) = run_cli(program, &["--max-calls", "7"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(out["error"]["cause"], "calls", "{out}");
    assert_eq!(out["calls"].as_array().map(Vec::len), Some(7), "{out}");

    let (code, out, stderr) = run_cli(program, &["--max-calls-per-tool", "echo=2"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(out["error"]["cause"], "calls", "{out}");
    assert_eq!(out["calls"].as_array().map(Vec::len), Some(2), "{out}");

    let (code, _, stderr) = run_cli(program, &["--max-calls-per-tool", "ecko=2"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown tool \"ecko\""), "{stderr}");
    let (code, _, stderr) = run_cli(program, &["--max-calls-per-tool", "echo"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("NAME=N"), "{stderr}");
}

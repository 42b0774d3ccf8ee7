//! `run_code::run`: the typed way in. A program with its language, budgets and resumption in;
//! the run's logs, value or failure, pause and `calls` record out, through the same pipeline a
//! model's call takes.

use codemode_e2e::harness::CodeMode;
use codemode_host::Budgets;
use codemode_runtime::code::{CallOutcome, FailureCause, FailureKind};
use codemode_runtime::run_code::{self, CodeRequest};
use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::PreDecision;
use codemode_sdk_gen::Language;
use serde_json::json;

use super::{echo, failing};

fn request(program: &str) -> CodeRequest {
    let id = uuid::Uuid::new_v4().to_string();
    CodeRequest::new(id, program, "A typed run", AbortSignal::never())
}

#[tokio::test]
async fn a_typed_run_gives_back_the_value_logs_and_calls_without_text() {
    let mut cm = CodeMode::new();
    cm.add(echo()).add(failing("broken", "it broke"));
    let program = "console.log('start');\nconst r = await tools.echo({ v: 1 });\ntry { await tools.broken({}); } catch (e) { console.log(e.toolName); }\nreturn { got: r.v };";
    let outcome = run_code::run(&cm.registry, request(program).agent(&cm.agent)).await;
    let run = outcome.run.as_ref().expect("the program ran");
    assert_eq!(run.logs, ["start", "broken"]);
    assert_eq!(run.failure, None);
    assert_eq!(outcome.value(), Some(&json!({"got": 1})));
    assert_eq!(outcome.refusal(), None);
    let calls: Vec<_> = run
        .calls
        .iter()
        .map(|c| (c.tool.as_str(), c.outcome))
        .collect();
    assert_eq!(
        calls,
        [
            ("echo", CallOutcome::Resolved),
            ("broken", CallOutcome::Rejected)
        ]
    );
    // What a model's call returns is there too, unchanged.
    assert!(!outcome.result.is_error());
    assert_eq!(outcome.result.text(), "start\nbroken\n{\n  \"got\": 1\n}");
}

#[tokio::test]
async fn a_failure_is_typed_with_its_kind_and_position() {
    let cm = CodeMode::new();
    let outcome = run_code::run(&cm.registry, request("const a = 1;\nnull.x;")).await;
    let run = outcome.run.as_ref().expect("the program ran");
    let failure = run.failure.as_ref().expect("a failure");
    assert_eq!(failure.kind, FailureKind::Exception);
    assert_eq!(failure.line, Some(2));
    assert_eq!(outcome.value(), None);
    // The model still reads it as CODE_RUN_FAILED, with the caret excerpt.
    assert_eq!(outcome.result.error_code(), Some("CODE_RUN_FAILED"));
    assert!(outcome.result.text().contains("    2 | null.x;"));
}

#[tokio::test]
async fn a_requests_budgets_tighten_the_runtimes_and_never_loosen_them() {
    let budgets = Budgets {
        compute_ms: 60_000,
        ..Budgets::default()
    };
    let cm = CodeMode::with(Default::default(), budgets);
    let spin = "while (true) {}";
    let tight = Budgets {
        compute_ms: 20,
        ..Budgets::default()
    };
    let outcome = run_code::run(&cm.registry, request(spin).budgets(tight)).await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(failure.kind, FailureKind::Timeout);
    assert_eq!(failure.cause, Some(FailureCause::Compute));
    assert!(failure.message.contains("20"), "{}", failure.message);

    // A looser budget than the runtime's is held to the runtime's.
    let small = CodeMode::with(
        Default::default(),
        Budgets {
            compute_ms: 20,
            ..Budgets::default()
        },
    );
    let loose = Budgets {
        compute_ms: 60_000,
        ..Budgets::default()
    };
    let outcome = run_code::run(&small.registry, request(spin).budgets(loose)).await;
    let failure = outcome.run.and_then(|r| r.failure).expect("a failure");
    assert_eq!(failure.cause, Some(FailureCause::Compute));
    assert!(failure.message.contains("20"), "{}", failure.message);
}

#[tokio::test]
async fn unusable_budgets_and_another_language_are_refused_before_anything_runs() {
    let cm = CodeMode::new();
    let zero = Budgets {
        compute_ms: 0,
        ..Budgets::default()
    };
    let outcome = run_code::run(&cm.registry, request("return 1").budgets(zero)).await;
    assert!(outcome.run.is_none());
    let refusal = outcome.refusal().expect("refused");
    assert!(refusal.message.contains("computeMs"), "{}", refusal.message);

    let python = request("return 1").language(Language::Python);
    let outcome = run_code::run(&cm.registry, python).await;
    assert!(outcome.run.is_none());
    let refusal = outcome.refusal().expect("refused");
    assert_eq!(
        refusal.message,
        "run_code: this runtime runs TypeScript programs, not Python"
    );
}

#[tokio::test]
async fn a_call_the_pipeline_turns_away_has_no_run_and_says_why() {
    let mut cm = CodeMode::new();
    let guard = cm.registry.on_pre_execute(|call, next| async move {
        if call.name() == "run_code" {
            Ok(PreDecision::Deny {
                reason: "no programs today".to_owned(),
            })
        } else {
            next.run().await
        }
    });
    cm.keep(guard);
    let outcome = run_code::run(&cm.registry, request("return 1")).await;
    assert!(outcome.run.is_none());
    let refusal = outcome.refusal().expect("refused");
    assert!(
        refusal.message.contains("no programs today"),
        "{}",
        refusal.message
    );
}

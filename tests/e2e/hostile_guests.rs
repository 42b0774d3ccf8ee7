//! Hand-written hostile guests (WAT in `fixtures/hostile/`) drive the host side of the bridge
//! directly: forged frames, reused ids, out-of-bounds pointers, junk, traffic after `done`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use codemode_e2e::*;
use codemode_host::{Budgets, WasmCodeRuntime};
use codemode_runtime::code::{CallOutcome, FailureCause, FailureKind, RunResult};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../fixtures/hostile/{name}",
        codemode_e2e::manifest_dir().display()
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn guest(wat: &str, budgets: Budgets) -> WasmCodeRuntime {
    let bytes = wat::parse_str(wat).expect("valid WAT");
    WasmCodeRuntime::with_guest_module(&bytes, budgets).expect("links")
}

async fn run_guest(wat: &str, budgets: Budgets, calls: Arc<AtomicUsize>) -> RunResult {
    let rt = guest(wat, budgets);
    run_on(
        &rt,
        "return 1",
        vec![tools(vec![("echo", counted(calls))])],
        None,
    )
    .await
}

async fn run_misc(mode: &str, budgets: Budgets) -> RunResult {
    let wat = fixture("misc.wat").replace("MODE", mode);
    run_guest(&wat, budgets, Arc::new(AtomicUsize::new(0))).await
}

#[tokio::test]
async fn forged_calls_are_dropped_and_the_real_call_still_works() {
    let calls = Arc::new(AtomicUsize::new(0));
    let r = run_guest(
        &fixture("forged_calls.wat"),
        Budgets::default(),
        calls.clone(),
    )
    .await;
    assert_eq!(value(&r), json!({"a": 1}));
    assert!(r.logs.is_empty());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "only the real call reached the binding"
    );
    let outcomes: Vec<_> = r
        .calls
        .iter()
        .map(|c| (c.name.as_str(), c.outcome))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("constructor", CallOutcome::Rejected),
            ("echo", CallOutcome::Resolved)
        ]
    );
}

#[tokio::test]
async fn the_first_outcome_wins_and_later_traffic_is_ignored() {
    let calls = Arc::new(AtomicUsize::new(0));
    let r = run_guest(
        &fixture("done_twice.wat"),
        Budgets::default(),
        calls.clone(),
    )
    .await;
    assert_eq!(value(&r), json!(1));
    assert!(r.logs.is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_forged_negative_zero_completion_is_revalidated() {
    let r = run_guest(
        &fixture("done_value.wat"),
        Budgets::default(),
        Arc::new(AtomicUsize::new(0)),
    )
    .await;
    assert_eq!(
        failure(&r, FailureKind::InvalidOutput),
        "program completion must be lossless JSON"
    );
}

#[tokio::test]
async fn a_deep_forged_completion_decodes_without_overflowing_the_host() {
    let r = run_guest(
        &fixture("deep_done.wat"),
        Budgets::default(),
        Arc::new(AtomicUsize::new(0)),
    )
    .await;
    let mut v = r.value.expect("a value");
    let mut depth = 0;
    while let serde_json::Value::Array(mut items) = v {
        depth += 1;
        v = if items.is_empty() {
            serde_json::Value::Null
        } else {
            items.remove(0)
        };
    }
    assert_eq!(depth, 3000);
    let deeper = fixture("deep_done.wat").replace("(i32.const 3000)", "(i32.const 20000)");
    let r = run_guest(&deeper, Budgets::default(), Arc::new(AtomicUsize::new(0))).await;
    failure(&r, FailureKind::InvalidOutput);
}

#[tokio::test]
async fn a_forged_log_flood_goes_through_the_same_cap() {
    let budgets = Budgets {
        max_output_bytes: 1_000,
        ..Budgets::default()
    };
    let r = run_guest(
        &fixture("log_flood.wat"),
        budgets,
        Arc::new(AtomicUsize::new(0)),
    )
    .await;
    assert_eq!(
        failure(&r, FailureKind::OutputLimit),
        "outer output exceeded 1000 bytes"
    );
    assert!(!r.logs.is_empty());
    assert!(r.logs.iter().all(|l| l.chars().all(|c| c == '"')));
    let total = serde_json::to_string(&r.logs).unwrap().len()
        + "\"outer output exceeded 1000 bytes\"".len();
    assert!(total <= 1_000);
}

#[tokio::test]
async fn a_guest_declared_overflow_is_honoured() {
    let budgets = Budgets {
        max_output_bytes: 500,
        ..Budgets::default()
    };
    let r = run_misc("(call $output_limit)", budgets).await;
    assert_eq!(
        failure(&r, FailureKind::OutputLimit),
        "outer output exceeded 500 bytes"
    );
}

#[tokio::test]
async fn proc_exit_is_a_worker_exit_with_its_code() {
    let r = run_misc("(call $proc_exit (i32.const 7))", Budgets::default()).await;
    assert_eq!(
        failure(&r, FailureKind::WorkerExit),
        "worker exited with code 7 before completing"
    );
    assert!(r.logs.is_empty());
}

#[tokio::test]
async fn a_spinning_guest_runs_out_of_fuel() {
    let budgets = Budgets {
        compute_ms: 100,
        ..Budgets::default()
    };
    let r = run_misc("(loop $l (br $l))", budgets).await;
    failure(&r, FailureKind::Timeout);
    assert_eq!(r.error.unwrap().cause, Some(FailureCause::Compute));
}

/// Runs `wat` with a 20 ms compute budget and checks that the budget is what stopped it.
async fn runs_out_of_fuel(wat: &str, what: &str) {
    let budgets = Budgets {
        compute_ms: 20,
        ..Budgets::default()
    };
    let r = run_guest(wat, budgets, Arc::new(AtomicUsize::new(0))).await;
    failure(&r, FailureKind::Timeout);
    assert_eq!(
        r.error.unwrap().cause,
        Some(FailureCause::Compute),
        "{what}"
    );
}

#[tokio::test]
async fn recursion_without_a_loop_runs_out_of_fuel() {
    for mode in ["direct", "indirect"] {
        runs_out_of_fuel(&fixture("recursion.wat").replace("MODE", mode), mode).await;
    }
}

#[tokio::test]
async fn recursion_without_a_loop_stops_at_its_wall_clock() {
    for mode in ["direct", "indirect"] {
        let budgets = Budgets {
            wall_ms: 100,
            ..Budgets::default()
        };
        let wat = fixture("recursion.wat").replace("MODE", mode);
        let r = run_guest(&wat, budgets, Arc::new(AtomicUsize::new(0))).await;
        let message = failure(&r, FailureKind::Timeout);
        assert!(message.contains("wall-clock"), "{mode}: {message}");
    }
}

/// A guest whose `cm_run` calls the first of 64 functions that each call the next twice: 2^64
/// calls, no loop and no cycle. Exported, each function pays for itself; not exported, each
/// would be charged to its caller; either way some of them must test the fuel.
fn call_chain(exported: bool) -> String {
    let mut wat = String::from(
        "(module (import \"codemode\" \"output_limit\" (func $output_limit)) \
         (memory (export \"memory\") 1)",
    );
    for i in 0..64 {
        let export = if exported {
            format!("(export \"f{i}\")")
        } else {
            String::new()
        };
        let body = if i == 63 {
            "(nop)".to_owned()
        } else {
            format!("(call $f{next}) (call $f{next})", next = i + 1)
        };
        wat.push_str(&format!("(func $f{i} {export} {body})"));
    }
    wat.push_str(
        "(func (export \"cm_run\") (result i32) (call $f0) (i32.const 1)) \
         (func (export \"cm_deliver\") (param i32) (result i32) (i32.const 0)))",
    );
    wat
}

#[tokio::test]
async fn a_chain_of_calls_without_a_loop_or_a_cycle_runs_out_of_fuel() {
    for exported in [true, false] {
        runs_out_of_fuel(&call_chain(exported), &format!("exported: {exported}")).await;
    }
}

#[tokio::test]
async fn a_start_function_is_metered() {
    let wat = r#"(module
        (import "codemode" "output_limit" (func $output_limit))
        (memory (export "memory") 1)
        (func $spin (loop (br 0)))
        (start $spin)
        (func (export "cm_run") (result i32) (i32.const 1))
        (func (export "cm_deliver") (param i32) (result i32) (i32.const 0)))"#;
    runs_out_of_fuel(wat, "a start function").await;
}

#[tokio::test]
async fn bulk_memory_is_charged_by_the_byte() {
    let fuel = |bytes: u32| async move {
        let wat = fixture("misc.wat").replace(
            "MODE",
            &format!("(memory.fill (i32.const 0) (i32.const 7) (i32.const {bytes}))"),
        );
        let rt = guest(&wat, Budgets::default());
        let (r, _) = rt
            .run_measured(codemode_runtime::code::RunRequest {
                program: "return 1".into(),
                ..Default::default()
            })
            .await
            .expect("run resolves");
        r.compute_fuel.expect("fuel reported")
    };
    assert_eq!(fuel(65_536).await - fuel(0).await, 65_536);
}

#[tokio::test]
async fn a_guest_that_waits_with_nothing_pending_cannot_settle() {
    let r = run_misc("", Budgets::default()).await;
    let message = failure(&r, FailureKind::Exception);
    assert!(message.contains("can never settle"), "{message}");
}

#[tokio::test]
async fn a_guest_that_finishes_without_an_outcome_is_a_worker_exit() {
    let r = run_misc("(return (i32.const 0))", Budgets::default()).await;
    failure(&r, FailureKind::WorkerExit);
    let r = run_guest(
        &fixture("no_memory.wat"),
        Budgets::default(),
        Arc::new(AtomicUsize::new(0)),
    )
    .await;
    failure(&r, FailureKind::WorkerExit);
}

#[tokio::test]
async fn traps_are_typed_failures_and_never_panics() {
    let r = run_misc("(unreachable)", Budgets::default()).await;
    failure(&r, FailureKind::WorkerExit);
    assert_eq!(r.error.unwrap().cause, Some(FailureCause::Trap));
    let r = run_misc(
        "(drop (i32.load (i32.const 0xfffffff0)))",
        Budgets::default(),
    )
    .await;
    failure(&r, FailureKind::WorkerExit);
}

#[tokio::test]
async fn unbounded_memory_growth_hits_the_memory_limit() {
    let budgets = Budgets {
        memory_mb: 16,
        ..Budgets::default()
    };
    let r = run_misc(
        "(loop $l (drop (memory.grow (i32.const 16))) (br $l))",
        budgets,
    )
    .await;
    let message = failure(&r, FailureKind::WorkerExit);
    assert!(message.contains("memory limit"), "{message}");
    assert_eq!(r.error.unwrap().cause, Some(FailureCause::Memory));
}

#[tokio::test]
async fn timers_fire_once_and_cancelled_ones_never() {
    let r = run_guest(
        &fixture("timers.wat"),
        Budgets::default(),
        Arc::new(AtomicUsize::new(0)),
    )
    .await;
    assert_eq!(value(&r), json!(2));
}

#[tokio::test]
async fn a_guest_without_the_entry_points_is_refused_cleanly() {
    let rt = guest(
        "(module (memory (export \"memory\") 1))",
        Budgets::default(),
    );
    let r = run_on(&rt, "return 1", vec![], None).await;
    failure(&r, FailureKind::WorkerExit);
}

#[tokio::test]
async fn nothing_of_one_run_is_visible_in_the_next() {
    let rt = guest(&fixture("leave_garbage.wat"), Budgets::default());
    for _ in 0..3 {
        let r = run_on(&rt, "return 1", vec![], None).await;
        assert_eq!(
            value(&r),
            json!(1),
            "a run saw the previous run's global or memory"
        );
    }
}

#[tokio::test]
async fn a_flood_of_refused_calls_is_bounded_in_count_and_in_what_each_record_keeps() {
    let wat = fixture("flood.wat").replace(
        "MODE",
        "(drop (call $call (local.get $id) (i32.const 0) (i32.const 8202)))",
    );
    let r = run_guest(&wat, Budgets::default(), Arc::new(AtomicUsize::new(0))).await;
    let message = failure(&r, FailureKind::Exception);
    assert_eq!(
        message,
        "the program made more than 100000 tool calls in one run"
    );
    assert_eq!(r.calls.len(), 100_000);
    assert!(r
        .calls
        .iter()
        .all(|c| c.global.len() <= 131 && c.name.len() <= 131));
    assert!(r.calls.iter().all(|c| c.outcome == CallOutcome::Rejected));
}

#[tokio::test]
async fn randomness_the_host_makes_is_paid_for_from_the_compute_budget() {
    let wat = fixture("flood.wat").replace(
        "MODE",
        "(drop (call $random_get (i32.const 65536) (i32.const 1048576)))",
    );
    let budgets = Budgets {
        compute_ms: 50,
        ..Budgets::default()
    };
    let r = run_guest(&wat, budgets, Arc::new(AtomicUsize::new(0))).await;
    let error = r.error.expect("a failure");
    assert_eq!(error.kind, FailureKind::Timeout);
    assert_eq!(error.cause, Some(FailureCause::Compute));
}

//! Budgets and containment: compute, wall clock, memory, output. Kinds are asserted, never
//! durations: limits are generous and only the outcome matters.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use codemode_e2e::*;
use codemode_host::{Budgets, FUEL_PER_MS};
use codemode_runtime::code::{FailureCause, FailureKind};
use codemode_runtime::signal::AbortSignal;

fn budgets(f: impl FnOnce(&mut Budgets)) -> Budgets {
    let mut b = Budgets::default();
    f(&mut b);
    b
}

#[tokio::test]
async fn a_hot_loop_exhausts_the_compute_budget() {
    let rt = runtime_with(budgets(|b| b.compute_ms = 200));
    let r = run_on(&rt, "console.log('started'); while (true) {}", vec![], None).await;
    assert_eq!(
        failure(&r, FailureKind::Timeout),
        format!(
            "compute budget exhausted (200ms busy, {} fuel)",
            200 * FUEL_PER_MS
        )
    );
    assert_eq!(r.error.unwrap().cause, Some(FailureCause::Compute));
    assert_eq!(
        r.logs,
        vec!["started"],
        "a killed run still returns what it printed"
    );
}

#[tokio::test]
async fn a_hot_loop_is_stopped_even_behind_a_pending_call() {
    let rt = runtime_with(budgets(|b| b.compute_ms = 200));
    let ns = tools(vec![("decoy", slow(60_000, json!(null)))]);
    let r = run_on(&rt, "tools.decoy({}); while (true) {}", vec![ns], None).await;
    let message = failure(&r, FailureKind::Timeout);
    assert!(message.contains("compute budget"), "{message}");
}

#[tokio::test]
async fn waiting_on_a_slow_binding_is_not_charged() {
    let rt = runtime_with(budgets(|b| b.compute_ms = 300));
    let ns = tools(vec![("slow", slow(1_000, json!("done")))]);
    let r = run_on(&rt, "return await tools.slow({});", vec![ns], None).await;
    assert_eq!(value(&r), json!("done"));
}

#[tokio::test]
async fn an_idle_program_hits_the_wall_clock() {
    let rt = runtime_with(budgets(|b| b.wall_ms = 300));
    let r = run_on(
        &rt,
        "await new Promise(r => setTimeout(r, 3_600_000)); return 1;",
        vec![],
        None,
    )
    .await;
    assert_eq!(
        failure(&r, FailureKind::Timeout),
        "wall-clock ceiling reached (300ms)"
    );
    assert_eq!(r.error.unwrap().cause, Some(FailureCause::Wall));
}

#[tokio::test]
async fn a_hot_loop_hits_the_wall_clock_before_a_huge_compute_budget() {
    let rt = runtime_with(budgets(|b| {
        b.wall_ms = 300;
        b.compute_ms = 3_600_000;
    }));
    let r = run_on(&rt, "for (;;) {}", vec![], None).await;
    assert_eq!(
        failure(&r, FailureKind::Timeout),
        "wall-clock ceiling reached (300ms)"
    );
}

/// Fuel charges bulk memory operations by the byte, so a loop that copies large blocks still
/// yields often, and the wall clock checked at each yield stops it.
#[tokio::test]
async fn a_loop_of_large_copies_hits_the_wall_clock() {
    let rt = runtime_with(budgets(|b| {
        b.wall_ms = 300;
        b.compute_ms = 3_600_000;
    }));
    let program = "let s = 'x'.repeat(1 << 24); let n = 0; for (;;) { n += (s + 'y').length; }";
    let r = run_on(&rt, program, vec![], None).await;
    assert_eq!(
        failure(&r, FailureKind::Timeout),
        "wall-clock ceiling reached (300ms)"
    );
}

/// An abort reaches a program that never waits: it is checked whenever fuel makes it yield.
/// The abort comes once the program has called `started` (not awaited): from then on it can
/// only be in its loop, so only the check at a fuel yield can stop it.
#[tokio::test]
async fn an_abort_stops_a_hot_loop() {
    let rt = runtime_with(budgets(|b| b.compute_ms = 3_600_000));
    let controller = codemode_runtime::signal::AbortController::new();
    let signal = controller.signal();
    let (marker, mut started) = start_marker();
    let run = {
        let rt = rt.clone();
        let ns = tools(vec![("started", marker)]);
        tokio::spawn(async move {
            run_on(
                &rt,
                "tools.started({}); for (;;) {}",
                vec![ns],
                Some(signal),
            )
            .await
        })
    };
    started.wait().await;
    controller.abort("stop spinning");
    let r = run.await.expect("the run's task");
    assert_eq!(failure(&r, FailureKind::Abort), "stop spinning");
}

/// An abort reaches a run that makes no call at all, which keeps its thread a slice at a time
/// (`EXECUTOR_SLICE`) and checks its signal at every fuel yield in between.
#[tokio::test]
async fn an_abort_reaches_a_run_that_only_computes() {
    let rt = runtime_with(budgets(|b| b.compute_ms = 3_600_000));
    let controller = codemode_runtime::signal::AbortController::new();
    let signal = controller.signal();
    let run = {
        let rt = rt.clone();
        tokio::spawn(async move { run_on(&rt, "for (;;) {}", vec![], Some(signal)).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    controller.abort("stop computing");
    let r = run.await.expect("the run's task");
    assert_eq!(failure(&r, FailureKind::Abort), "stop computing");
}

/// A loop of host calls stops at the wall clock and at an abort (checked at each call that
/// charges fuel as well as at fuel yields), not at the call limit it would reach later.
#[tokio::test]
async fn a_loop_of_host_calls_hits_the_wall_clock() {
    let rt = runtime_with(budgets(|b| {
        b.wall_ms = 100;
        b.compute_ms = 3_600_000;
    }));
    let ns = tools(vec![("echo", echo())]);
    let r = run_on(&rt, "for (;;) { tools.echo({}); }", vec![ns], None).await;
    assert_eq!(
        failure(&r, FailureKind::Timeout),
        "wall-clock ceiling reached (100ms)"
    );
}

/// A computing run keeps its thread a slice at a time (`EXECUTOR_SLICE`), not for the whole
/// computation: another task on the same current-thread runtime still gets its turns.
#[tokio::test]
async fn a_computing_run_shares_its_thread() {
    let rt = runtime_with(budgets(|b| b.compute_ms = 3_600_000));
    let done = Arc::new(AtomicBool::new(false));
    let turns = {
        let done = done.clone();
        tokio::spawn(async move {
            let mut turns = 0u32;
            while !done.load(Ordering::SeqCst) {
                turns += 1;
                tokio::task::yield_now().await;
            }
            turns
        })
    };
    let r = run_on(
        &rt,
        "let s = 0; for (let i = 0; i < 3e6; i++) s += i % 7; return s;",
        vec![],
        None,
    )
    .await;
    done.store(true, Ordering::SeqCst);
    assert_eq!(value(&r), json!(8999994));
    // About one turn per 2 ms of a computation that takes a fifth of a second or more; a run
    // that kept the thread throughout would leave it one or two.
    let turns = turns.await.expect("the other task");
    assert!(turns >= 10, "the other task had {turns} turns");
}

/// The abort comes once the loop has made its first call.
#[tokio::test]
async fn an_abort_stops_a_loop_of_host_calls() {
    let rt = runtime_with(budgets(|b| b.compute_ms = 3_600_000));
    let controller = codemode_runtime::signal::AbortController::new();
    let signal = controller.signal();
    let (announcing_echo, mut started) = announced(echo());
    let run = {
        let rt = rt.clone();
        let ns = tools(vec![("echo", announcing_echo)]);
        tokio::spawn(async move {
            run_on(&rt, "for (;;) { tools.echo({}); }", vec![ns], Some(signal)).await
        })
    };
    started.wait().await;
    controller.abort("stop calling");
    let r = run.await.expect("the run's task");
    assert_eq!(failure(&r, FailureKind::Abort), "stop calling");
}

#[tokio::test]
async fn running_out_of_memory_is_a_worker_exit_and_the_host_carries_on() {
    let rt = runtime_with(budgets(|b| b.memory_mb = 32));
    let r = run_on(
        &rt,
        "const keep: string[] = []; for (let i = 0; ; i++) keep.push('x'.repeat(1 << 20) + i);",
        vec![],
        None,
    )
    .await;
    let message = failure(&r, FailureKind::WorkerExit);
    assert!(message.contains("memory"), "{message}");
    assert_eq!(r.error.unwrap().cause, Some(FailureCause::Memory));
    let next = run_on(&rt, "return 'still fine';", vec![], None).await;
    assert_eq!(value(&next), json!("still fine"));
}

#[tokio::test]
async fn failures_before_the_sandbox_still_fit_the_output_cap() {
    let rt = runtime_with(budgets(|b| b.max_output_bytes = 64));
    let long = "r".repeat(1_000);
    let r = run_on(
        &rt,
        "return 1",
        vec![],
        Some(AbortSignal::aborted_with(&long)),
    )
    .await;
    assert_eq!(
        failure(&r, FailureKind::OutputLimit),
        "outer output exceeded 64 bytes"
    );
    assert!(r.logs.is_empty());
    let tiny = runtime_with(budgets(|b| b.max_output_bytes = 4));
    let r = run_on(&tiny, "enum E { A }", vec![], None).await;
    let message = failure(&r, FailureKind::OutputLimit);
    assert!(
        message.len() <= 2,
        "a message that cannot fit is cut: {message:?}"
    );
}

#[tokio::test]
async fn runaway_logs_keep_a_bounded_prefix() {
    let rt = runtime_with(budgets(|b| b.max_output_bytes = 1_000));
    let r = run_on(
        &rt,
        "for (let i = 0; ; i++) console.log('line ' + i);",
        vec![],
        None,
    )
    .await;
    assert_eq!(
        failure(&r, FailureKind::OutputLimit),
        "outer output exceeded 1000 bytes"
    );
    assert!(!r.logs.is_empty());
    assert_eq!(r.logs[0], "line 0");
    let total = serde_json::to_string(&r.logs).unwrap().len()
        + serde_json::to_string(&r.error.unwrap().message)
            .unwrap()
            .len();
    assert!(total <= 1_000, "{total}");
}

#[tokio::test]
async fn one_oversized_first_log_keeps_an_escaped_prefix() {
    let rt = runtime_with(budgets(|b| b.max_output_bytes = 100));
    let r = run_on(&rt, r#"console.log('😀"\\\n'.repeat(100));"#, vec![], None).await;
    failure(&r, FailureKind::OutputLimit);
    assert_eq!(r.logs.len(), 1);
    let kept = &r.logs[0];
    assert!(!kept.is_empty());
    assert!("😀\"\\\n".repeat(100).starts_with(kept.as_str()));
    let total = serde_json::to_string(&r.logs).unwrap().len()
        + serde_json::to_string(&r.error.unwrap().message)
            .unwrap()
            .len();
    assert!(total <= 100);
}

#[tokio::test]
async fn an_oversized_return_is_an_output_limit_without_substitute() {
    let rt = runtime_with(budgets(|b| b.max_output_bytes = 100));
    let r = run_on(&rt, "return 'x'.repeat(1000);", vec![], None).await;
    assert_eq!(
        failure(&r, FailureKind::OutputLimit),
        "outer output exceeded 100 bytes"
    );
}

#[tokio::test]
async fn a_giant_error_message_becomes_the_fixed_diagnostic() {
    let rt = runtime_with(budgets(|b| b.max_output_bytes = 64));
    let r = run_on(&rt, "throw new Error('e'.repeat(1_000_000));", vec![], None).await;
    assert_eq!(
        failure(&r, FailureKind::OutputLimit),
        "outer output exceeded 64 bytes"
    );
}

#[tokio::test]
async fn the_ledger_is_exact_at_the_boundaries() {
    for (max, ok) in [(7, true), (6, false)] {
        let r = run_on(
            &runtime_with(budgets(|b| b.max_output_bytes = max)),
            "return '€';",
            vec![],
            None,
        )
        .await;
        assert_eq!(r.error.is_none(), ok, "€ at {max}: {r:?}");
    }
    for (max, ok) in [(11, true), (10, false)] {
        let rt = runtime_with(budgets(|b| b.max_output_bytes = max));
        let r = run_on(&rt, "console.log('abc'); return 'xy';", vec![], None).await;
        assert_eq!(r.error.is_none(), ok, "log+return at {max}: {r:?}");
        let r = run_on(&rt, "console.log('abc'); throw 'xy';", vec![], None).await;
        let kind = r.error.as_ref().map(|e| e.kind);
        let expected = if ok {
            FailureKind::Exception
        } else {
            FailureKind::OutputLimit
        };
        assert_eq!(kind, Some(expected), "log+throw at {max}: {r:?}");
    }
}

#[tokio::test]
async fn the_default_cap_passes_at_its_exact_boundary_and_fails_one_byte_over() {
    let rt = runtime();
    // Built from 1 MiB pieces: Boa's `repeat` holds one slice handle per repetition.
    let r = run_on(
        &rt,
        "return 'x'.repeat(1 << 20).repeat(64).slice(0, 67108860);",
        vec![],
        None,
    )
    .await;
    assert_eq!(
        r.value.as_ref().and_then(|v| v.as_str()).map(str::len),
        Some(67_108_860),
        "{:?}",
        r.error
    );
    let r = run_on(
        &rt,
        "return 'x'.repeat(1 << 20).repeat(64).slice(0, 67108861);",
        vec![],
        None,
    )
    .await;
    assert_eq!(
        failure(&r, FailureKind::OutputLimit),
        "outer output exceeded 67108864 bytes"
    );
}

#[tokio::test]
async fn binding_arguments_and_resolutions_never_enter_the_ledger() {
    let rt = runtime_with(budgets(|b| b.max_output_bytes = 20));
    let r = run_on(
        &rt,
        "const v = await tools.echo({ big: 'z'.repeat(100000) }); return v.big.length;",
        vec![tools(vec![("echo", echo())])],
        None,
    )
    .await;
    assert_eq!(value(&r), json!(100000));
}

#[tokio::test]
async fn a_resolution_landing_after_the_run_settled_is_dropped() {
    let finished = Arc::new(AtomicUsize::new(0));
    let f = finished.clone();
    let ns = tools(vec![(
        "late",
        codemode_runtime::code::binding(move |_, _| {
            let f = f.clone();
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                f.fetch_add(1, Ordering::SeqCst);
                Ok(json!("late"))
            }
        }),
    )]);
    let r = run_on(
        &runtime(),
        "tools.late({}); return 'early';",
        vec![ns],
        None,
    )
    .await;
    assert_eq!(value(&r), json!("early"));
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the run waited for its started call"
    );
    assert_eq!(
        r.calls[0].outcome,
        codemode_runtime::code::CallOutcome::Abandoned
    );
}

/// `#[tokio::test]` runs on one thread: the hot loop must yield to the runtime (fuel yields),
/// or the short run could not finish before the loop's budget ends it.
#[tokio::test]
async fn a_hot_loop_does_not_starve_another_run_on_the_same_thread() {
    let rt = runtime_with(budgets(|b| b.compute_ms = 3_000));
    let hot = run_on(&rt, "while (true) {}", vec![], None);
    let short = run_on(
        &rt,
        "await new Promise(r => setTimeout(r, 10)); return 'done';",
        vec![],
        None,
    );
    tokio::pin!(hot, short);
    tokio::select! {
        biased;
        r = &mut short => {
            assert_eq!(value(&r), json!("done"));
            let r = hot.await;
            assert!(failure(&r, FailureKind::Timeout).starts_with("compute budget exhausted (3000ms busy, "));
        }
        _ = &mut hot => panic!("the hot loop finished first: it starved the other run"),
    }
}

//! How `run_code` schedules a program's calls: overlap of concurrency-safe tools, the
//! parallel cap, exclusive barriers, commit order, and what happens to queued and running calls
//! when the run ends or is aborted.

use super::*;

#[tokio::test]
async fn concurrency_safe_calls_overlap_and_start_in_submission_order() {
    let probe = Arc::new(Probe::default());
    let mut cm = CodeMode::new();
    cm.add(probed("safe", probe.clone(), 60, true));
    let result = cm
        .run("return (await Promise.all([tools.safe({}), tools.safe({}), tools.safe({})])).length;")
        .await;
    assert_eq!(result.value().unwrap()["result"], json!(3));
    assert_eq!(probe.peak(), 3);
    assert_eq!(
        cm.events.summary()[1..4],
        [
            "start call-1:code:1",
            "start call-1:code:2",
            "start call-1:code:3"
        ]
    );
}

#[tokio::test]
async fn the_parallel_cap_holds() {
    let probe = Arc::new(Probe::default());
    let mut cm = CodeMode::with(
        RunCodeConfig::default().max_parallel_sub_calls(2),
        Budgets::default(),
    );
    cm.add(probed("safe", probe.clone(), 40, true));
    cm.run("await Promise.all(Array.from({ length: 6 }, () => tools.safe({})));")
        .await;
    assert_eq!(probe.peak(), 2);
    assert_eq!(probe.log().len(), 12);
}

#[tokio::test]
async fn exclusive_calls_run_alone_and_in_order() {
    let probe = Arc::new(Probe::default());
    let mut cm = CodeMode::new();
    cm.add(probed("safe", probe.clone(), 40, true));
    cm.add(probed("a", probe.clone(), 20, false));
    cm.add(probed("b", probe.clone(), 20, false));
    cm.add(probed("c", probe.clone(), 20, false));
    cm.run("await Promise.all([tools.safe({}), tools.a({}), tools.b({}), tools.safe({}), tools.c({})]);")
        .await;
    assert_eq!(
        probe.log(),
        vec![
            "enter safe",
            "exit safe",
            "enter a",
            "exit a",
            "enter b",
            "exit b",
            "enter safe",
            "exit safe",
            "enter c",
            "exit c",
        ]
    );
}

#[tokio::test]
async fn pre_execute_stages_never_overlap() {
    let probe = Arc::new(Probe::default());
    let mut cm = CodeMode::new();
    cm.add(probed("safe", Arc::new(Probe::default()), 1, true));
    let hook_probe = probe.clone();
    cm.keep(cm.registry.on_pre_execute(move |call, next| {
        let probe = hook_probe.clone();
        async move {
            if call.parent().is_some() {
                probe.note(format!("pre-enter {}", call.call_id()));
                tokio::time::sleep(Duration::from_millis(20)).await;
                probe.note(format!("pre-exit {}", call.call_id()));
            }
            next.run().await
        }
    }));
    cm.run("await Promise.all([tools.safe({}), tools.safe({})]);")
        .await;
    assert_eq!(
        probe.log(),
        vec![
            "pre-enter call-1:code:1",
            "pre-exit call-1:code:1",
            "pre-enter call-1:code:2",
            "pre-exit call-1:code:2",
        ]
    );
}

#[tokio::test]
async fn an_exclusive_barrier_is_held_through_post_execute_and_commits_follow_submission_order() {
    let probe = Arc::new(Probe::default());
    let mut cm = CodeMode::new();
    cm.add(probed("slow_safe", probe.clone(), 60, true));
    cm.add(probed("quick_safe", probe.clone(), 1, true));
    cm.add(probed("x", probe.clone(), 1, false));
    let hook_probe = probe.clone();
    cm.keep(cm.registry.on_post_execute(move |call, _result, next| {
        let probe = hook_probe.clone();
        async move {
            if call.parent().is_some() {
                probe.note(format!("post {}", call.name()));
                if call.name() == "x" {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    probe.note("post x done");
                }
            }
            next.run().await
        }
    }));
    cm.run("await Promise.all([tools.slow_safe({}), tools.quick_safe({}), tools.x({}), tools.quick_safe({})]);")
        .await;
    let log = probe.log();
    let at = |entry: &str| log.iter().position(|e| e == entry).unwrap();
    // quick_safe finished first but commits after slow_safe.
    assert!(at("exit quick_safe") < at("exit slow_safe"), "{log:?}");
    assert!(at("post slow_safe") < at("post quick_safe"), "{log:?}");
    // x waits for the pool to drain and the next call waits for x's post-execute.
    let second_quick = log.iter().rposition(|e| e == "enter quick_safe").unwrap();
    assert!(at("enter x") > at("exit slow_safe"), "{log:?}");
    assert!(second_quick > at("post x done"), "{log:?}");
}

#[tokio::test]
async fn classification_is_read_when_a_call_starts() {
    let probe = Arc::new(Probe::default());
    let mut cm = CodeMode::new();
    let safe = Arc::new(AtomicBool::new(true));
    let flip = safe.clone();
    let reader = safe.clone();
    cm.add(
        codemode_runtime::tools::ToolDefinitionBuilder::from(probed(
            "flaky",
            probe.clone(),
            30,
            false,
        ))
        .concurrency_safe(move |_| reader.load(Ordering::SeqCst))
        .build(),
    );
    cm.add(tool("flip", move |_, _| {
        flip.store(false, Ordering::SeqCst);
        async { Ok(json!(null)) }
    }));
    cm.run("await tools.flip({}); await Promise.all([tools.flaky({}), tools.flaky({})]);")
        .await;
    assert_eq!(probe.peak(), 1, "{:?}", probe.log());
    assert!(!safe.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_tool_unregistered_while_its_call_is_queued_is_an_unknown_tool() {
    let mut cm = CodeMode::new();
    let ephemeral = cm
        .registry
        .register(tool("ephemeral", |_, _| async { Ok(json!("ran")) }), None)
        .unwrap();
    let slot = Arc::new(Mutex::new(Some(ephemeral)));
    let remover = slot.clone();
    cm.add(tool("remove", move |_, _| {
        let remover = remover.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(remover.lock().unwrap().take());
            Ok(json!(null))
        }
    }));
    let result = cm
        .run("const p = tools.remove({}); try { await tools.ephemeral({}); return 'ran'; } catch (e) { await p; return e.message; }")
        .await;
    assert_eq!(
        result.value().unwrap()["result"],
        json!("unknown tool \"ephemeral\"")
    );
}

#[tokio::test]
async fn calls_still_queued_when_the_run_ends_are_abandoned_without_events() {
    let probe = Arc::new(Probe::default());
    let mut cm = CodeMode::new();
    cm.add(probed("slow", probe.clone(), 2_000, false));
    cm.add(echo());
    let result = cm
        .run("tools.slow({}); tools.echo({}); await new Promise(r => setTimeout(r, 50)); return 'early';")
        .await;
    assert_eq!(result.value().unwrap()["result"], json!("early"));
    assert_eq!(
        cm.events.summary(),
        vec![
            "tool/call call-1",
            "start call-1:code:1",
            "settle call-1:code:1 error",
            "tool/result call-1",
        ]
    );
    let report = cm.report();
    assert_eq!(report.sub_calls.len(), 2);
    assert!(report
        .sub_calls
        .iter()
        .all(|c| c.outcome == CallOutcome::Abandoned));
    // The running call saw its signal and stopped well before its two seconds.
    assert_eq!(probe.log(), vec!["enter slow", "exit slow"]);
}

#[tokio::test]
async fn a_commit_in_progress_when_the_run_ends_is_drained_and_logged_as_aborted() {
    let mut cm = CodeMode::new();
    cm.add(echo());
    let post_done = Arc::new(AtomicBool::new(false));
    let flag = post_done.clone();
    cm.keep(cm.registry.on_post_execute(move |call, _result, next| {
        let flag = flag.clone();
        async move {
            if call.parent().is_some() {
                tokio::time::sleep(Duration::from_millis(150)).await;
                flag.store(true, Ordering::SeqCst);
            }
            next.run().await
        }
    }));
    let result = cm
        .run("tools.echo({}); await new Promise(r => setTimeout(r, 30)); return 1;")
        .await;
    assert_eq!(result.value().unwrap()["result"], json!(1));
    assert!(
        post_done.load(Ordering::SeqCst),
        "run_code returned before the commit"
    );
    assert!(cm
        .events
        .summary()
        .contains(&"settle call-1:code:1 error".to_owned()));
}

#[tokio::test]
async fn an_outer_abort_aborts_the_running_call_and_abandons_the_queued_one() {
    let probe = Arc::new(Probe::default());
    let mut cm = CodeMode::new();
    cm.add(probed("slow", probe.clone(), 5_000, false));
    cm.add(echo());
    let controller = AbortController::new();
    let input = cm.input(
        "await Promise.all([tools.slow({}), tools.echo({})]);",
        controller.signal(),
    );
    let call = cm.registry.execute(input);
    tokio::pin!(call);
    // The abort comes once the slow call is running (and the echo queued behind it).
    tokio::select! {
        _ = &mut call => panic!("finished before the abort"),
        () = probe.noted("enter slow") => controller.abort("user-cancel"),
    }
    let result = call.await;
    assert!(result.is_error());
    assert_eq!(result.text(), "Error: code run failed (abort): user-cancel");
    let report = cm.report();
    assert_eq!(
        report
            .sub_calls
            .iter()
            .map(|c| c.outcome)
            .collect::<Vec<_>>(),
        vec![CallOutcome::Abandoned, CallOutcome::Abandoned]
    );
    assert_eq!(probe.log(), vec!["enter slow", "exit slow"]);
    assert_eq!(
        cm.events.summary(),
        vec![
            "tool/call call-1",
            "start call-1:code:1",
            "settle call-1:code:1 error",
            "tool/result call-1",
        ]
    );
}

#[tokio::test]
async fn a_pre_aborted_call_never_reaches_the_runtime() {
    let cm = CodeMode::new();
    let result = cm
        .registry
        .execute(cm.input("return 1", AbortSignal::aborted_with("too-late")))
        .await;
    assert_eq!(result.error_code(), Some("ABORTED_BEFORE_DISPATCH"));
    assert_eq!(result.text(), "Error: tool call aborted before dispatch");
    assert!(cm.reports.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_body_that_ignores_its_signal_is_detached_after_the_grace_and_nothing_hangs() {
    let mut cm = CodeMode::with(
        RunCodeConfig::default().settle_grace(Duration::from_millis(100)),
        Budgets {
            compute_ms: 200,
            ..Budgets::default()
        },
    );
    cm.add(tool("stubborn", |_, _| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(json!("late"))
    }));
    let started = std::time::Instant::now();
    let result = cm.run("tools.stubborn({}); for (;;) {}").await;
    // Its stubborn call sleeps for 30 s: run_code returns long before.
    assert!(started.elapsed() < Duration::from_secs(20), "run_code hung");
    assert_eq!(
        result.text(),
        format!(
            "Error: code run failed (timeout): compute budget exhausted (200ms busy, {} fuel)",
            200 * codemode_host::FUEL_PER_MS
        )
    );
    assert!(cm
        .events
        .summary()
        .contains(&"settle call-1:code:1 error".to_owned()));
    assert_eq!(cm.report().sub_calls[0].outcome, CallOutcome::Abandoned);
}

#[tokio::test]
async fn a_call_started_before_a_busy_loop_makes_progress_during_it() {
    let mut cm = CodeMode::new();
    let finished_at = Arc::new(Mutex::new(None));
    let stamp = finished_at.clone();
    cm.add(
        codemode_runtime::tools::ToolDefinitionBuilder::from(tool("quick", move |_, _| {
            let stamp = stamp.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                *stamp.lock().unwrap() = Some(std::time::SystemTime::now());
                Ok(json!("done"))
            }
        }))
        .concurrency_safe(|_| true)
        .build(),
    );
    let result = cm
        .run("const p = tools.quick({}); const t = Date.now(); while (Date.now() - t < 3000) {} const end = Date.now(); return [await p, end];")
        .await;
    let returned = &result.value().unwrap()["result"];
    assert_eq!(returned[0], json!("done"));
    let finished = finished_at.lock().unwrap().expect("the tool ran");
    let finished_ms = finished
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    // Without progress during the loop the tool would only start once the loop had ended.
    assert!(
        finished_ms <= returned[1].as_f64().unwrap(),
        "the call waited for the busy loop: it finished at {finished_ms}, the loop ended at {}",
        returned[1]
    );
}

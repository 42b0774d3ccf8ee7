//! Admission by memory (`WasmCodeRuntime::limit_memory`): the memory budgets of the runs in
//! progress add up to at most the cap; a run that does not fit waits for others to end, and
//! one that cannot start within its wall budget fails as a timeout.

use std::sync::{Arc, Mutex};

use codemode_e2e::*;
use codemode_host::Budgets;
use codemode_runtime::code::{binding, BindingFn, FailureCause, FailureKind};
use tokio::sync::{mpsc, oneshot};

fn budgets(memory_mb: u64, wall_ms: u64) -> Budgets {
    Budgets {
        memory_mb,
        wall_ms,
        ..Budgets::default()
    }
}

/// A binding that reports its call on `started` and then waits for `release` (its run's stop
/// signal is ignored when `stubborn`).
fn hold(
    started: mpsc::UnboundedSender<()>,
    release: Arc<Mutex<Option<oneshot::Receiver<()>>>>,
    stubborn: bool,
) -> BindingFn {
    binding(move |_, signal| {
        let _ = started.send(());
        let release = release.lock().unwrap().take();
        async move {
            let Some(release) = release else {
                return Ok(json!("no hold"));
            };
            if stubborn {
                let _ = release.await;
                return Ok(json!("released"));
            }
            tokio::select! {
                _ = release => Ok(json!("released")),
                reason = signal.aborted() => Err(reason),
            }
        }
    })
}

/// A binding that appends `name` to `log` when called.
fn mark(log: Arc<Mutex<Vec<&'static str>>>, name: &'static str) -> BindingFn {
    binding(move |_, _| {
        log.lock().unwrap().push(name);
        async move { Ok(json!(name)) }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_cap_waits_for_one_to_end() {
    // Two 64 MiB budgets do not fit under 100 MiB.
    let rt = runtime_with(budgets(64, 60_000))
        .with_memory_cap(100)
        .expect("a cap above the budget");
    assert_eq!(rt.memory_cap(), Some((100, 0)));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (release_tx, release_rx) = oneshot::channel();
    let release = Arc::new(Mutex::new(Some(release_rx)));

    let first = {
        let rt = rt.clone();
        let namespace = tools(vec![
            ("hold", hold(started_tx, release, false)),
            ("mark", mark(log.clone(), "first ends")),
        ]);
        tokio::spawn(async move {
            run_on(
                &rt,
                "const r = await tools.hold({}); await tools.mark({}); return r;",
                vec![namespace],
                None,
            )
            .await
        })
    };
    started.recv().await.expect("the first run starts");
    assert_eq!(
        rt.memory_cap(),
        Some((100, 64)),
        "the first run holds its budget"
    );

    let second = {
        let rt = rt.clone();
        let namespace = tools(vec![("mark", mark(log.clone(), "second starts"))]);
        tokio::spawn(async move {
            run_on(&rt, "return await tools.mark({});", vec![namespace], None).await
        })
    };
    // Were the second run admitted, it would call `mark` within this time; it must not.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        log.lock().unwrap().is_empty(),
        "the second run started early"
    );
    assert_eq!(rt.live_runs(), 2, "the second run waits, counted as live");

    release_tx
        .send(())
        .expect("the first run waits for its release");
    assert_eq!(value(&first.await.expect("first run")), json!("released"));
    assert_eq!(
        value(&second.await.expect("second run")),
        json!("second starts")
    );
    assert_eq!(*log.lock().unwrap(), vec!["first ends", "second starts"]);
    assert_eq!(rt.memory_cap(), Some((100, 0)), "every share is given back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_cannot_start_within_its_wall_budget_times_out() {
    // One 64 MiB run at a time. The first run's binding ignores its stop signal, so the first
    // run holds its share a grace past its wall budget: past the second run's wall budget too.
    let rt = runtime_with(budgets(64, 1_000))
        .with_memory_cap(64)
        .expect("a cap of one run");
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (release_tx, release_rx) = oneshot::channel();
    let release = Arc::new(Mutex::new(Some(release_rx)));
    let first = {
        let rt = rt.clone();
        let namespace = tools(vec![("hold", hold(started_tx, release, true))]);
        tokio::spawn(async move {
            run_on(&rt, "return await tools.hold({});", vec![namespace], None).await
        })
    };
    started.recv().await.expect("the first run starts");

    let log = Arc::new(Mutex::new(Vec::new()));
    let second = run_on(
        &rt,
        "return await tools.mark({});",
        vec![tools(vec![("mark", mark(log.clone(), "second starts"))])],
        None,
    )
    .await;
    let message = failure(&second, FailureKind::Timeout);
    assert!(
        message.starts_with("wall-clock ceiling reached (1000ms) while waiting to start")
            && message.contains("64 MiB"),
        "{message}"
    );
    assert_eq!(
        second.error.as_ref().and_then(|e| e.cause),
        Some(FailureCause::Wall)
    );
    assert!(
        log.lock().unwrap().is_empty(),
        "the second run never started"
    );

    let _ = release_tx.send(());
    let first = first.await.expect("first run");
    failure(&first, FailureKind::Timeout);
    assert_eq!(rt.memory_cap(), Some((64, 0)));
}

#[test]
fn a_cap_below_one_runs_budget_is_refused() {
    let rt = runtime_with(budgets(256, 1_000));
    let error = rt.limit_memory(128).expect_err("no run could ever start");
    assert_eq!(
        error.to_string(),
        "codemode: config.maxMemoryMb must be at least the memory budget of one run (256 MiB), got 128"
    );
    assert_eq!(rt.memory_cap(), None, "a refused cap leaves none");
    rt.limit_memory(256).expect("one run's budget is enough");
    assert_eq!(rt.memory_cap(), Some((256, 0)));
}

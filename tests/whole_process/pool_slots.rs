//! The pool's slots: runs past them wait for one, within their wall budget.

use codemode_e2e::*;
use codemode_runtime::code::FailureKind;

use super::ALONE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_concurrent_runs_than_pool_slots_wait_for_a_slot() {
    let _alone = ALONE.lock().await;
    // Twice the pool: without waiting, every run past the 256th would fail to instantiate.
    let runs = 2 * 256;
    let rt = runtime();
    let started = std::time::Instant::now();
    let mut handles = Vec::new();
    for i in 0..runs {
        let rt = rt.clone();
        handles.push(tokio::spawn(async move {
            run_on(
                &rt,
                &format!("await tools.nap({{}}); return {i};"),
                vec![tools(vec![("nap", slow(100, json!(null)))])],
                None,
            )
            .await
        }));
    }
    for (i, handle) in handles.into_iter().enumerate() {
        let r = handle.await.unwrap();
        assert_eq!(value(&r), json!(i), "{r:?}");
    }
    eprintln!(
        "{runs} runs of 100 ms on 256 slots: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_run_waiting_for_a_slot_still_honours_its_wall_budget() {
    let _alone = ALONE.lock().await;
    let holder = runtime();
    let (release, released) = tokio::sync::watch::channel(false);
    let hold = codemode_runtime::code::binding(move |_, _| {
        let mut released = released.clone();
        async move {
            let _ = released.wait_for(|go| *go).await;
            Ok(json!(null))
        }
    });
    // One binding shared by every holder, so its announcements count them all.
    let (hold, mut holding) = announced(hold);
    let mut holders = Vec::new();
    for _ in 0..256 {
        let rt = holder.clone();
        let hold = hold.clone();
        holders.push(tokio::spawn(async move {
            run_on(
                &rt,
                "await tools.hold({});",
                vec![tools(vec![("hold", hold)])],
                None,
            )
            .await
        }));
    }
    drop(hold);
    // Every holder has made its call, so every one holds its slot, before the late run asks
    // for one.
    tokio::time::timeout(std::time::Duration::from_secs(120), holding.wait_for(256))
        .await
        .expect("every holder reaches its call");
    assert_eq!(holder.live_runs(), 256);
    let late = runtime_with(codemode_host::Budgets {
        wall_ms: 100,
        ..codemode_host::Budgets::default()
    });
    let r = run_on(&late, "return 1", vec![], None).await;
    assert_eq!(
        failure(&r, FailureKind::Timeout),
        "wall-clock ceiling reached (100ms)"
    );
    release.send_replace(true);
    for h in holders {
        let r = h.await.unwrap();
        assert!(r.error.is_none(), "{r:?}");
    }
}

//! Soak and storm: thousands of runs in one process with resident memory checked flat, and
//! hundreds of concurrent runs with random aborts and a `dispose()` in the middle, each ending
//! with exactly one outcome and nothing left running.

use std::time::Duration;

use codemode_e2e::*;
use codemode_host::Budgets;
use codemode_runtime::code::{CodeRuntime, FailureKind, RunRejection, RunRequest};
use codemode_runtime::signal::AbortController;

/// The two tests measure the process: one at a time.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A small deterministic generator, so a failure can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

const PROGRAMS: [&str; 5] = [
    "return 1",
    "let s = 0; for (let i = 0; i < 100; i++) s += (await tools.echo({ i })).i; return s;",
    "console.log('x'.repeat(100)); throw new Error('planned');",
    "const a = []; for (let i = 0; i < 10000; i++) a.push({ i }); return a.length;",
    "return await Promise.all([1, 2, 3].map((n) => tools.slow({ n })));",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_runs_leave_resident_memory_flat() {
    let _alone = ALONE.lock().await;
    let rt = runtime();
    let bindings = || {
        vec![tools(vec![
            ("echo", echo()),
            ("slow", slow(1, json!(null))),
        ])]
    };
    let mut rounds = Vec::new();
    for round in 0..4 {
        let mut handles = Vec::new();
        for i in 0..1_000 {
            let rt = rt.clone();
            let bindings = bindings();
            handles.push(tokio::spawn(async move {
                run_on(&rt, PROGRAMS[i % PROGRAMS.len()], bindings, None).await
            }));
        }
        for handle in handles {
            let result = handle.await.unwrap();
            assert!(result.value.is_some() || result.error.is_some() || result.logs.is_empty());
        }
        rounds.push(resident_mib());
        assert_eq!(rt.live_runs(), 0, "round {round} left runs behind");
    }
    // The first round warms the pool and the allocator; after it, memory stays put.
    let growth = rounds[3] - rounds[1];
    assert!(
        growth < 48.0,
        "resident memory grew {growth:.1} MiB over 2,000 runs: {rounds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_aborted_runs_and_a_dispose_end_with_one_outcome_each() {
    let _alone = ALONE.lock().await;
    let rt = runtime_with(Budgets {
        wall_ms: 20_000,
        ..Budgets::default()
    });
    let mut rng = Lcg(0x5eed);
    let mut handles = Vec::new();
    for i in 0..400 {
        let rt = rt.clone();
        let controller = AbortController::new();
        let signal = controller.signal();
        let program = match rng.next(4) {
            0 => "for (;;) {}",
            1 => "await tools.slow({});",
            2 => "await new Promise((r) => setTimeout(r, 50)); return 2;",
            _ => PROGRAMS[i % PROGRAMS.len()],
        };
        let abort_after = rng.next(3) == 0;
        let delay = Duration::from_millis(rng.next(200));
        handles.push(tokio::spawn(async move {
            let request = RunRequest {
                program: program.into(),
                bindings: vec![tools(vec![
                    ("echo", echo()),
                    ("slow", slow(300, json!(null))),
                ])],
                signal: Some(signal),
                ..Default::default()
            };
            let run = rt.run(request);
            tokio::pin!(run);
            if abort_after {
                tokio::select! {
                    outcome = &mut run => return outcome,
                    () = tokio::time::sleep(delay) => controller.abort("storm"),
                }
            }
            run.await
        }));
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    rt.dispose().await;
    assert_eq!(rt.live_runs(), 0, "dispose waited for every run");
    let mut aborted = 0;
    for handle in handles {
        match handle.await.unwrap() {
            Ok(result) => {
                // One outcome: a value (or nothing returned) with no error, or an error alone.
                assert!(!(result.value.is_some() && result.error.is_some()));
                if let Some(error) = &result.error {
                    if error.kind == FailureKind::Abort {
                        aborted += 1;
                    }
                }
            }
            Err(rejection) => assert_eq!(rejection, RunRejection::Disposed),
        }
    }
    assert!(aborted > 0, "some runs were aborted or disposed");
    let late = rt
        .run(RunRequest {
            program: "return 1".into(),
            bindings: vec![],
            signal: None,
            ..Default::default()
        })
        .await;
    assert_eq!(late.unwrap_err(), RunRejection::Disposed);
}

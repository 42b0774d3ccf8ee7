//! Soak and storm: thousands of runs in one process, each with its exact outcome, with resident
//! memory checked flat; and hundreds of concurrent runs with random aborts and a `dispose()` in
//! the middle, each ending with exactly one of the outcomes it may have and nothing left
//! running.

use std::time::{Duration, Instant};

use codemode_e2e::*;
use codemode_host::Budgets;
use codemode_runtime::code::{CodeRuntime, RunRejection, RunRequest, RunResult};
use codemode_runtime::signal::AbortController;
use serde_json::Value;

use super::ALONE;

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

/// What a run ended with, in a form one `assert_eq!` compares: its value (`null` for none) or
/// its failure's kind and message, and its logs.
fn outcome(result: &RunResult) -> Value {
    assert!(
        result.value.is_none() || result.error.is_none(),
        "one outcome, not a value and an error: {result:?}"
    );
    match &result.error {
        Some(error) => json!({
            "error": error.kind.as_str(),
            "message": error.message,
            "logs": result.logs,
        }),
        None => json!({
            "value": result.value.clone().unwrap_or(Value::Null),
            "logs": result.logs,
        }),
    }
}

/// The outcome `PROGRAMS[n]` always has (its `slow` tool resolves with `null`).
fn expected(n: usize) -> Value {
    match n {
        0 => json!({"value": 1, "logs": []}),
        1 => json!({"value": 4950, "logs": []}),
        2 => json!({
            "error": "exception",
            "message": "Error: planned",
            "logs": ["x".repeat(100)],
        }),
        3 => json!({"value": 10000, "logs": []}),
        4 => json!({"value": [null, null, null], "logs": []}),
        _ => unreachable!("five programs"),
    }
}

/// Whether `outcome` is an abort for `reason`, with no logs but what the run it stopped would
/// have printed first.
fn aborted_for(outcome: &Value, reason: &str, natural: Option<&Value>) -> bool {
    if outcome["error"] != "abort" || outcome["message"] != reason {
        return false;
    }
    let printed = outcome["logs"].as_array().expect("logs");
    let would = natural.and_then(|n| n["logs"].as_array());
    assert!(
        printed.is_empty() || would.is_some_and(|w| w.starts_with(printed)),
        "logs the run would not have printed: {outcome}"
    );
    true
}

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
        for (i, handle) in handles.into_iter().enumerate() {
            let result = handle.await.unwrap();
            assert_eq!(
                outcome(&result),
                expected(i % PROGRAMS.len()),
                "round {round}, run {i}: {result:?}"
            );
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

/// Each run is one of four programs, aborted after a random delay or not. The dispose comes
/// in the middle of the storm, at 150 ms at the earliest, and certainly there: once every run
/// has begun (the busy workers take a while to reach the last of 400 tasks), once a hot loop
/// nothing else will stop has announced itself from inside its run, and once a random abort has
/// stopped a run (the aborts' timers wait for busy workers too, and could all come late).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_aborted_runs_and_a_dispose_end_with_one_outcome_each() {
    let _alone = ALONE.lock().await;
    let rt = runtime_with(Budgets {
        wall_ms: 20_000,
        ..Budgets::default()
    });
    let (marker, mut spinning) = start_marker();
    let (stormed, mut storm_landed) = tokio::sync::mpsc::unbounded_channel();
    let (begun, mut runs_begun) = tokio::sync::watch::channel(0usize);
    let storm = Instant::now();
    let mut rng = Lcg(0x5eed);
    let mut runs = Vec::new();
    for i in 0..400 {
        let rt = rt.clone();
        let controller = AbortController::new();
        let signal = controller.signal();
        let abort_after = rng.next(3) == 0;
        // The outcome the program reaches when nothing stops it; a hot loop never does.
        let (program, natural) = match rng.next(4) {
            0 => ("tools.started({}); for (;;) {}", None),
            1 => (
                "await tools.slow({});",
                Some(json!({"value": null, "logs": []})),
            ),
            2 => (
                "await new Promise((r) => setTimeout(r, 50)); return 2;",
                Some(json!({"value": 2, "logs": []})),
            ),
            _ => (
                PROGRAMS[i % PROGRAMS.len()],
                Some(expected(i % PROGRAMS.len())),
            ),
        };
        // Only the loops no abort of their own will stop announce themselves.
        let started = if abort_after { echo() } else { marker.clone() };
        let delay = Duration::from_millis(rng.next(200));
        let stormed = stormed.clone();
        let begun = begun.clone();
        let handle = tokio::spawn(async move {
            let request = RunRequest {
                program: program.into(),
                bindings: vec![tools(vec![
                    ("echo", echo()),
                    ("slow", slow(300, json!(null))),
                    ("started", started),
                ])],
                signal: Some(signal),
                ..Default::default()
            };
            let run = rt.run(request);
            tokio::pin!(run);
            // Polled once, the run has begun: admitted, or waiting for a slot.
            let first = futures::poll!(&mut run);
            begun.send_modify(|n| *n += 1);
            if let std::task::Poll::Ready(outcome) = first {
                return outcome;
            }
            if !abort_after {
                return run.await;
            }
            tokio::select! {
                outcome = &mut run => return outcome,
                () = tokio::time::sleep(delay) => controller.abort("storm"),
            }
            let outcome = run.await;
            if outcome
                .as_ref()
                .is_ok_and(|r| r.error.as_ref().is_some_and(|e| e.message == "storm"))
            {
                let _ = stormed.send(());
            }
            outcome
        });
        runs.push((i, program, natural, abort_after, handle));
    }
    let loops = |aborted: bool| {
        runs.iter()
            .filter(|(_, _, natural, abort_after, _)| natural.is_none() && *abort_after == aborted)
            .count()
    };
    assert!(
        loops(false) > 0 && loops(true) > 0,
        "the seed gives the storm loops only the dispose stops and loops only an abort stops"
    );
    drop((marker, stormed, begun));
    tokio::time::timeout(Duration::from_secs(60), runs_begun.wait_for(|n| *n == 400))
        .await
        .expect("every run begins")
        .expect("the runs' tasks count themselves");
    tokio::time::timeout(Duration::from_secs(60), spinning.wait())
        .await
        .expect("a loop only the dispose stops is running");
    tokio::time::timeout(Duration::from_secs(60), storm_landed.recv())
        .await
        .expect("a random abort stops a run")
        .expect("a run aborted by the storm");
    tokio::time::sleep_until((storm + Duration::from_millis(150)).into()).await;
    rt.dispose().await;
    assert_eq!(rt.live_runs(), 0, "dispose waited for every run");
    let (mut natural_ends, mut aborted, mut disposed) = (0, 0, 0);
    for (i, program, natural, abort_after, handle) in runs {
        match handle.await.unwrap() {
            Ok(result) => {
                let outcome = outcome(&result);
                if aborted_for(&outcome, "runtime disposed", natural.as_ref()) {
                    disposed += 1;
                } else if abort_after && aborted_for(&outcome, "storm", natural.as_ref()) {
                    aborted += 1;
                } else {
                    assert_eq!(
                        Some(&outcome),
                        natural.as_ref(),
                        "run {i} ({program:?}, aborted: {abort_after}): {result:?}"
                    );
                    natural_ends += 1;
                }
            }
            // Every run began before the dispose: none is refused.
            Err(rejection) => panic!("run {i} ({program:?}): {rejection}"),
        }
    }
    eprintln!(
        "400 runs: {natural_ends} ended by themselves, {aborted} by their abort, \
         {disposed} by the dispose"
    );
    assert!(
        aborted > 0 && disposed > 0,
        "aborts and the dispose both stopped runs"
    );
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

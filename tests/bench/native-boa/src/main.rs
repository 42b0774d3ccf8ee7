//! Native Boa peer: prints one JSON object with the workloads that make sense without a sandbox.
//!
//! Usage: codemode-bench-native-boa [--runs N]

use std::time::{Duration, Instant};

use boa_engine::builtins::promise::PromiseState;
use boa_engine::{Context, Source};
use serde_json::{json, Value};

const COMPUTE_BODY: &str = include_str!("../../../../fixtures/workloads/compute.js");
const COMPUTE_EXPECTED: f64 = 899_397.0;
const CALLS_BODY: &str = include_str!("../../../../fixtures/workloads/calls.js");
const CALLS_EXPECTED: f64 = 609_129_731.0;
const LOOP_BODY: &str = include_str!("../../../../fixtures/workloads/loop.js");
/// `fixtures/workloads/idiomatic.ts` with its types erased.
const IDIOMATIC_BODY: &str = include_str!("../../../../fixtures/workloads/idiomatic.js");
const IDIOMATIC_EXPECTED: f64 = 987_523.0;
const LOOP_EXPECTED: f64 = 8_999_997.0;

/// Every peer wraps a program body the same way, so that `return` and `await` are legal at its top.
fn wrap(body: &str) -> String {
    format!("(async function () {{\"use strict\";\n{body}\n}})()")
}

/// One fresh `Context` from creation to drop, the same span a sandboxed run covers: its time
/// and its value, which must hold `expected` where `check_at` points (`""`: the value itself).
fn fresh_run(source: &str, check_at: &str, expected: f64) -> Result<(Duration, Value), String> {
    let started = Instant::now();
    let value = {
        let mut context = Context::default();
        let value = context
            .eval(Source::from_bytes(source.as_bytes()))
            .map_err(|e| e.to_string())?;
        context.run_jobs().map_err(|e| e.to_string())?;
        let promise = value
            .as_promise()
            .ok_or("the wrapped program did not return a promise")?;
        match promise.state() {
            PromiseState::Fulfilled(v) => v
                .to_json(&mut context)
                .map_err(|e| e.to_string())?
                .unwrap_or(Value::Null),
            PromiseState::Rejected(e) => return Err(format!("rejected: {}", e.display())),
            PromiseState::Pending => return Err("still pending after run_jobs".into()),
        }
    };
    let elapsed = started.elapsed();
    if value.pointer(check_at).and_then(Value::as_f64) != Some(expected) {
        return Err(format!("unexpected result {value}"));
    }
    Ok((elapsed, value))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn parse_runs() -> Result<usize, String> {
    let mut args = std::env::args().skip(1);
    let mut runs = 200;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                runs = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or("--runs needs a positive integer")?;
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(runs)
}

fn measure(runs: usize) -> Result<Value, String> {
    let trivial = wrap("return 1");
    fresh_run(&trivial, "", 1.0)?;
    let mut times = (0..runs)
        .map(|_| fresh_run(&trivial, "", 1.0).map(|(time, _)| time))
        .collect::<Result<Vec<_>, _>>()?;
    times.sort();

    // The run with the median time of `samples` fresh runs of a workload: ms and value.
    let workload = |body: &str, check_at: &str, expected: f64, samples: usize| {
        let source = wrap(body);
        let mut runs = (0..samples)
            .map(|_| fresh_run(&source, check_at, expected))
            .collect::<Result<Vec<_>, String>>()?;
        runs.sort_by_key(|(time, _)| *time);
        let (time, value) = runs.swap_remove(runs.len() / 2);
        Ok::<_, String>((time.as_secs_f64() * 1e3, value))
    };
    let (calls_ms, calls) = workload(CALLS_BODY, "/check", CALLS_EXPECTED, 3)?;
    let (idiomatic_ms, idiomatic) = workload(IDIOMATIC_BODY, "/check", IDIOMATIC_EXPECTED, 3)?;

    Ok(json!({
        "peer": "boa-native",
        "runs": runs,
        "fresh_run_p50_us": percentile(&times, 0.5).as_secs_f64() * 1e6,
        "fresh_run_p99_us": percentile(&times, 0.99).as_secs_f64() * 1e6,
        "sub_call_us": null,
        "parallel_10x100ms_ms": null,
        "runs_per_sec": null,
        "rss_per_instance_mib": null,
        "kill_latency_ms": null,
        "compute_ms": workload(COMPUTE_BODY, "", COMPUTE_EXPECTED, 5)?.0,
        "calls_ms": calls_ms,
        "calls": {"total_ms": calls_ms, "phases_ms": calls.get("phases"), "check": calls.get("check")},
        "loop_ms": workload(LOOP_BODY, "", LOOP_EXPECTED, 3)?.0,
        "idiomatic_ms": idiomatic_ms,
        "idiomatic": {"total_ms": idiomatic_ms, "phases_ms": idiomatic.get("phases"), "check": idiomatic.get("check")},
        "notes": "Boa 0.22.0 compiled natively (release, same features as the guest), a new Context per run \
                  with the default job executor. No host bindings, no sandbox and no interruption: \
                  the host-call, parallel-sleep, throughput, memory and kill workloads would measure \
                  an embedding that does not exist here, so they are null. Its role is the compute \
                  baseline: what Boa costs without wasm.",
    }))
}

fn main() -> std::process::ExitCode {
    match parse_runs().and_then(measure) {
        Ok(report) => {
            println!("{report}");
            std::process::ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("native-boa: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

//! `codemode bench`: the design's standard workloads, in process, as a table or one JSON object.
//!
//! Every number is measured in this process on this machine; nothing is estimated.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use codemode_host::{
    builtins, Budgets, Interruption, RunMetrics, WasmCodeRuntime, FUEL_PER_MS, GUEST_WASM,
    PYTHON_GUEST_WASM,
};
use codemode_runtime::code::{
    binding, BindingFn, BindingNamespace, CodeRuntime, ErrorClass, RunRequest,
};
use codemode_runtime::run_code::{self, RunCodeConfig};
use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::{
    AgentScope, PostDecision, PreDecision, RegistrationGuard, Registry, ToolExecutionInput,
    ToolMode, RUN_CODE_NAME,
};
use codemode_sdk_gen::Language;
use serde_json::{json, Value};

use super::{BenchArgs, EXIT_OK, EXIT_USAGE};

mod durable;
mod preflight;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn request(program: &str, bindings: Vec<BindingNamespace>) -> RunRequest {
    RunRequest {
        program: program.into(),
        bindings,
        signal: None,
        ..Default::default()
    }
}

async fn measured(
    rt: &WasmCodeRuntime,
    program: &str,
    bindings: Vec<BindingNamespace>,
) -> Result<RunMetrics, String> {
    let (result, metrics) = rt
        .run_measured(request(program, bindings))
        .await
        .map_err(|e| e.to_string())?;
    match result.error {
        None => Ok(metrics),
        Some(e) => Err(format!("bench program failed ({}): {}", e.kind, e.message)),
    }
}

fn rss_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

/// `functions` as the `tools` namespace, with `ToolCallError` / `toolName`.
fn tools_namespace(functions: BTreeMap<String, BindingFn>) -> BindingNamespace {
    BindingNamespace {
        global: "tools".into(),
        functions,
        error_class: Some(ErrorClass {
            name: "ToolCallError".into(),
            member_name_property: "toolName".into(),
        }),
    }
}

/// Raw bindings (no registry, no pipeline), to measure the bridge alone: `echo` returns its
/// arguments, `sleep {ms}` waits.
fn bridge_namespace() -> BindingNamespace {
    let mut functions = BTreeMap::new();
    functions.insert(
        "echo".to_owned(),
        binding(|args, _signal| async move { Ok(args) }),
    );
    functions.insert(
        "sleep".to_owned(),
        binding(|args, _signal| async move {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(json!({ "slept": ms }))
        }),
    );
    tools_namespace(functions)
}

/// Five hooks that decide nothing, one at every extension point a call passes.
fn no_op_hooks(registry: &Registry) -> Vec<RegistrationGuard> {
    vec![
        registry.on_pre_execute(|_call, next| async move {
            match next.run().await? {
                PreDecision::Allow => Ok(PreDecision::Allow),
                other => Ok(other),
            }
        }),
        registry.guard(None, |_call| None),
        registry.on_execute(|call, next| next.run(call.signal)),
        registry.on_post_execute(|_call, _result, next| async move {
            match next.run().await? {
                PostDecision::Accept { .. } => Ok(PostDecision::accept()),
                other => Ok(other),
            }
        }),
        registry.on_result(|_call, _result| Ok(())),
    ]
}

/// Per-call overhead of a sequential awaited `echo` through `run_code` and the whole
/// pipeline, with five no-op hooks installed: the loop with calls minus the loop without.
async fn pipeline_sub_call(
    rt: &WasmCodeRuntime,
    calls: u32,
    programs: &Programs,
) -> Result<Duration, String> {
    let registry = Registry::with_mode(ToolMode::Code);
    let _tools = builtins::register(&registry, ".").map_err(|e| e.to_string())?;
    let _hooks = no_op_hooks(&registry);
    let _run_code = run_code::install(
        &registry,
        Some(Arc::new(rt.clone())),
        RunCodeConfig::default(),
    )
    .map_err(|e| e.to_string())?;
    per_call_through_run_code(&registry, programs, &(programs.calls)(calls), calls).await
}

/// The median (of 5) per-call cost of `program`, a loop of `calls` calls through `run_code`
/// and the pipeline, less the same loop without the calls.
async fn per_call_through_run_code(
    registry: &Registry,
    programs: &Programs,
    program: &str,
    calls: u32,
) -> Result<Duration, String> {
    let agent = AgentScope::root();
    let run = |program: String| {
        let registry = registry.clone();
        let agent = agent.clone();
        async move {
            let input = ToolExecutionInput::new(
                "bench",
                RUN_CODE_NAME,
                json!({"code": program, "description": "Measure calls"}),
                AbortSignal::never(),
            )
            .agent(&agent);
            let started = Instant::now();
            let result = registry.execute(input).await;
            if result.is_error() {
                return Err(format!("bench run failed: {}", result.text()));
            }
            Ok(started.elapsed())
        }
    };
    let mut samples = Vec::new();
    for _ in 0..5 {
        let with_calls = run(program.to_owned()).await?;
        let baseline = run((programs.baseline)(calls)).await?;
        samples.push(with_calls.saturating_sub(baseline) / calls);
    }
    samples.sort();
    Ok(percentile(&samples, 0.5))
}

/// Start-to-exit cost of one `bash({ command: "true" })` through `run_code` and the pipeline on
/// `backend`: 20 sequential calls minus the same loop without them, per call (median of 5).
async fn bash_true(
    rt: &WasmCodeRuntime,
    backend: Arc<dyn codemode_exec::backend::Backend>,
    programs: &Programs,
) -> Result<Duration, String> {
    let registry = Registry::with_mode(ToolMode::Code);
    let root = std::env::temp_dir();
    let exec = codemode_exec::Exec::new(&root, backend, codemode_exec::ExecConfig::default())
        .map_err(|e| e.to_string())?;
    let _tools = codemode_exec::register(&registry, &exec).map_err(|e| e.to_string())?;
    let _run_code = run_code::install(
        &registry,
        Some(Arc::new(rt.clone())),
        RunCodeConfig::default(),
    )
    .map_err(|e| e.to_string())?;
    let cost = per_call_through_run_code(&registry, programs, programs.bash, 20).await;
    exec.shutdown().await;
    cost
}

/// A namespace whose `hold` call parks until `release` flips, to keep instances alive.
fn holding_namespace(release: Arc<AtomicBool>) -> BindingNamespace {
    let mut functions = BTreeMap::new();
    functions.insert(
        "hold".to_owned(),
        binding(move |_, signal| {
            let release = release.clone();
            async move {
                while !release.load(Ordering::SeqCst) && !signal.is_aborted() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Ok(Value::Null)
            }
        }),
    );
    tools_namespace(functions)
}

/// The programs the bench runs, in one language.
struct Programs {
    language: Language,
    /// The fresh run.
    trivial: &'static str,
    /// `n` sequential awaited echo calls.
    calls: fn(u32) -> String,
    /// The same loop without the calls.
    baseline: fn(u32) -> String,
    /// Ten 100 ms sleeps at once.
    parallel: &'static str,
    /// A loop that never ends.
    spin: &'static str,
    /// A run that waits on `tools.hold`.
    hold: &'static str,
    /// 20 sequential `bash true` calls.
    bash: &'static str,
    compute: &'static Workload,
    call_heavy: &'static Workload,
    /// Compute as a model writes it in TypeScript; no twin in Python.
    idiomatic: Option<&'static Workload>,
    /// The data workload, which reads [`data_text`] through `tools.read_file`.
    data: &'static str,
    counting: &'static Workload,
}

const TYPESCRIPT: Programs = Programs {
    language: Language::TypeScript,
    trivial: "return 1",
    calls: |n| format!("for (let i = 0; i < {n}; i++) await tools.echo({{ i }});"),
    baseline: |n| format!("for (let i = 0; i < {n}; i++) ({{ i }});"),
    parallel: "await Promise.all(Array.from({ length: 10 }, () => tools.sleep({ ms: 100 })));",
    spin: "for (;;) {}",
    hold: "await tools.hold({}); return 1;",
    bash: "for (let i = 0; i < 20; i++) await tools.bash({ command: 'true', description: 'Nothing' });",
    compute: &COMPUTE,
    call_heavy: &CALLS,
    idiomatic: Some(&IDIOMATIC),
    data: DATA_PROGRAM,
    counting: &LOOP,
};

/// The Python twins: the fresh run is `1 + 1`, as pydantic-monty's peer feeds it.
const PYTHON: Programs = Programs {
    language: Language::Python,
    trivial: "1 + 1",
    calls: |n| format!("for i in range({n}):\n    await tools.echo({{'i': i}})"),
    baseline: |n| format!("for i in range({n}):\n    {{'i': i}}"),
    parallel:
        "import asyncio\nawait asyncio.gather(*[tools.sleep({'ms': 100}) for _ in range(10)])",
    spin: "while True:\n    pass",
    hold: "await tools.hold({})\n1",
    bash:
        "for i in range(20):\n    await tools.bash({'command': 'true', 'description': 'Nothing'})",
    compute: &COMPUTE_PY,
    call_heavy: &CALLS_PY,
    idiomatic: None,
    data: include_str!("../../../../../fixtures/workloads/data.py"),
    counting: &LOOP_PY,
};

/// `fixtures/workloads/compute.js` in Python (`compute.py`).
const COMPUTE_PY: Workload = Workload {
    name: "compute (Python)",
    program: include_str!("../../../../../fixtures/workloads/compute.py"),
    check_at: "",
    result: 899_397.0,
    samples: 5,
};

/// `fixtures/workloads/calls.js` in Python (`calls.py`), for the Python guest and pydantic-monty.
const CALLS_PY: Workload = Workload {
    name: "call-heavy (Python)",
    program: include_str!("../../../../../fixtures/workloads/calls.py"),
    check_at: "/check",
    result: 609_129_731.0,
    samples: 3,
};

/// The counting loop in Python (`fixtures/workloads/loop.py`).
const LOOP_PY: Workload = Workload {
    name: "counting loop (Python)",
    program: include_str!("../../../../../fixtures/workloads/loop.py"),
    check_at: "",
    result: 8_999_997.0,
    samples: 3,
};

/// A workload shared with the peer scripts that needs no tools: a function body ending in
/// `return`, the number it must compute (its value, or the value's `check`, as `check_at`
/// points), and how many runs its median is taken over.
struct Workload {
    name: &'static str,
    program: &'static str,
    check_at: &'static str,
    result: f64,
    samples: usize,
}

const COMPUTE: Workload = Workload {
    name: "compute",
    program: include_str!("../../../../../fixtures/workloads/compute.js"),
    check_at: "",
    result: 899_397.0,
    samples: 5,
};

/// Everyday shapes that are mostly calls and constructions (`fixtures/workloads/calls.js`),
/// which times its phases and returns `{check, phases}`.
const CALLS: Workload = Workload {
    name: "call-heavy",
    program: include_str!("../../../../../fixtures/workloads/calls.js"),
    check_at: "/check",
    result: 609_129_731.0,
    samples: 3,
};

/// Compute as a model writes it in TypeScript (`fixtures/workloads/idiomatic.ts`: classes with
/// declared fields, a Map word count, a comparator sort, `??=` memoisation with for…in and
/// delete, base-36 strings), which times its phases and returns `{check, phases}`; peers run
/// its erased twin, `idiomatic.js`.
const IDIOMATIC: Workload = Workload {
    name: "idiomatic",
    program: include_str!("../../../../../fixtures/workloads/idiomatic.ts"),
    check_at: "/check",
    result: 987_523.0,
    samples: 3,
};

/// The counting loop pydantic-monty runs too, in Python (`fixtures/workloads/loop.js`).
const LOOP: Workload = Workload {
    name: "counting loop",
    program: include_str!("../../../../../fixtures/workloads/loop.js"),
    check_at: "",
    result: 8_999_997.0,
    samples: 3,
};

/// The busy time a millisecond of compute budget bought: `busy_ms` over the budget `fuel` is.
fn busy_per_budget(busy_ms: f64, fuel: u64) -> f64 {
    busy_ms / (fuel as f64 / FUEL_PER_MS as f64).max(1e-9)
}

/// One run of a workload: its time (guest start to result, without stripping), the fuel it
/// burned and its value.
async fn workload_once(
    rt: &WasmCodeRuntime,
    w: &Workload,
) -> Result<(Duration, u64, Value), String> {
    let (result, m) = rt
        .run_measured(request(w.program, vec![]))
        .await
        .map_err(|e| e.to_string())?;
    if let Some(e) = result.error {
        return Err(format!(
            "{} workload failed ({}): {}",
            w.name, e.kind, e.message
        ));
    }
    let value = result.value.unwrap_or(Value::Null);
    if value.pointer(w.check_at).and_then(Value::as_f64) != Some(w.result) {
        return Err(format!("{} workload returned {value}", w.name));
    }
    Ok((m.total.saturating_sub(m.strip), m.fuel_consumed, value))
}

fn median<T: Ord + Copy>(mut samples: Vec<T>) -> T {
    samples.sort();
    samples[samples.len() / 2]
}

/// The run with the median time of `w.samples` runs.
async fn workload_median(
    rt: &WasmCodeRuntime,
    w: &Workload,
) -> Result<(Duration, u64, Value), String> {
    let mut samples = Vec::with_capacity(w.samples);
    for _ in 0..w.samples {
        samples.push(workload_once(rt, w).await?);
    }
    samples.sort_by_key(|sample| sample.0);
    Ok(samples.swap_remove(samples.len() / 2))
}

/// The compute and data workloads under each interruption scheme, each on its own engine. The
/// schemes take turns, one run each per round, so that a slow spell of a noisy machine falls
/// on all of them rather than on whichever was being measured. Returns the compute times and
/// the data workload's totals, each keyed by scheme.
async fn interruption_study(compute: bool) -> Result<(Value, Value), String> {
    let mut runtimes = Vec::new();
    for scheme in Interruption::ALL {
        let rt = WasmCodeRuntime::with_interruption(Budgets::default(), scheme)
            .map_err(|e| e.to_string())?;
        // The first run loads or compiles this scheme's module.
        measured(&rt, "return 1", vec![]).await?;
        runtimes.push((scheme, rt, Vec::new(), Vec::new()));
    }
    let text = Arc::new(data_text(DATA_ROWS));
    for _ in 0..COMPUTE.samples {
        for (_, rt, computes, datas) in &mut runtimes {
            if compute {
                computes.push(workload_once(rt, &COMPUTE).await?.0);
            }
            datas.push(data_once(rt, DATA_PROGRAM, &text).await?.0);
        }
    }
    let (mut computes, mut datas) = (serde_json::Map::new(), serde_json::Map::new());
    for (scheme, _, compute_samples, data_samples) in runtimes {
        let key = format!("{}_ms", scheme.name());
        if compute {
            computes.insert(key.clone(), json!(ms(median(compute_samples))));
        }
        datas.insert(key, json!(ms(median(data_samples))));
    }
    let computes = if compute {
        Value::Object(computes)
    } else {
        Value::Null
    };
    Ok((computes, Value::Object(datas)))
}

/// The data workload shared with the peer scripts: it reads `data_text()` through a
/// `read_file` tool and times its phases itself.
const DATA_PROGRAM: &str = include_str!("../../../../../fixtures/workloads/data.js");
const DATA_ROWS: u64 = 50_000;

/// The data workload's tool result, byte for byte what `dataText` in
/// tests/bench/peer-common.mjs builds: MINSTD-generated rows, written as JSON.stringify would.
fn data_text(rows: u64) -> String {
    const FIRST: [&str; 20] = [
        "Ada", "Alan", "Barbara", "Claude", "Dennis", "Edsger", "Frances", "Grace", "Hedy", "Ivan",
        "John", "Ken", "Leslie", "Margaret", "Niklaus", "Ole", "Radia", "Shafi", "Tony",
        "Yukihiro",
    ];
    const LAST: [&str; 20] = [
        "Lovelace",
        "Turing",
        "Liskov",
        "Shannon",
        "Ritchie",
        "Dijkstra",
        "Allen",
        "Hopper",
        "Lamarr",
        "Sutherland",
        "McCarthy",
        "Thompson",
        "Lamport",
        "Hamilton",
        "Wirth",
        "Dahl",
        "Perlman",
        "Goldwasser",
        "Hoare",
        "Matsumoto",
    ];
    const REGIONS: [&str; 8] = [
        "north", "south", "east", "west", "central", "coastal", "highland", "island",
    ];
    const TAGS: [&str; 10] = [
        "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
    ];
    use std::fmt::Write;
    let mut seed: u64 = 20_261_201;
    let mut next = move || {
        seed = seed * 48_271 % 2_147_483_647;
        seed as usize
    };
    let mut out = String::with_capacity(rows as usize * 150);
    out.push('[');
    for id in 0..rows {
        if id > 0 {
            out.push(',');
        }
        let (first, last, region) = (FIRST[next() % 20], LAST[next() % 20], REGIONS[next() % 8]);
        let (amount, score, active) = (next() % 100_000, next() % 100, next() % 2 == 0);
        let (tag_a, tag_b) = (TAGS[next() % 10], TAGS[next() % 10]);
        let (month, day) = (1 + next() % 12, 1 + next() % 28);
        let _ = write!(
            out,
            r#"{{"id":{id},"name":"{first} {last}","region":"{region}","amount":{amount},"score":{score},"active":{active},"tags":["{tag_a}","{tag_b}"],"created":"2026-{month:02}-{day:02}"}}"#
        );
    }
    out.push(']');
    out
}

/// One run of the data workload over `text`: its whole time, the program's value and the fuel
/// it burned (under a scheme without fuel, 0).
async fn data_once(
    rt: &WasmCodeRuntime,
    program: &str,
    text: &Arc<String>,
) -> Result<(Duration, Value, u64), String> {
    let read_file: BindingFn = {
        let text = text.clone();
        codemode_runtime::code::binding(move |_, _| {
            let text = text.clone();
            async move { Ok(Value::String(String::clone(&text))) }
        })
    };
    let namespace = tools_namespace([("read_file".to_owned(), read_file)].into());
    let started = Instant::now();
    let (result, metrics) = rt
        .run_measured(request(program, vec![namespace]))
        .await
        .map_err(|e| e.to_string())?;
    let total = started.elapsed();
    if let Some(error) = result.error {
        return Err(format!("the data workload failed: {}", error.message));
    }
    let value = result.value.ok_or("the data workload returned nothing")?;
    Ok((total, value, metrics.fuel_consumed))
}

/// The data workload, three runs: the median run's total and phases, and what it computed.
async fn data_workload(rt: &WasmCodeRuntime, program: &str) -> Result<Value, String> {
    let text = Arc::new(data_text(DATA_ROWS));
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        outcomes.push(data_once(rt, program, &text).await?);
    }
    outcomes.sort_by_key(|(total, _, _)| *total);
    let (total, value, fuel) = &outcomes[1];
    Ok(json!({
        "total_ms": ms(*total),
        "fuel": fuel,
        "phases_ms": value["phases"],
        "check": value["check"],
        "input_bytes": text.len(),
    }))
}

async fn measure(args: &BenchArgs) -> Result<Value, String> {
    let p = match args.lang {
        Language::TypeScript => &TYPESCRIPT,
        Language::Python => &PYTHON,
    };
    let rt =
        WasmCodeRuntime::for_language(p.language, Budgets::default()).map_err(|e| e.to_string())?;
    if args.data_only {
        measured(&rt, p.trivial, vec![]).await?;
        let data = data_workload(&rt, p.data).await?;
        let interruption_data = if args.interruption && p.language == Language::TypeScript {
            interruption_study(false).await?.1
        } else {
            Value::Null
        };
        return Ok(json!({ "data": data, "interruption_data": interruption_data }));
    }
    let tools = || vec![bridge_namespace()];

    // Warm up: the first run pays for loading the compiled module.
    let cold = Instant::now();
    measured(&rt, p.trivial, vec![]).await?;
    let first_run = cold.elapsed();

    let mut totals = Vec::with_capacity(args.runs);
    let (mut strip, mut preflight, mut instantiate) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut fresh_fuel = 0;
    for _ in 0..args.runs.max(1) {
        let m = measured(&rt, p.trivial, vec![]).await?;
        totals.push(m.total);
        strip += m.strip;
        preflight += m.preflight;
        instantiate += m.instantiate;
        fresh_fuel = m.fuel_consumed;
    }
    totals.sort();
    let n = totals.len() as u32;
    let p50 = percentile(&totals, 0.5);
    let p99 = percentile(&totals, 0.99);
    let strip_avg = strip / n;
    let preflight_avg = preflight / n;
    let instantiate_avg = instantiate / n;
    let mean_total = totals.iter().sum::<Duration>() / n;
    let eval_avg = mean_total.saturating_sub(strip_avg + preflight_avg + instantiate_avg);

    // Per-call overhead: 1,000 sequential awaited echo calls, minus an empty run.
    let calls = 1_000u32;
    let loop_program = (p.calls)(calls);
    let mut per_call = Vec::new();
    for _ in 0..5 {
        let with_calls = measured(&rt, &loop_program, tools()).await?.total;
        let baseline = measured(&rt, &(p.baseline)(calls), tools()).await?.total;
        per_call.push(with_calls.saturating_sub(baseline) / calls);
    }
    per_call.sort();
    let sub_call = percentile(&per_call, 0.5);
    let pipeline_call = pipeline_sub_call(&rt, calls, p).await?;

    // Ten concurrency-safe sleeps of 100 ms under Promise.all.
    let parallel = measured(&rt, p.parallel, tools()).await?.total;

    // The compute-heavy workload every peer runs too (fixtures/workloads/compute.js).
    let (compute, compute_fuel, _) = workload_median(&rt, p.compute).await?;
    let fuel_per_ms = compute_fuel as f64 / ms(compute).max(1e-9);
    let (call_heavy, call_heavy_fuel, call_heavy_value) =
        workload_median(&rt, p.call_heavy).await?;
    let (counting, counting_fuel, _) = workload_median(&rt, p.counting).await?;
    let idiomatic = match p.idiomatic {
        Some(w) => Some(workload_median(&rt, w).await?),
        None => None,
    };

    // Throughput: trivial runs on every worker thread for one second.
    let window = Duration::from_secs(1);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        * 2;
    let started = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..workers {
        let rt = rt.clone();
        let trivial = p.trivial;
        handles.push(tokio::spawn(async move {
            let mut done = 0u64;
            while started.elapsed() < window {
                if rt.run(request(trivial, vec![])).await.is_ok() {
                    done += 1;
                }
            }
            done
        }));
    }
    let mut runs = 0u64;
    for h in handles {
        runs += h.await.unwrap_or(0);
    }
    let runs_per_sec = runs as f64 / started.elapsed().as_secs_f64();

    // Kill latency past a wall-clock budget on a hot loop.
    let wall_rt = WasmCodeRuntime::for_language(
        p.language,
        Budgets {
            wall_ms: 100,
            compute_ms: 3_600_000,
            ..Budgets::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let mut kills = Vec::new();
    for _ in 0..5 {
        let (_, m) = wall_rt
            .run_measured(request(p.spin, vec![]))
            .await
            .map_err(|e| e.to_string())?;
        kills.push(m.total.saturating_sub(Duration::from_millis(100)));
    }
    kills.sort();
    let kill_latency = percentile(&kills, 0.5);

    // Resident memory per live instance, 100 alive at once.
    let release = Arc::new(AtomicBool::new(false));
    // VmRSS also counts every page of the cached module file each instance maps, and how many
    // pages one read fault maps depends on the folios that file has in the page cache (a file
    // just written maps fewer than one read back later), so the same binary measures
    // differently from run to run. RssAnon, the pages instances wrote and the host's own heap,
    // does not depend on it.
    let before = rss_kib("VmRSS:").unwrap_or(0);
    let before_private = rss_kib("RssAnon:").unwrap_or(0);
    let mut alive = Vec::new();
    for _ in 0..100 {
        let rt = rt.clone();
        let ns = holding_namespace(release.clone());
        let hold = p.hold;
        alive.push(tokio::spawn(async move {
            rt.run(request(hold, vec![ns])).await
        }));
    }
    while rt.live_runs() < 100 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let during = rss_kib("VmRSS:").unwrap_or(0);
    let during_private = rss_kib("RssAnon:").unwrap_or(0);
    release.store(true, Ordering::SeqCst);
    for h in alive {
        let _ = h.await;
    }
    let rss_per_instance_mib = during.saturating_sub(before) as f64 / 1024.0 / 100.0;
    let private_per_instance_mib =
        during_private.saturating_sub(before_private) as f64 / 1024.0 / 100.0;

    // The execution tools: `bash true` on each backend (the sandbox only where the kernel
    // can enforce it).
    let bash_local = bash_true(&rt, Arc::new(codemode_exec::backend::Local), p).await?;
    let bash_sandbox = match codemode_exec::sandbox::Sandbox::new(&std::env::temp_dir()) {
        Ok(sandbox) => Some(bash_true(&rt, Arc::new(sandbox), p).await?),
        Err(_) => None,
    };

    // The studies that have only a TypeScript form are measured with TypeScript programs.
    let typescript = p.language == Language::TypeScript;
    let durable = if typescript {
        durable::study().await?
    } else {
        Value::Null
    };
    let preflight = if typescript {
        preflight::measure()?
    } else {
        Value::Null
    };
    let data = data_workload(&rt, p.data).await?;
    let (interruption, interruption_data) = if args.interruption && typescript {
        interruption_study(true).await?
    } else {
        (Value::Null, Value::Null)
    };

    Ok(json!({
        "language": p.language.name(),
        "fresh_run_program": p.trivial,
        "fresh_run_p50_us": us(p50),
        "fresh_run_p99_us": us(p99),
        "fresh_run_split_us": {
            "strip": us(strip_avg),
            "preflight": us(preflight_avg),
            "instantiate": us(instantiate_avg),
            "eval": us(eval_avg),
        },
        "fresh_run_fuel": fresh_fuel,
        "preflight": preflight,
        "first_run_ms": ms(first_run),
        "module_from_disk_cache": codemode_host::module_from_disk_cache(),
        "sub_call_us": us(sub_call),
        "pipeline_sub_call_us": us(pipeline_call),
        "parallel_10x100ms_ms": ms(parallel),
        "runs_per_sec": runs_per_sec,
        "rss_per_instance_mib": rss_per_instance_mib,
        "private_per_instance_mib": private_per_instance_mib,
        "kill_latency_ms": ms(kill_latency),
        "bash_true_ms": {
            "local": ms(bash_local),
            "sandbox": bash_sandbox.map(ms),
        },
        "fuel_per_ms": fuel_per_ms,
        "durable": durable,
        "data": data,
        "compute_ms": ms(compute),
        "calls_ms": ms(call_heavy),
        "calls": {
            "total_ms": ms(call_heavy),
            "phases_ms": call_heavy_value.get("phases"),
            "fuel": call_heavy_fuel,
            "check": call_heavy_value.get("check"),
        },
        "loop_ms": ms(counting),
        "loop_fuel": counting_fuel,
        "idiomatic_ms": idiomatic.as_ref().map(|(time, _, _)| ms(*time)),
        "idiomatic": idiomatic.as_ref().map(|(time, fuel, value)| json!({
            "total_ms": ms(*time),
            "phases_ms": value.get("phases"),
            "fuel": fuel,
            "check": value.get("check"),
        })),
        "interruption": interruption,
        "interruption_data": interruption_data,
        "fuel_per_ms_configured": FUEL_PER_MS,
        // Busy milliseconds per millisecond of `--compute-ms`, workload by workload: how close
        // the budget's calibration (FUEL_PER_MS and the meter's pricing) is on this machine.
        "busy_per_budget_ms": {
            "compute": busy_per_budget(ms(compute), compute_fuel),
            "calls": busy_per_budget(ms(call_heavy), call_heavy_fuel),
            "loop": busy_per_budget(ms(counting), counting_fuel),
            "data": data.get("total_ms").and_then(Value::as_f64).zip(data.get("fuel").and_then(Value::as_u64))
                .map(|(busy, fuel)| busy_per_budget(busy, fuel)),
        },
        "guest_module_bytes": match p.language {
            Language::TypeScript => GUEST_WASM.len(),
            Language::Python => PYTHON_GUEST_WASM.len(),
        },
        "peak_rss_mib": rss_kib("VmHWM:").unwrap_or(0) as f64 / 1024.0,
        "runs": args.runs,
        // Measured while spans were exported over OTLP (`OTEL_EXPORTER_OTLP_ENDPOINT`).
        "traces_exported": super::telemetry::exporting(),
    }))
}

pub async fn bench(args: BenchArgs) -> u8 {
    // Measured on a runtime worker, as an embedding host's request handler would run, not on
    // the thread blocked in `block_on` (every wake-up of which is a cross-thread unpark).
    let (interruption, runs, data_only, lang) =
        (args.interruption, args.runs, args.data_only, args.lang);
    let measured = tokio::spawn(async move {
        measure(&BenchArgs {
            json: true,
            interruption,
            runs,
            data_only,
            lang,
        })
        .await
    })
    .await
    .unwrap_or_else(|e| Err(format!("the measuring task failed: {e}")));
    let report = match measured {
        Ok(report) => report,
        Err(message) => {
            eprintln!("codemode bench: {message}");
            return EXIT_USAGE;
        }
    };
    if args.json {
        println!("{report}");
        return EXIT_OK;
    }
    // (label, key, unit, design target): `Some((bound, true))` is an upper bound, `false` a
    // lower one.
    let rows = [
        (
            "fresh run `return 1`, p50",
            "fresh_run_p50_us",
            "µs",
            Some((300.0, true)),
        ),
        ("fresh run `return 1`, p99", "fresh_run_p99_us", "µs", None),
        ("first run (module load)", "first_run_ms", "ms", None),
        (
            "sequential echo sub-call",
            "sub_call_us",
            "µs",
            Some((15.0, true)),
        ),
        (
            "echo sub-call through run_code",
            "pipeline_sub_call_us",
            "µs",
            Some((30.0, true)),
        ),
        (
            "10 × sleep 100 ms, Promise.all",
            "parallel_10x100ms_ms",
            "ms",
            Some((105.0, true)),
        ),
        (
            "trivial runs per second",
            "runs_per_sec",
            "/s",
            Some((4000.0, false)),
        ),
        (
            "resident memory per live instance",
            "rss_per_instance_mib",
            "MiB",
            Some((2.0, true)),
        ),
        (
            "  of which private (anonymous)",
            "private_per_instance_mib",
            "MiB",
            None,
        ),
        (
            "kill latency past a wall budget",
            "kill_latency_ms",
            "ms",
            Some((5.0, true)),
        ),
        (
            "preflight checks, 200 lines",
            "/preflight/check_us",
            "µs",
            Some((preflight::BUDGET_US, true)),
        ),
        (
            "  stripping it (the parse the checks share)",
            "/preflight/strip_us",
            "µs",
            None,
        ),
        ("compute workload", "compute_ms", "ms", None),
        ("call-heavy workload", "calls_ms", "ms", None),
        (
            "  class instances",
            "/calls/phases_ms/construct",
            "ms",
            None,
        ),
        (
            "  function constructors, closures",
            "/calls/phases_ms/closures",
            "ms",
            None,
        ),
        (
            "  Map, Set, sort",
            "/calls/phases_ms/collections",
            "ms",
            None,
        ),
        ("  strings, for…in", "/calls/phases_ms/strings", "ms", None),
        (
            "  memoised recursion",
            "/calls/phases_ms/recursion",
            "ms",
            None,
        ),
        ("  fuel burned", "/calls/fuel", "", None),
        ("counting loop", "loop_ms", "ms", None),
        (
            "idiomatic TypeScript workload",
            "/idiomatic/total_ms",
            "ms",
            None,
        ),
        (
            "  classes with declared fields",
            "/idiomatic/phases_ms/classes",
            "ms",
            None,
        ),
        (
            "  base-36 strings",
            "/idiomatic/phases_ms/strings",
            "ms",
            None,
        ),
        (
            "  Map word count",
            "/idiomatic/phases_ms/wordCount",
            "ms",
            None,
        ),
        ("  comparator sort", "/idiomatic/phases_ms/sort", "ms", None),
        (
            "  ??= memo, for…in, delete",
            "/idiomatic/phases_ms/memo",
            "ms",
            None,
        ),
        (
            "data workload (7 MB, 50k rows)",
            "/data/total_ms",
            "ms",
            None,
        ),
        ("  reply transfer", "/data/phases_ms/transfer", "ms", None),
        ("  JSON.parse", "/data/phases_ms/parse", "ms", None),
        (
            "  for…of aggregate",
            "/data/phases_ms/aggregate",
            "ms",
            None,
        ),
        (
            "  filter + sort + slice",
            "/data/phases_ms/filterSort",
            "ms",
            None,
        ),
        (
            "  JSON.stringify projection",
            "/data/phases_ms/stringify",
            "ms",
            None,
        ),
        ("  fuel burned", "/data/fuel", "", None),
        (
            "pause a small run (write record)",
            "/durable/small/pause_ms",
            "ms",
            None,
        ),
        ("resume a small run", "/durable/small/resume_ms", "ms", None),
        (
            "record of a small run",
            "/durable/small/record_bytes",
            "bytes",
            None,
        ),
        (
            "pause a run holding 10 MB",
            "/durable/live_10mb/pause_ms",
            "ms",
            None,
        ),
        (
            "resume a run holding 10 MB",
            "/durable/live_10mb/resume_ms",
            "ms",
            None,
        ),
        (
            "record of a run holding 10 MB",
            "/durable/live_10mb/record_bytes",
            "bytes",
            None,
        ),
        (
            "pause, 10 MB of random strings",
            "/durable/live_10mb_random/pause_ms",
            "ms",
            None,
        ),
        (
            "resume, 10 MB of random strings",
            "/durable/live_10mb_random/resume_ms",
            "ms",
            None,
        ),
        (
            "record, 10 MB of random strings",
            "/durable/live_10mb_random/record_bytes",
            "bytes",
            None,
        ),
        ("fuel per ms of compute", "fuel_per_ms", "", None),
        (
            "busy ms per ms of budget: compute",
            "/busy_per_budget_ms/compute",
            "",
            None,
        ),
        ("  calls", "/busy_per_budget_ms/calls", "", None),
        ("  loop", "/busy_per_budget_ms/loop", "", None),
        ("  data", "/busy_per_budget_ms/data", "", None),
        (
            "  configured (FUEL_PER_MS)",
            "fuel_per_ms_configured",
            "",
            None,
        ),
        ("guest module", "guest_module_bytes", "bytes", None),
        ("peak RSS", "peak_rss_mib", "MiB", None),
    ];
    println!(
        "{:<36} {:>14} {:<6} {:>10}  {:>8}",
        "workload", "measured", "", "target", "ratio"
    );
    for (label, key, unit, target) in rows {
        // Nested figures are named by JSON pointer.
        let v = if key.starts_with('/') {
            report.pointer(key)
        } else {
            report.get(key)
        };
        // `--data-only` measures a part of the table.
        let Some(v) = v else { continue };
        let v = v.as_f64().unwrap_or(f64::NAN);
        match target {
            Some((bound, upper)) => {
                let (sign, met) = if upper {
                    ("≤", v <= bound)
                } else {
                    ("≥", v >= bound)
                };
                println!(
                    "{label:<36} {v:>14.2} {unit:<6} {sign} {bound:>8}  {:>7.2}× {}",
                    v / bound,
                    if met { "met" } else { "missed" }
                );
            }
            None => println!("{label:<36} {v:>14.2} {unit}"),
        }
    }
    if let Some(split) = report.get("fresh_run_split_us") {
        println!(
            "split of a fresh run (mean µs): strip {:.1}, preflight {:.1}, instantiate {:.1}, eval {:.1}",
            split["strip"].as_f64().unwrap_or(f64::NAN),
            split["preflight"].as_f64().unwrap_or(f64::NAN),
            split["instantiate"].as_f64().unwrap_or(f64::NAN),
            split["eval"].as_f64().unwrap_or(f64::NAN)
        );
    }
    for (key, workload) in [("interruption", "compute"), ("interruption_data", "data")] {
        let Some(study) = report[key].as_object() else {
            continue;
        };
        let none = study
            .get("none_ms")
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN);
        println!("{workload} workload by interruption scheme:");
        for (key, v) in study {
            let v = v.as_f64().unwrap_or(f64::NAN);
            println!(
                "  {:<8} {v:>10.2} ms  {:+.0}% vs none",
                key.trim_end_matches("_ms"),
                (v / none - 1.0) * 100.0
            );
        }
    }
    EXIT_OK
}

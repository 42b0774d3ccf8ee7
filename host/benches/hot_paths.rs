//! The sandbox's hot paths under criterion: instantiation from the pre-initialised image, a whole fresh run of `return 1`, and one
//! awaited binding round trip.
//! `cargo bench -p codemode-host --bench hot_paths` (the release guest; first use compiles or
//! loads it from the disk cache).

use std::time::Duration;

use std::collections::BTreeMap;

use codemode_host::{Budgets, RunMetrics, WasmCodeRuntime};
use codemode_runtime::code::{binding, BindingNamespace, RunRequest};
use criterion::{criterion_group, criterion_main, Criterion};

fn request(program: &str, bindings: Vec<BindingNamespace>) -> RunRequest {
    RunRequest {
        program: program.into(),
        bindings,
        signal: None,
        ..Default::default()
    }
}

/// A raw `echo` binding: the bridge alone, no registry or pipeline.
fn echo_namespace() -> BindingNamespace {
    BindingNamespace {
        global: "tools".into(),
        functions: BTreeMap::from([(
            "echo".to_owned(),
            binding(|args, _| async move { Ok(args) }),
        )]),
        error_class: None,
    }
}

fn hot_paths(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let budgets = Budgets {
        wall_ms: 3_600_000,
        compute_ms: 3_600_000,
        ..Budgets::default()
    };
    let rt = WasmCodeRuntime::new(budgets).expect("the sandbox engine");
    let run = |program: &str, bindings: Vec<BindingNamespace>| -> RunMetrics {
        let (result, metrics) = tokio
            .block_on(rt.run_measured(request(program, bindings)))
            .expect("accepted");
        assert!(result.error.is_none(), "{:?}", result.error);
        metrics
    };
    run("return 1", vec![]);

    c.bench_function("instantiate/pre-initialised guest", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| run("return 1", vec![]).instantiate)
                .sum::<Duration>()
        })
    });

    c.bench_function("run/fresh `return 1` end to end", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run("return 1", vec![]).total).sum())
    });

    // `iters` sequential awaited echo calls, minus the same loop without the call.
    c.bench_function("bridge/one awaited echo round trip", |b| {
        b.iter_custom(|iters| {
            let with_calls = run(
                &format!("for (let i = 0; i < {iters}; i++) await tools.echo({{ i }});"),
                vec![echo_namespace()],
            );
            let without = run(
                &format!("for (let i = 0; i < {iters}; i++) ({{ i }});"),
                vec![echo_namespace()],
            );
            with_calls.total.saturating_sub(without.total)
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(4));
    targets = hot_paths
}
criterion_main!(benches);

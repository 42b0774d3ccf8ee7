//! The pipeline's own overhead per call: a no-op tool with five hooks installed (pre-execute,
//! execute wrapper, post-execute, result observer, call observer), awaited sequentially on a
//! current-thread runtime. `cargo bench -p codemode-runtime --bench tools_pipeline`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::{Registry, Schema, ToolDefinition, ToolExecutionInput, ToolOutput};
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};

fn registry(hooks: bool) -> Registry {
    let registry = Registry::new();
    let noop = ToolDefinition::builder("noop")
        .output(ToolOutput::new(
            Schema::raw(json!({"type": "null"})).expect("subset"),
            |_, _| Ok(Vec::new()),
        ))
        .execute(|_, _| async { Ok(Value::Null) })
        .build();
    registry.register(noop, None).expect("register").keep();
    if hooks {
        registry.on_pre_execute(|_, next| next.run()).keep();
        registry
            .on_execute(|exec, next| next.run(exec.signal))
            .keep();
        registry.on_post_execute(|_, _, next| next.run()).keep();
        registry.on_result(|_, _| Ok(())).keep();
        registry.on_call(|_| {}).keep();
    }
    registry
}

fn per_call(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for (label, hooks) in [
        ("noop_tool_five_hooks", true),
        ("noop_tool_no_hooks", false),
    ] {
        let registry = registry(hooks);
        c.bench_function(label, |b| {
            b.iter_custom(|iterations| {
                runtime.block_on(async {
                    let started = Instant::now();
                    for _ in 0..iterations {
                        let input = ToolExecutionInput::new(
                            "call",
                            "noop",
                            json!({}),
                            AbortSignal::never(),
                        );
                        black_box(registry.execute(input).await);
                    }
                    started.elapsed()
                })
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = per_call
}
criterion_main!(benches);

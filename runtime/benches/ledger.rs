//! Ledger accounting: what charging a run's output costs the host. One log line and one
//! completion value of typical sizes, each against a fresh ledger.
//! `cargo bench -p codemode-runtime --bench ledger`.

use std::hint::black_box;

use codemode_runtime::ledger::Ledger;
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

fn ledger(c: &mut Criterion) {
    let line =
        "fetched 42 rows from orders in 18 ms; first id ord_7f3a, last id ord_9c21 — ünïcödé";
    c.bench_function("ledger/admit_log (80-char line)", |b| {
        b.iter(|| {
            let mut ledger = Ledger::new(black_box(20_000));
            black_box(ledger.admit_log(black_box(line)));
        })
    });
    let rows: Vec<_> = (0..100)
        .map(|i| json!({ "id": i, "name": format!("row {i}"), "tags": ["a", "b"], "score": i as f64 / 3.0 }))
        .collect();
    let value = json!({ "rows": rows, "total": 100 });
    c.bench_function("ledger/value_fits (100 rows, ~6 KB)", |b| {
        let ledger = Ledger::new(20_000);
        b.iter(|| black_box(ledger.value_fits(black_box(&value))))
    });
}

criterion_group!(benches, ledger);
criterion_main!(benches);

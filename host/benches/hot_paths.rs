//! The host's hot paths under criterion: TypeScript stripping (with, beside it, what the same
//! program cost when swc's strip-only mode erased it and preflight parsed it again),
//! instantiation from the pre-initialised image, a whole fresh run of `return 1`, and one
//! awaited binding round trip.
//! `cargo bench -p codemode-host --bench hot_paths` (the release guest; first use compiles or
//! loads it from the disk cache).

use std::hint::black_box;
use std::time::Duration;

use std::collections::BTreeMap;

use codemode_host::{strip, Budgets, RunMetrics, WasmCodeRuntime};
use codemode_runtime::code::{binding, BindingNamespace, RunRequest};
use criterion::{criterion_group, criterion_main, Criterion};

const TYPED_PROGRAM: &str = r#"
interface Row { id: number; name: string; tags?: string[] }
type Page<T> = { items: T[]; next: string | null };
const seen = new Set<number>();
async function fetchAll(limit: number): Promise<Row[]> {
  const out: Row[] = [];
  let cursor: string | null = null;
  do {
    const page = (await tools.echo({ cursor, limit })) as unknown as Page<Row>;
    for (const row of page.items ?? []) {
      if (seen.has(row.id)) continue;
      seen.add(row.id);
      out.push({ ...row, tags: row.tags ?? [] });
    }
    cursor = page.next ?? null;
  } while (cursor !== null && out.length < limit);
  return out;
}
const rows = await fetchAll(10 as number);
const byTag = new Map<string, number>();
for (const r of rows) for (const t of r.tags!) byTag.set(t, (byTag.get(t) ?? 0) + 1);
console.log(`rows: ${rows.length}`);
return { count: rows.length, tags: Object.fromEntries(byTag) } satisfies Record<string, unknown>;
"#;

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

/// The 200-line program `codemode bench` checks with preflight.
const LONG_PROGRAM: &str = include_str!("../../fixtures/workloads/preflight.ts");

/// What stripping cost before the eraser shared its parse: swc's strip-only mode (a parse
/// with its tokens captured, then its own erasure), and a second parse for preflight, both on
/// a thread of their own as every program over 512 bytes is parsed (the pre-parse scan the
/// stripper still runs is left out, which flatters this side).
fn strip_only_then_parse_again(program: &str) -> usize {
    let program = program.to_owned();
    std::thread::Builder::new()
        .stack_size(2 << 30)
        .spawn(move || strip_only_then_parse_again_here(&program))
        .map_or(0, |thread| thread.join().unwrap_or(0))
}

fn strip_only_then_parse_again_here(program: &str) -> usize {
    use swc_common::{sync::Lrc, BytePos, SourceMap, GLOBALS};
    use swc_ecma_parser::{Parser, StringInput, Syntax, TsSyntax};
    use swc_ts_fast_strip::{operate, Mode, Options};

    let wrapped = format!("async function f() {{\n{program}\n}}");
    let cm: Lrc<SourceMap> = Default::default();
    let handler = swc_common::errors::Handler::with_emitter_writer(Box::new(std::io::sink()), None);
    let options = Options {
        module: Some(false),
        mode: Mode::StripOnly,
        ..Default::default()
    };
    let stripped = GLOBALS.set(&Default::default(), || {
        operate(&cm, &handler, wrapped.clone(), options).map_or(0, |o| o.code.len())
    });
    let end = BytePos(1 + wrapped.len() as u32);
    let input = StringInput::new(&wrapped, BytePos(1), end);
    let mut parser = Parser::new(Syntax::Typescript(TsSyntax::default()), input, None);
    stripped + parser.parse_script().map_or(0, |s| s.body.len())
}

fn hot_paths(c: &mut Criterion) {
    c.bench_function("strip/typed program (23 lines)", |b| {
        b.iter(|| black_box(strip::strip_types(black_box(TYPED_PROGRAM))))
    });
    c.bench_function("strip/200-line program: one parse, erased", |b| {
        b.iter(|| black_box(strip::strip_types(black_box(LONG_PROGRAM))))
    });
    c.bench_function(
        "strip/200-line program: swc strip-only, then parsed again (before)",
        |b| b.iter(|| black_box(strip_only_then_parse_again(black_box(LONG_PROGRAM)))),
    );

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

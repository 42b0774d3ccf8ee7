//! Stripping under criterion: a typed program, the 200-line program `codemode bench` checks
//! with preflight, and beside it what the same program cost when swc's strip-only mode erased
//! it and preflight parsed it again.
//! `cargo bench -p codemode-typescript --bench strip`

use std::hint::black_box;

use codemode_typescript::strip;
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

/// The 200-line program `codemode bench` checks with preflight.
const LONG_PROGRAM: &str = include_str!("../../../fixtures/workloads/preflight.ts");

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

fn stripping(c: &mut Criterion) {
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
}

criterion_group!(benches, stripping);
criterion_main!(benches);

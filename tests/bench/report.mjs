// Writes BENCHMARKS.md at the repository root from the JSON objects `codemode bench --json` and
// the peers print. A file whose object has no `peer` key is codemode's.
//
// Usage: node tests/bench/report.mjs [--out PATH] <json files...>
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const SYSTEMS = [
  { id: 'codemode', title: 'codemode' },
  { id: 'node-worker_threads', title: 'Node worker_threads' },
  { id: 'quickjs-emscripten', title: 'quickjs-emscripten' },
  { id: 'boa-native', title: 'native Boa' },
  { id: 'codemode-python', title: 'codemode (Python)' },
  { id: 'pydantic-monty', title: 'pydantic-monty (Python)' },
];

// `lower` says which direction is better, so that a target can be checked mechanically.
const ROWS = [
  { key: 'fresh_run_p50_us', label: 'fresh run `return 1`, p50', unit: 'µs', target: 300, lower: true },
  { key: 'fresh_run_p99_us', label: 'fresh run `return 1`, p99', unit: 'µs' },
  { key: 'sub_call_us', label: 'sequential awaited host call', unit: 'µs', target: 15, lower: true },
  { key: 'parallel_10x100ms_ms', label: '10 × sleep 100 ms under Promise.all', unit: 'ms', target: 105, lower: true },
  { key: 'runs_per_sec', label: 'trivial runs per second', unit: '/s', target: 4000, lower: false },
  { key: 'rss_per_instance_mib', label: 'RSS per live instance, 100 alive', unit: 'MiB', target: 2, lower: true },
  { key: 'private_per_instance_mib', label: 'of which private (anonymous)', unit: 'MiB' },
  { key: 'kill_latency_ms', label: 'kill latency past a 100 ms wall budget', unit: 'ms', target: 5, lower: true },
  { key: 'compute_ms', label: 'compute workload (`fixtures/workloads/compute.js`)', unit: 'ms', relative: ['quickjs-emscripten', 1.2] },
  { key: 'calls_ms', label: 'call-heavy workload (`fixtures/workloads/calls.js`)', unit: 'ms', relative: ['quickjs-emscripten', 2] },
  { key: 'loop_ms', label: 'counting loop (`fixtures/workloads/loop.js`)', unit: 'ms', relative: ['pydantic-monty', 1] },
  { key: 'idiomatic_ms', label: 'idiomatic TypeScript workload (`fixtures/workloads/idiomatic.ts`)', unit: 'ms', relative: ['quickjs-emscripten', 1.5] },
  { key: 'fuel_per_ms', label: 'fuel per ms of compute', unit: '' },
];

function parseArgs(argv) {
  let out = join(root, 'BENCHMARKS.md');
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--out' && argv[i + 1]) out = argv[++i];
    else if (argv[i].startsWith('-')) usage();
    else files.push(argv[i]);
  }
  if (files.length === 0) usage();
  return { out, files };
}

function usage() {
  console.error('usage: node tests/bench/report.mjs [--out PATH] <json files...>');
  process.exit(2);
}

function load(files) {
  const results = {};
  for (const file of files) {
    const text = readFileSync(file, 'utf8').trim();
    const value = JSON.parse(text.split('\n').at(-1));
    const own = value.language === 'python' ? 'codemode-python' : 'codemode';
    results[value.peer ?? own] = { ...value, file };
  }
  return results;
}

const isNumber = (v) => typeof v === 'number' && Number.isFinite(v);

function fmt(value) {
  if (!isNumber(value)) return 'n/a';
  const abs = Math.abs(value);
  const digits = abs >= 1000 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3;
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function command(file, args) {
  try {
    return execFileSync(file, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unavailable';
  }
}

function machine() {
  let cpu = os.cpus()[0]?.model ?? 'unknown';
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line) cpu = line.split(':').slice(1).join(':').trim();
  } catch {
    // Not Linux: keep what Node reports.
  }
  return {
    cpu,
    cores: os.availableParallelism(),
    memory: `${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    kernel: `${os.type()} ${os.release()}`,
    rustc: command('rustc', ['--version']),
    node: process.version,
  };
}

function gitRevision() {
  const head = command('git', ['rev-parse', '--short', 'HEAD']);
  const dirty = command('git', ['status', '--porcelain', '--untracked-files=no']);
  return dirty && dirty !== 'unavailable' ? `${head} (with uncommitted changes)` : head;
}

function verdict(ok) {
  return ok === undefined ? '' : ok ? 'met' : 'missed';
}

function targetCell(row) {
  if (row.relative) {
    const [peer, factor] = row.relative;
    return `≤ ${factor}× ${SYSTEMS.find((s) => s.id === peer).title}`;
  }
  if (row.target === undefined) return '—';
  return `${row.lower ? '≤' : '≥'} ${row.target.toLocaleString('en-US')} ${row.unit}`.trim();
}

// A target is absolute or relative to a peer's time; undefined when either side is missing, so
// that an absent measurement is never reported as a miss.
function targetMet(row, results) {
  const value = results.codemode?.[row.key];
  if (row.relative) {
    const [peer, factor] = row.relative;
    const theirs = results[peer]?.[row.key];
    return isNumber(value) && isNumber(theirs) ? value <= factor * theirs : undefined;
  }
  if (row.target === undefined || !isNumber(value)) return undefined;
  return row.lower ? value <= row.target : value >= row.target;
}

// Peer time ÷ codemode time: above 1 codemode is that many times faster.
function ratioCell(codemode, peer) {
  if (!isNumber(codemode) || !isNumber(peer) || codemode <= 0) return 'n/a';
  const r = peer / codemode;
  return r >= 1 ? `codemode ${fmt(r)}× faster` : `codemode ${fmt(1 / r)}× slower`;
}

// A workload every system timed by phase (`results[id][key]` is `{ total_ms, phases_ms, check }`):
// one column per system, then codemode's time over each peer's.
function phaseSection(lines, results, present, { key, title, intro, phases, fuelNote }) {
  const systems = present.filter((s) => results[s.id][key] && typeof results[s.id][key] === 'object');
  if (systems.length === 0) return;
  const mine = results.codemode?.[key];
  lines.push('', `## ${title}`, '');
  lines.push(`${intro} The median of three runs by total; "×" columns divide codemode's time by the peer's.`, '');
  const others = systems.filter((s) => s.id !== 'codemode');
  const head = ['phase (ms)', ...systems.map((s) => s.title), ...others.map((s) => `codemode ÷ ${s.title}`)];
  lines.push(`| ${head.join(' | ')} |`, `| ${head.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`);
  const row = (label, pick) => {
    const values = systems.map((s) => pick(results[s.id][key]));
    const ours = mine ? pick(mine) : undefined;
    const ratios = others.map((s) => {
      const theirs = pick(results[s.id][key]);
      return isNumber(ours) && isNumber(theirs) && theirs > 0 ? `${fmt(ours / theirs)}×` : 'n/a';
    });
    lines.push(`| ${label} | ${[...values.map(fmt), ...ratios].join(' | ')} |`);
  };
  for (const [phase, label] of phases) row(label, (w) => w.phases_ms?.[phase]);
  row('whole run', (w) => w.total_ms);
  const checks = new Set(systems.map((s) => JSON.stringify(results[s.id][key].check)));
  lines.push('', checks.size === 1 ? 'Every system computed the same result.' : '**The systems computed different results.**');
  if (isNumber(mine?.fuel)) {
    lines.push('', `codemode burned ${fmt(mine.fuel)} fuel on it, the same from run to run${fuelNote}.`);
  }
}

// The Python guest against its targets: the TypeScript guest and pydantic-monty measured in the
// same invocation.
function pythonSection(lines, results) {
  const py = results['codemode-python'];
  if (!py) return;
  const ts = results.codemode ?? {};
  const monty = results['pydantic-monty'] ?? {};
  const ratio = (a, b) => (isNumber(a) && isNumber(b) && b > 0 ? a / b : null);
  const checks = [
    ['fresh run `1 + 1`, p50 (µs)', py.fresh_run_p50_us, 'at most 2× the TypeScript fresh run',
      ratio(py.fresh_run_p50_us, ts.fresh_run_p50_us), (r) => r <= 2, (r) => `${fmt(r)}× TypeScript's ${fmt(ts.fresh_run_p50_us)} µs`],
    ['  against pydantic-monty\'s new session', py.fresh_run_p50_us, 'at least 1.5× faster',
      ratio(monty.fresh_run_p50_us, py.fresh_run_p50_us), (r) => r >= 1.5, (r) => `${fmt(r)}× faster than ${fmt(monty.fresh_run_p50_us)} µs`],
    ['sequential awaited tool call (µs)', py.sub_call_us, 'at most 8 µs', py.sub_call_us, (v) => v <= 8, () => `pydantic-monty's external call: ${fmt(monty.sub_call_us)} µs`],
    ['counting loop, 3,000,000 iterations (ms)', py.loop_ms, 'at most 2× native Monty',
      ratio(py.loop_ms, monty.loop_ms), (r) => r <= 2, (r) => `${fmt(r)}× pydantic-monty's ${fmt(monty.loop_ms)} ms`],
    ['private memory per waiting instance (MiB)', py.private_per_instance_mib, 'at most 0.5 MiB',
      py.private_per_instance_mib, (v) => v <= 0.5, () => `RSS ${fmt(py.rss_per_instance_mib)} MiB with the shared module pages`],
  ];
  lines.push('', '## Python programs', '');
  lines.push(
    '`codemode bench --lang python`: the same measurements on the Python guest (Monty compiled to ' +
      'WebAssembly), beside the TypeScript guest and pydantic-monty from this same invocation. ' +
      'The fresh run is `1 + 1`, as pydantic-monty\'s is (a session checked out of its warm pool, ' +
      'then one feed).',
    '',
  );
  lines.push('| measurement | codemode (Python) | target | against | met |', '| --- | ---: | --- | --- | --- |');
  for (const [label, value, target, measure, ok, against] of checks) {
    const met = isNumber(measure) ? verdict(ok(measure)) : 'n/a';
    lines.push(`| ${label} | ${fmt(value)} | ${target} | ${isNumber(measure) ? against(measure) : 'n/a'} | ${met} |`);
  }
  lines.push(`| compute workload, \`compute.py\` (ms) | ${fmt(py.compute_ms)} | | pydantic-monty: ${fmt(monty.compute_ms)} ms | |`);
  lines.push(`| call-heavy workload, \`calls.py\` (ms) | ${fmt(py.calls_ms)} | | pydantic-monty: ${fmt(monty.calls_ms)} ms | |`);
  lines.push(`| data workload, \`data.py\` (ms) | ${fmt(py.data?.total_ms)} | | | |`);
}

function render(results) {
  const m = machine();
  const present = SYSTEMS.filter((s) => results[s.id]);
  const lines = [];
  lines.push('# Benchmarks', '');
  lines.push(
    `Produced by \`tests/bench/run-all.sh\` on ${new Date().toISOString()} at revision ${gitRevision()}. ` +
      'Every number in the tables up to "How each system was measured" was measured on the machine below ' +
      'in that one invocation; nothing is estimated or carried over. Re-run the script to refresh them. ' +
      `The last section, [Where the time goes](#where-the-time-goes), is written by hand and kept as it is.`,
    '',
  );
  lines.push('Sources (one JSON object each):', '');
  for (const s of present) {
    const file = relative(root, results[s.id].file);
    lines.push(`- ${s.title}: \`${file.startsWith('..') ? results[s.id].file : file}\``);
  }
  lines.push('', '## Machine', '');
  lines.push('| | |', '| --- | --- |');
  lines.push(`| CPU | ${m.cpu} |`);
  lines.push(`| cores | ${m.cores} |`);
  lines.push(`| memory | ${m.memory} |`);
  lines.push(`| kernel | ${m.kernel} |`);
  lines.push(`| rustc | ${m.rustc} |`);
  lines.push(`| node | ${m.node} |`);
  lines.push('', '## Results', '');
  lines.push(
    'Lower is better except runs per second. "n/a" means the system has no such measurement ' +
      '(see the notes below for why). The last column checks codemode against its design target.',
    '',
  );
  const header = ['workload', 'target', ...present.map((s) => s.title), 'codemode vs target'];
  lines.push(`| ${header.join(' | ')} |`);
  lines.push(`| ${header.map((_, i) => (i < 2 ? '---' : '---:')).join(' | ')} |`);
  for (const row of ROWS) {
    const unit = row.unit ? ` (${row.unit})` : '';
    const cells = present.map((s) => fmt(results[s.id][row.key]));
    lines.push(`| ${row.label}${unit} | ${targetCell(row)} | ${cells.join(' | ')} | ${verdict(targetMet(row, results))} |`);
  }

  const codemode = results.codemode;
  const peers = present.filter((s) => s.id !== 'codemode' && s.id !== 'codemode-python');
  if (codemode && peers.length > 0) {
    lines.push('', '## Ratios', '');
    lines.push('Peer time divided by codemode time, from the table above.', '');
    const keys = ['fresh_run_p50_us', 'compute_ms', 'calls_ms', 'loop_ms', 'idiomatic_ms'];
    lines.push('| peer | fresh run p50 | compute | call-heavy | counting loop | idiomatic TypeScript |', '| --- | ---: | ---: | ---: | ---: | ---: |');
    for (const s of peers) {
      const p = results[s.id];
      lines.push(`| ${s.title} | ${keys.map((k) => ratioCell(codemode[k], p[k])).join(' | ')} |`);
    }
    const node = results['node-worker_threads'];
    if (node && isNumber(codemode.fresh_run_p50_us) && isNumber(node.fresh_run_p50_us)) {
      const r = node.fresh_run_p50_us / codemode.fresh_run_p50_us;
      lines.push('', `Design target: a fresh run at least 100× faster than a Node worker: ${fmt(r)}×, ${verdict(r >= 100)}.`);
    }
  }

  pythonSection(lines, results);

  phaseSection(lines, results, present, {
    key: 'data',
    title: 'Data workload',
    intro:
      '`fixtures/workloads/data.js`: a `read_file` tool hands the program 50,000 generated rows ' +
      '(about 7 MB of JSON, the same bytes for every system); the program parses them, aggregates ' +
      'with `for…of`, filters, sorts and slices, and `JSON.stringify`s a projection, timing each ' +
      'phase itself with `Date.now()`.',
    phases: [
      ['transfer', 'reply transfer'],
      ['parse', '`JSON.parse`'],
      ['aggregate', '`for…of` aggregate'],
      ['filterSort', 'filter + sort + slice'],
      ['stringify', '`JSON.stringify` projection'],
    ],
    fuelNote: ' (`codemode bench --data-only`)',
  });
  phaseSection(lines, results, present, {
    key: 'calls',
    title: 'Call-heavy workload',
    intro:
      '`fixtures/workloads/calls.js` (for pydantic-monty its Python translation, `calls.py`): 100,000 method calls that ' +
      'each construct a class instance; function constructors and closures over 1,000 objects; a word count of 50,000 ' +
      'words into a `Map`, a `Set` of them and a sort with a comparator; 20,000 string appends and a count into an ' +
      'object read back with `for…in`; a memoised recursion. The program times its phases itself.',
    phases: [
      ['construct', 'class instances from methods'],
      ['closures', 'function constructors, closures'],
      ['collections', '`Map`, `Set`, sort with a comparator'],
      ['strings', 'string building, `for…in`'],
      ['recursion', 'memoised recursion'],
    ],
    fuelNote: '',
  });
  phaseSection(lines, results, present, {
    key: 'idiomatic',
    title: 'Idiomatic TypeScript workload',
    intro:
      '`fixtures/workloads/idiomatic.ts`, compute as a model writes it in TypeScript (peers run it erased, ' +
      '`idiomatic.js`): 1,000 particles of classes with declared fields stepped 100 times (a `Vec` made per step, a ' +
      'getter); 60,000 words built with `toString(36)`; a `Map` word count; a sort of the counts with a comparator; a ' +
      'recursion memoised with `??=` on a plain object, pruned with `for…in` and `delete`. The program times its phases itself.',
    phases: [
      ['classes', 'classes with declared fields'],
      ['strings', 'base-36 strings'],
      ['wordCount', '`Map` word count'],
      ['sort', 'sort with a comparator'],
      ['memo', '`??=` memo, `for…in`, `delete`'],
    ],
    fuelNote: '',
  });

  const durable = codemode?.durable;
  if (durable && typeof durable === 'object') {
    lines.push('', '## Durable runs', '');
    lines.push(
      "codemode only: a run paused at a pausing call is written down (memory pages that differ from the pre-initialised image, " +
        'zstd-compressed, plus globals and host state, HMAC-signed) to a local state directory, then resumed. Pause is the ' +
        'time to write the record; resume the time to read, check, claim and restore it before the guest runs. Medians of three.',
      '',
    );
    lines.push('| program | record (bytes) | pause (ms) | resume (ms) |', '| --- | ---: | ---: | ---: |');
    for (const [key, label] of [
      ['small', 'pauses at once'],
      ['live_10mb', 'holds 10 MB of strings (repetitive)'],
      ['live_10mb_random', 'holds 10 MB of random strings'],
    ]) {
      const d = durable[key];
      if (d) lines.push(`| ${label} | ${fmt(d.record_bytes)} | ${fmt(d.pause_ms)} | ${fmt(d.resume_ms)} |`);
    }
  }

  const study = codemode?.interruption;
  if (study && typeof study === 'object') {
    const data = codemode.interruption_data && typeof codemode.interruption_data === 'object' ? codemode.interruption_data : null;
    lines.push('', '## Interruption schemes', '');
    lines.push(
      'The compute workload' + (data ? ' and the data workload (whole run)' : '') + ' under each way of ' +
        'interrupting a running guest (the fuel meter compiled into the guest, epoch deadlines, both, neither); ' +
        'overhead is relative to no interruption. Runs use fuel alone: the wall clock and aborts are checked ' +
        'whenever a busy guest comes back for fuel.',
      '',
    );
    const overheadOf = (v, none) => (isNumber(v) && isNumber(none) && none > 0 ? `${((v / none - 1) * 100).toFixed(1)} %` : 'n/a');
    lines.push(
      data ? '| scheme | compute (ms) | overhead | data (ms) | overhead |' : '| scheme | compute (ms) | overhead |',
      data ? '| --- | ---: | ---: | ---: | ---: |' : '| --- | ---: | ---: |',
    );
    for (const [scheme, key] of [['none', 'none_ms'], ['fuel', 'fuel_ms'], ['epoch', 'epoch_ms'], ['fuel + epoch', 'both_ms']]) {
      const cells = [fmt(study[key]), key === 'none_ms' ? '—' : overheadOf(study[key], study.none_ms)];
      if (data) cells.push(fmt(data[key]), key === 'none_ms' ? '—' : overheadOf(data[key], data.none_ms));
      lines.push(`| ${scheme} | ${cells.join(' | ')} |`);
    }
  }

  if (codemode?.fresh_run_split_us) {
    const split = codemode.fresh_run_split_us;
    lines.push(
      '',
      `codemode's fresh run, mean split: strip ${fmt(split.strip)} µs, instantiate ${fmt(split.instantiate)} µs, ` +
        `evaluate ${fmt(split.eval)} µs.`,
    );
  }

  lines.push('', '## How each system was measured', '');
  if (codemode) {
    lines.push(
      '- codemode: `codemode bench --json`, in process, a fresh wasm instance of the Boa guest per run. ' +
        "The guest's `JSON.parse` is a native JSON parser in front of Boa's (which runs the whole " +
        'JavaScript parser over the text); native Boa below uses Boa\'s own, which is most of its compute time. ' +
        'Its RSS per instance includes the pages of the cached module file each instance maps; how many a ' +
        'fault maps depends on how that file sits in the page cache (one build measured 1.26 MiB with the ' +
        'file read back into a dropped page cache and 1.57 MiB just after writing it; this table is ' +
        'measured after `echo 1 > /proc/sys/vm/drop_caches` where the machine allows it), so the ' +
        'private (anonymous) part is the figure to compare between builds, and the file pages are shared ' +
        'by every instance.',
    );
  }
  for (const s of peers) {
    const notes = results[s.id].notes;
    lines.push(`- ${s.title}: ${notes ? notes : 'no notes given.'}`);
  }
  lines.push(
    '',
    'Every JavaScript system runs the same program text, wrapped as the body of an async function; ' +
      'pydantic-monty runs its Python translation (`fixtures/workloads/*.py`). ' +
      'The peers are `tests/bench/node-worker-peer.mjs`, `tests/bench/quickjs-wasm-peer.mjs`, `tests/bench/native-boa` ' +
      'and `tests/bench/monty-peer.py`.',
    '',
  );
  return lines.join('\n');
}

// The hand-written section at the end of the repository's BENCHMARKS.md, from its heading on,
// carried into the new report as it is.
const KEPT_HEADING = '## Where the time goes';

function keptSection(path) {
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return '';
  }
  const at = text.indexOf(`\n${KEPT_HEADING}\n`);
  return at === -1 ? '' : text.slice(at + 1);
}

const { out, files } = parseArgs(process.argv.slice(2));
const results = load(files);
const kept = keptSection(join(root, 'BENCHMARKS.md'));
writeFileSync(out, kept ? `${render(results)}\n${kept}` : render(results));
console.error(`wrote ${relative(process.cwd(), out) || out}`);

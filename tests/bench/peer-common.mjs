// What every peer shares with `codemode bench`: the workload programs, how a program body is
// wrapped, how each workload is driven and timed, the statistics and the shape of the JSON object
// a peer prints. Keeping these in one place is what makes the columns of BENCHMARKS.md comparable.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

export const PROGRAMS = {
  trivial: 'return 1',
  echoLoop: 'for (let i = 0; i < 1000; i++) await tools.echo({ i });',
  emptyLoop: 'for (let i = 0; i < 1000; i++) ({ i });',
  parallelSleeps: 'await Promise.all(Array.from({ length: 10 }, () => tools.sleep({ ms: 100 })));',
  hold: 'await tools.hold({}); return 1;',
  spin: 'for (;;) {}',
  compute: readFileSync(new URL('../../fixtures/workloads/compute.js', import.meta.url), 'utf8'),
  data: readFileSync(new URL('../../fixtures/workloads/data.js', import.meta.url), 'utf8'),
  calls: readFileSync(new URL('../../fixtures/workloads/calls.js', import.meta.url), 'utf8'),
  loop: readFileSync(new URL('../../fixtures/workloads/loop.js', import.meta.url), 'utf8'),
  // fixtures/workloads/idiomatic.ts with its types erased, as codemode runs it.
  idiomatic: readFileSync(new URL('../../fixtures/workloads/idiomatic.js', import.meta.url), 'utf8'),
};

// The data workload's tool result: DATA_ROWS rows from a MINSTD generator (products stay below
// 2^53, so JavaScript and Rust compute the same sequence), written out the way JSON.stringify
// writes them. `codemode bench` builds the same text (`data_text` in host/src/cli/bench.rs).
export const DATA_ROWS = 50000;
const FIRST = ['Ada', 'Alan', 'Barbara', 'Claude', 'Dennis', 'Edsger', 'Frances', 'Grace', 'Hedy', 'Ivan', 'John', 'Ken', 'Leslie', 'Margaret', 'Niklaus', 'Ole', 'Radia', 'Shafi', 'Tony', 'Yukihiro'];
const LAST = ['Lovelace', 'Turing', 'Liskov', 'Shannon', 'Ritchie', 'Dijkstra', 'Allen', 'Hopper', 'Lamarr', 'Sutherland', 'McCarthy', 'Thompson', 'Lamport', 'Hamilton', 'Wirth', 'Dahl', 'Perlman', 'Goldwasser', 'Hoare', 'Matsumoto'];
const REGIONS = ['north', 'south', 'east', 'west', 'central', 'coastal', 'highland', 'island'];
const TAGS = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa'];

export function dataText(rows = DATA_ROWS) {
  let seed = 20261201;
  const next = () => (seed = (seed * 48271) % 2147483647);
  const pad = (n) => String(n).padStart(2, '0');
  const out = [];
  for (let id = 0; id < rows; id++) {
    out.push({
      id,
      name: `${FIRST[next() % 20]} ${LAST[next() % 20]}`,
      region: REGIONS[next() % 8],
      amount: next() % 100000,
      score: next() % 100,
      active: next() % 2 === 0,
      tags: [TAGS[next() % 10], TAGS[next() % 10]],
      created: `2026-${pad(1 + (next() % 12))}-${pad(1 + (next() % 28))}`,
    });
  }
  return JSON.stringify(out);
}
export const ECHO_CALLS = 1000;
export const COMPUTE_EXPECTED = 899397;
// The `check` fixtures/workloads/calls.js (and calls.py) returns, and what loop.js (and loop.py)
// returns.
export const CALLS_EXPECTED = 609129731;
export const LOOP_EXPECTED = 8999997;
// The `check` fixtures/workloads/idiomatic.ts returns.
export const IDIOMATIC_EXPECTED = 987523;
export const KILL_BUDGET_MS = 100;
export const LIVE_INSTANCES = 100;

// codemode runs a program as the body of an async function; peers use the same wrapper (strict,
// so that sloppy-mode fallbacks do not differ between engines).
export function wrap(body) {
  return `(async function () {"use strict";\n${body}\n})()`;
}

export function parseRuns(defaultRuns) {
  const args = process.argv.slice(2);
  let runs = defaultRuns;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--runs' && /^[1-9][0-9]*$/.test(args[i + 1] ?? '')) {
      runs = Number(args[++i]);
    } else {
      console.error(`usage: node ${process.argv[1]} [--runs N]`);
      process.exit(2);
    }
  }
  return runs;
}

// Nearest-rank on the sorted samples, the same rule `codemode bench` uses.
export function percentile(samples, p) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.round((sorted.length - 1) * p))];
}

export const median = (samples) => percentile(samples, 0.5);

export const rssBytes = () => process.memoryUsage().rss;

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const HOST_TOOLS = {
  echo: async (args) => args,
  sleep: (args) => sleep(args.ms),
};

// A peer is measured through its own `run(body, { tools, budgetMs })`: one program in a new
// sandbox, from creation until it is torn down, with `tools` (when given) as the host functions
// it may call. It resolves to `{ value, wallMs }`, plus `programMs` where the program timed itself
// because start-up jitter would swamp a per-call cost. Under `budgetMs`, a program stopped at that
// deadline resolves to `{ killed: true, killLatencyMs }` instead; any other failure rejects.
export async function expect(run, body, expected, options) {
  const outcome = await run(body, options);
  if (outcome.value !== expected) {
    throw new Error(`expected ${expected}, got ${JSON.stringify(outcome.value)}`);
  }
  return outcome;
}

async function freshRuns(run, runs) {
  await expect(run, PROGRAMS.trivial, 1);
  const times = [];
  for (let i = 0; i < runs; i++) times.push((await expect(run, PROGRAMS.trivial, 1)).wallMs * 1000);
  return { p50: percentile(times, 0.5), p99: percentile(times, 0.99) };
}

async function subCall(run) {
  const perCall = [];
  for (let i = 0; i < 5; i++) {
    const calls = await expect(run, PROGRAMS.echoLoop, undefined, { tools: HOST_TOOLS });
    const empty = await expect(run, PROGRAMS.emptyLoop, undefined, { tools: HOST_TOOLS });
    const ms = (outcome) => outcome.programMs ?? outcome.wallMs;
    perCall.push(((ms(calls) - ms(empty)) * 1000) / ECHO_CALLS);
  }
  return median(perCall);
}

async function parallelSleeps(run) {
  return (await expect(run, PROGRAMS.parallelSleeps, undefined, { tools: HOST_TOOLS })).wallMs;
}

async function runsPerSec(run, concurrency) {
  const windowMs = 1000;
  const started = performance.now();
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() - started < windowMs) {
        await expect(run, PROGRAMS.trivial, 1);
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

async function rssPerInstance(run) {
  let held = 0;
  let release;
  const released = new Promise((resolve) => (release = resolve));
  const tools = {
    hold: async () => {
      held++;
      await released;
      return null;
    },
  };
  await sleep(50);
  const before = rssBytes();
  const alive = Array.from({ length: LIVE_INSTANCES }, () => expect(run, PROGRAMS.hold, 1, { tools }));
  while (held < LIVE_INSTANCES) await sleep(5);
  await sleep(50);
  const during = rssBytes();
  release();
  await Promise.all(alive);
  return (during - before) / 1024 / 1024 / LIVE_INSTANCES;
}

async function killLatency(run) {
  const latencies = [];
  for (let i = 0; i < 5; i++) {
    const outcome = await run(PROGRAMS.spin, { budgetMs: KILL_BUDGET_MS });
    if (!outcome.killed) throw new Error('the endless loop finished');
    latencies.push(outcome.killLatencyMs);
  }
  return median(latencies);
}

// The median whole-run time of `samples` runs of a workload that needs no tools.
async function workload(run, program, expected, samples) {
  const times = [];
  for (let i = 0; i < samples; i++) times.push((await expect(run, program, expected)).wallMs);
  return median(times);
}

// A workload that times its own phases, three runs: the run with the median total, its phases
// as the program timed them, and what it computed (`value.check`, which `valid` accepts).
async function phased(run, name, program, options, valid) {
  const outcomes = [];
  for (let i = 0; i < 3; i++) {
    const { value, wallMs } = await run(program, options);
    if (!value?.phases || !valid(value.check)) throw new Error(`the ${name} workload returned ${JSON.stringify(value)}`);
    outcomes.push({ ...value, wallMs });
  }
  outcomes.sort((a, b) => a.wallMs - b.wallMs);
  const middle = outcomes[1];
  return { total_ms: middle.wallMs, phases_ms: middle.phases, check: middle.check };
}

const callHeavy = (run) => phased(run, 'call-heavy', PROGRAMS.calls, undefined, (check) => check === CALLS_EXPECTED);
const idiomatic = (run) => phased(run, 'idiomatic', PROGRAMS.idiomatic, undefined, (check) => check === IDIOMATIC_EXPECTED);

// Every engine must compute the same check; the report compares them.
async function data(run) {
  const text = dataText();
  return phased(run, 'data', PROGRAMS.data, { tools: { read_file: async () => text } }, () => true);
}

// Every measured key of the report, taken in this order. `concurrency` is how many runs
// runs_per_sec keeps in flight. `rssRun` gives the `run` the live instances are held with, and
// `dataRun` the one the data workload runs on; each is asked for only then, so that a peer can
// measure them in a sandbox host of their own.
export async function measure(run, { runs, concurrency = 1, rssRun = () => run, dataRun = () => run }) {
  const fresh = await freshRuns(run, runs);
  return {
    runs,
    fresh_run_p50_us: fresh.p50,
    fresh_run_p99_us: fresh.p99,
    sub_call_us: await subCall(run),
    parallel_10x100ms_ms: await parallelSleeps(run),
    runs_per_sec: await runsPerSec(run, concurrency),
    compute_ms: await workload(run, PROGRAMS.compute, COMPUTE_EXPECTED, 5),
    calls: await callHeavy(run),
    loop_ms: await workload(run, PROGRAMS.loop, LOOP_EXPECTED, 3),
    idiomatic: await idiomatic(run),
    data: await data(await dataRun()),
    kill_latency_ms: await killLatency(run),
    rss_per_instance_mib: await rssPerInstance(await rssRun()),
  };
}

const KEYS = [
  'peer',
  'runs',
  'fresh_run_p50_us',
  'fresh_run_p99_us',
  'sub_call_us',
  'parallel_10x100ms_ms',
  'runs_per_sec',
  'rss_per_instance_mib',
  'kill_latency_ms',
  'compute_ms',
  'calls_ms',
  'calls',
  'loop_ms',
  'idiomatic_ms',
  'idiomatic',
  'data',
  'notes',
];

// Exactly the agreed keys, in a fixed order; a missing measurement is null, never absent.
export function printReport(values) {
  values = { calls_ms: values.calls?.total_ms, idiomatic_ms: values.idiomatic?.total_ms, ...values };
  const out = {};
  for (const key of KEYS) out[key] = values[key] ?? null;
  console.log(JSON.stringify(out));
}

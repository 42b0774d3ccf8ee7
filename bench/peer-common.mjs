// What every peer shares with `codemode bench`: the workload programs, how a program body is
// wrapped, the statistics and the shape of the JSON object a peer prints. Keeping these in one
// place is what makes the columns of BENCHMARKS.md comparable.
import { readFileSync } from 'node:fs';

export const PROGRAMS = {
  trivial: 'return 1',
  echoLoop: 'for (let i = 0; i < 1000; i++) await tools.echo({ i });',
  emptyLoop: 'for (let i = 0; i < 1000; i++) ({ i });',
  parallelSleeps: 'await Promise.all(Array.from({ length: 10 }, () => tools.sleep({ ms: 100 })));',
  hold: 'await tools.hold({}); return 1;',
  spin: 'for (;;) {}',
  compute: readFileSync(new URL('./workloads/compute.js', import.meta.url), 'utf8'),
};
export const ECHO_CALLS = 1000;
export const COMPUTE_EXPECTED = 899397;
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
  'notes',
];

// Exactly the agreed keys, in a fixed order; a missing measurement is null, never absent.
export function printReport(values) {
  const out = {};
  for (const key of KEYS) out[key] = values[key] ?? null;
  console.log(JSON.stringify(out));
}

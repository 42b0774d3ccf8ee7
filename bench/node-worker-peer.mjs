// Peer: a fresh Node `worker_threads` worker per run, the isolation an in-process Node host
// would use. Host functions are postMessage round trips to the parent, which answers them.
// Prints one JSON object (see peer-common.mjs for the keys).
//
// Usage: node bench/node-worker-peer.mjs [--runs N]    (default 100: a worker costs milliseconds)
import { Worker } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import {
  COMPUTE_EXPECTED,
  ECHO_CALLS,
  KILL_BUDGET_MS,
  LIVE_INSTANCES,
  PROGRAMS,
  median,
  parseRuns,
  percentile,
  printReport,
  rssBytes,
  sleep,
  wrap,
} from './peer-common.mjs';

// The worker times the program itself too, so that a per-call cost can be separated from the
// milliseconds of worker start-up, whose jitter would otherwise swamp it.
const WORKER_SOURCE = `
  const { parentPort, workerData } = require('node:worker_threads');
  const { performance } = require('node:perf_hooks');
  const pending = new Map();
  let nextId = 0;
  parentPort.on('message', ({ id, value, error }) => {
    const call = pending.get(id);
    pending.delete(id);
    if (error === undefined) call.resolve(value);
    else call.reject(new Error(error));
  });
  const tools = new Proxy({}, {
    get: (_, name) => (args) => new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      parentPort.postMessage({ type: 'call', id, name, args });
    }),
  });
  const started = performance.now();
  // Indirect eval: the program sees globals and \`tools\`, not this script's locals.
  globalThis.tools = tools;
  (0, eval)(workerData.source).then(
    (value) => parentPort.postMessage({ type: 'done', value, programMs: performance.now() - started }),
    (error) => parentPort.postMessage({ type: 'done', error: String(error) }),
  );
`;

const HOST_TOOLS = {
  echo: async (args) => args,
  sleep: (args) => sleep(args.ms),
};

// One program in a new worker, from creation until the worker has exited. With `budgetMs` the
// parent terminates the worker at the deadline, as a wall-clock budget would.
function run(body, { tools = HOST_TOOLS, budgetMs } = {}) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { source: wrap(body) },
      env: {},
      stdout: true,
      stderr: true,
    });
    let finished = false;
    const finish = async (outcome) => {
      if (finished) return;
      finished = true;
      await worker.terminate();
      if (outcome.error !== undefined) reject(new Error(outcome.error));
      else resolve({ ...outcome, wallMs: performance.now() - started });
    };
    if (budgetMs !== undefined) {
      const deadline = started + budgetMs;
      setTimeout(async () => {
        if (finished) return;
        finished = true;
        await worker.terminate();
        resolve({ killed: true, killLatencyMs: performance.now() - deadline });
      }, budgetMs);
    }
    worker.on('message', async (message) => {
      if (message.type === 'done') {
        finish(message);
        return;
      }
      const tool = tools[message.name];
      try {
        if (!tool) throw new Error(`no tool ${message.name}`);
        const value = await tool(message.args);
        if (!finished) worker.postMessage({ id: message.id, value });
      } catch (error) {
        if (!finished) worker.postMessage({ id: message.id, error: String(error) });
      }
    });
    worker.once('error', reject);
  });
}

async function expect(body, expected, options) {
  const outcome = await run(body, options);
  if (outcome.value !== expected) {
    throw new Error(`expected ${expected}, got ${JSON.stringify(outcome.value)}`);
  }
  return outcome;
}

async function freshRuns(runs) {
  await expect(PROGRAMS.trivial, 1);
  const times = [];
  for (let i = 0; i < runs; i++) times.push((await expect(PROGRAMS.trivial, 1)).wallMs * 1000);
  return { p50: percentile(times, 0.5), p99: percentile(times, 0.99) };
}

async function subCall() {
  const perCall = [];
  for (let i = 0; i < 5; i++) {
    const calls = await expect(PROGRAMS.echoLoop, undefined);
    const empty = await expect(PROGRAMS.emptyLoop, undefined);
    perCall.push(((calls.programMs - empty.programMs) * 1000) / ECHO_CALLS);
  }
  return median(perCall);
}

async function runsPerSec(concurrency) {
  const windowMs = 1000;
  const started = performance.now();
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() - started < windowMs) {
        await expect(PROGRAMS.trivial, 1);
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

async function rssPerInstance() {
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
  const alive = Array.from({ length: LIVE_INSTANCES }, () => expect(PROGRAMS.hold, 1, { tools }));
  while (held < LIVE_INSTANCES) await sleep(5);
  await sleep(50);
  const during = rssBytes();
  release();
  await Promise.all(alive);
  return (during - before) / 1024 / 1024 / LIVE_INSTANCES;
}

async function killLatency() {
  const latencies = [];
  for (let i = 0; i < 5; i++) {
    const outcome = await run(PROGRAMS.spin, { budgetMs: KILL_BUDGET_MS });
    if (!outcome.killed) throw new Error('the endless loop finished');
    latencies.push(outcome.killLatencyMs);
  }
  return median(latencies);
}

async function compute() {
  const times = [];
  for (let i = 0; i < 5; i++) times.push((await expect(PROGRAMS.compute, COMPUTE_EXPECTED)).wallMs);
  return median(times);
}

const runs = parseRuns(100);
const concurrency = 4;
const fresh = await freshRuns(runs);
const report = {
  peer: 'node-worker_threads',
  runs,
  fresh_run_p50_us: fresh.p50,
  fresh_run_p99_us: fresh.p99,
  sub_call_us: await subCall(),
  parallel_10x100ms_ms: (await expect(PROGRAMS.parallelSleeps, undefined)).wallMs,
  runs_per_sec: await runsPerSec(concurrency),
  compute_ms: await compute(),
  kill_latency_ms: await killLatency(),
  rss_per_instance_mib: await rssPerInstance(),
};
report.notes =
  `Node ${process.version}, one new worker per run, timed from creation until it has exited. ` +
  `sub_call_us is taken from the program's own time inside the worker (worker start-up jitter ` +
  `is larger than the calls measured); each call is a postMessage to the parent and its reply. ` +
  `runs_per_sec keeps ${concurrency} workers in flight. kill_latency_ms is from the deadline ` +
  `to worker.terminate() resolving. rss_per_instance_mib is this process's RSS growth with ` +
  `${LIVE_INSTANCES} workers alive, divided by ${LIVE_INSTANCES}.`;
printReport(report);

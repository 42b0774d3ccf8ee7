// Peer: a fresh Node `worker_threads` worker per run, the isolation an in-process Node host
// would use. Host functions are postMessage round trips to the parent, which answers them.
// Prints one JSON object (see peer-common.mjs for the keys).
//
// Usage: node tests/bench/node-worker-peer.mjs [--runs N]    (default 100: a worker costs milliseconds)
import { Worker } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { LIVE_INSTANCES, measure, parseRuns, printReport, wrap } from './peer-common.mjs';

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

// One program in a new worker, from creation until the worker has exited. With `budgetMs` the
// parent terminates the worker at the deadline, as a wall-clock budget would.
function run(body, { tools = {}, budgetMs } = {}) {
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

const runs = parseRuns(100);
const concurrency = 4;
const report = { peer: 'node-worker_threads', ...(await measure(run, { runs, concurrency })) };
report.notes =
  `Node ${process.version}, one new worker per run, timed from creation until it has exited. ` +
  `sub_call_us is taken from the program's own time inside the worker (worker start-up jitter ` +
  `is larger than the calls measured); each call is a postMessage to the parent and its reply. ` +
  `runs_per_sec keeps ${concurrency} workers in flight. kill_latency_ms is from the deadline ` +
  `to worker.terminate() resolving. rss_per_instance_mib is this process's RSS growth with ` +
  `${LIVE_INSTANCES} workers alive, divided by ${LIVE_INSTANCES}.`;
printReport(report);

// Peer workload for `codemode bench`: a fresh Node `worker_threads` worker per run (what the
// original design spawns), running the body `return 1` as an async function and posting the
// result back. Prints one JSON object with p50/p99 in microseconds.
//
// Usage: node bench/node-worker-peer.mjs [runs]
import { Worker } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';

const runs = Number(process.argv[2] ?? 100);
const source = `
  const { parentPort, workerData } = require('node:worker_threads');
  const AsyncFunction = (async () => {}).constructor;
  new AsyncFunction('"use strict";\\n' + workerData.program)()
    .then((value) => parentPort.postMessage({ type: 'done', value }));
`;

function once(program) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const worker = new Worker(source, { eval: true, workerData: { program }, env: {}, stdout: true, stderr: true });
    worker.once('message', async (message) => {
      await worker.terminate();
      if (message.value !== 1) reject(new Error('unexpected result'));
      else resolve((performance.now() - started) * 1000);
    });
    worker.once('error', reject);
  });
}

const times = [];
await once('return 1'); // warm-up
for (let i = 0; i < runs; i++) times.push(await once('return 1'));
times.sort((a, b) => a - b);
const pick = (p) => times[Math.min(times.length - 1, Math.round((times.length - 1) * p))];
console.log(JSON.stringify({ peer: 'node-worker_threads', runs, fresh_run_p50_us: pick(0.5), fresh_run_p99_us: pick(0.99) }));

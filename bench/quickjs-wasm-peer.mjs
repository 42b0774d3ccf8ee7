// Peer: QuickJS compiled to wasm (quickjs-emscripten), a new QuickJS runtime and context per run
// inside one loaded wasm module, the isolation boundary that library offers for untrusted code.
// Prints one JSON object (see peer-common.mjs for the keys).
//
// Host functions return QuickJS promises (`newPromise`) that the host settles later, after which
// it runs the runtime's pending jobs. The asyncify build is not used: it can suspend a module on
// only one host call at a time, so `Promise.all` over ten sleeps would run them one after the
// other, and its transformed code is slower. codemode's tools are promise-returning too, so this
// is the like-for-like mapping.
//
// Usage: node bench/quickjs-wasm-peer.mjs [--runs N]
import { performance } from 'node:perf_hooks';
import { newQuickJSWASMModule } from 'quickjs-emscripten';
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

const HOST_TOOLS = {
  echo: async (args) => args,
  sleep: (args) => sleep(args.ms),
};

// Host values cross into the VM as fresh QuickJS values, as JSON would, so that an echo costs a
// copy each way the way it does through codemode's bridge and a worker's structured clone.
function toHandle(context, value) {
  if (value === undefined) return context.undefined;
  if (value === null) return context.null;
  if (typeof value === 'boolean') return value ? context.true : context.false;
  if (typeof value === 'number') return context.newNumber(value);
  if (typeof value === 'string') return context.newString(value);
  const target = Array.isArray(value) ? context.newArray() : context.newObject();
  for (const [key, item] of Object.entries(value)) {
    const handle = toHandle(context, item);
    context.setProp(target, Array.isArray(value) ? Number(key) : key, handle);
    handle.dispose();
  }
  return target;
}

function drainJobs(runtime) {
  const result = runtime.executePendingJobs();
  if (result.error) result.error.dispose();
}

function installTools(context, tools) {
  const namespace = context.newObject();
  for (const [name, impl] of Object.entries(tools)) {
    const fn = context.newFunction(name, (argHandle) => {
      const args = argHandle === undefined ? undefined : context.dump(argHandle);
      const deferred = context.newPromise();
      Promise.resolve()
        .then(() => impl(args))
        .then(
          (value) => {
            const handle = toHandle(context, value);
            deferred.resolve(handle);
            handle.dispose();
          },
          (error) => {
            const handle = context.newError(String(error));
            deferred.reject(handle);
            handle.dispose();
          },
        )
        // Settling only queues the awaiting code as a job; QuickJS runs it when asked.
        .then(() => drainJobs(context.runtime));
      return deferred.handle;
    });
    context.setProp(namespace, name, fn);
    fn.dispose();
  }
  context.setProp(context.global, 'tools', namespace);
  namespace.dispose();
}

// Reads the program's promise at once when it is already settled, which spares the host
// callbacks `resolvePromise` installs for every run that never awaited a host call.
async function settle(context, promise) {
  drainJobs(context.runtime);
  const state = context.getPromiseState(promise);
  if (state.type === 'fulfilled') {
    promise.dispose();
    return { value: state.value };
  }
  if (state.type === 'rejected') {
    promise.dispose();
    return { error: state.error };
  }
  const settled = context.resolvePromise(promise);
  promise.dispose();
  drainJobs(context.runtime);
  return settled;
}

// One program from a new runtime to its disposal. `deadline` (a performance.now() time) arms the
// interrupt handler QuickJS polls while it executes, which is how a hot loop can be stopped.
async function run(module, body, { tools, deadline } = {}) {
  const runtime = module.newRuntime();
  if (deadline !== undefined) runtime.setInterruptHandler(() => performance.now() >= deadline);
  const context = runtime.newContext();
  try {
    if (tools) installTools(context, tools);
    const evaluated = context.evalCode(wrap(body), 'program.js');
    if (evaluated.error) {
      const error = context.dump(evaluated.error);
      evaluated.error.dispose();
      return { error, stoppedAt: performance.now() };
    }
    const outcome = await settle(context, evaluated.value);
    if (outcome.error) {
      const error = context.dump(outcome.error);
      outcome.error.dispose();
      return { error, stoppedAt: performance.now() };
    }
    const value = context.dump(outcome.value);
    outcome.value.dispose();
    return { value };
  } finally {
    context.dispose();
    runtime.dispose();
  }
}

// Timed from before the runtime exists until after it is disposed, as a sandboxed run is.
async function expect(module, body, expected, options) {
  const started = performance.now();
  const outcome = await run(module, body, options);
  const wallMs = performance.now() - started;
  if (outcome.error !== undefined) throw new Error(`program failed: ${JSON.stringify(outcome.error)}`);
  if (outcome.value !== expected) {
    throw new Error(`expected ${expected}, got ${JSON.stringify(outcome.value)}`);
  }
  return wallMs;
}

async function freshRuns(module, runs) {
  await expect(module, PROGRAMS.trivial, 1);
  const times = [];
  for (let i = 0; i < runs; i++) times.push((await expect(module, PROGRAMS.trivial, 1)) * 1000);
  return { p50: percentile(times, 0.5), p99: percentile(times, 0.99) };
}

// What a new wasm module per run (codemode's own granularity) would cost instead, for the notes.
async function freshModuleP50(samples) {
  const times = [];
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    const module = await newQuickJSWASMModule();
    await expect(module, PROGRAMS.trivial, 1);
    times.push((performance.now() - started) * 1000);
  }
  return median(times);
}

async function subCall(module) {
  const perCall = [];
  for (let i = 0; i < 5; i++) {
    const calls = await expect(module, PROGRAMS.echoLoop, undefined, { tools: HOST_TOOLS });
    const empty = await expect(module, PROGRAMS.emptyLoop, undefined, { tools: HOST_TOOLS });
    perCall.push(((calls - empty) * 1000) / ECHO_CALLS);
  }
  return median(perCall);
}

async function runsPerSec(module) {
  const windowMs = 1000;
  const started = performance.now();
  let done = 0;
  while (performance.now() - started < windowMs) {
    await expect(module, PROGRAMS.trivial, 1);
    done++;
  }
  return done / ((performance.now() - started) / 1000);
}

// A module of its own, so that heap the earlier workloads grew and freed is not reused here.
async function rssPerInstance() {
  const module = await newQuickJSWASMModule();
  await expect(module, PROGRAMS.trivial, 1);
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
  const alive = Array.from({ length: LIVE_INSTANCES }, () => expect(module, PROGRAMS.hold, 1, { tools }));
  while (held < LIVE_INSTANCES) await sleep(5);
  await sleep(50);
  const during = rssBytes();
  release();
  await Promise.all(alive);
  return (during - before) / 1024 / 1024 / LIVE_INSTANCES;
}

async function killLatency(module) {
  const latencies = [];
  for (let i = 0; i < 5; i++) {
    const deadline = performance.now() + KILL_BUDGET_MS;
    const outcome = await run(module, PROGRAMS.spin, { deadline });
    if (outcome.error === undefined) throw new Error('the endless loop finished');
    latencies.push(outcome.stoppedAt - deadline);
  }
  return median(latencies);
}

async function compute(module) {
  const times = [];
  for (let i = 0; i < 5; i++) times.push(await expect(module, PROGRAMS.compute, COMPUTE_EXPECTED));
  return median(times);
}

const runs = parseRuns(200);
const module = await newQuickJSWASMModule();
const fresh = await freshRuns(module, runs);
const report = {
  peer: 'quickjs-emscripten',
  runs,
  fresh_run_p50_us: fresh.p50,
  fresh_run_p99_us: fresh.p99,
  sub_call_us: await subCall(module),
  parallel_10x100ms_ms: await expect(module, PROGRAMS.parallelSleeps, undefined, { tools: HOST_TOOLS }),
  runs_per_sec: await runsPerSec(module),
  compute_ms: await compute(module),
  kill_latency_ms: await killLatency(module),
  rss_per_instance_mib: await rssPerInstance(),
};
const moduleP50 = await freshModuleP50(20);
report.notes =
  `quickjs-emscripten 0.32.0, release sync build, on Node ${process.version}. A new QuickJS ` +
  `runtime and context per run inside one loaded wasm module; a new wasm module per run ` +
  `instead costs ${moduleP50.toFixed(0)} us p50. Host functions return QuickJS promises the ` +
  `host settles later, then it runs pending jobs (no asyncify: it serialises concurrent host ` +
  `calls). runs_per_sec is sequential: every runtime lives on this one Node thread. ` +
  `kill_latency_ms is from the deadline until evalCode returns, stopped by an interrupt handler ` +
  `polling the clock. rss_per_instance_mib is RSS growth with ${LIVE_INSTANCES} runtimes alive in ` +
  `one fresh module, divided by ${LIVE_INSTANCES}.`;
printReport(report);

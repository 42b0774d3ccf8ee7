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
// Usage: node tests/bench/quickjs-wasm-peer.mjs [--runs N]
import { performance } from 'node:perf_hooks';
import { newQuickJSWASMModule } from 'quickjs-emscripten';
import {
  LIVE_INSTANCES,
  PROGRAMS,
  expect,
  measure,
  median,
  parseRuns,
  printReport,
  wrap,
} from './peer-common.mjs';

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
async function evaluate(module, body, tools, deadline, { free = true } = {}) {
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
    if (free) {
      context.dispose();
      runtime.dispose();
    }
  }
}

// Timed from before the runtime exists until after it is disposed, as a sandboxed run is. Under
// a deadline any failure is taken as the interrupt: only the endless loop is run with one.
function runner(module, { free = true } = {}) {
  return async (body, { tools, budgetMs } = {}) => {
    const started = performance.now();
    const deadline = budgetMs === undefined ? undefined : started + budgetMs;
    const outcome = await evaluate(module, body, tools, deadline, { free });
    const wallMs = performance.now() - started;
    if (outcome.error === undefined) return { value: outcome.value, wallMs };
    if (deadline !== undefined) return { killed: true, killLatencyMs: outcome.stoppedAt - deadline };
    throw new Error(`program failed: ${JSON.stringify(outcome.error)}`);
  };
}

// What a new wasm module per run (codemode's own granularity) would cost instead, for the notes.
async function freshModuleP50(samples) {
  const times = [];
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    const module = await newQuickJSWASMModule();
    await expect(runner(module), PROGRAMS.trivial, 1);
    times.push((performance.now() - started) * 1000);
  }
  return median(times);
}

// A module of its own, so that heap the earlier workloads grew and freed is not reused here.
async function rssRun() {
  const run = runner(await newQuickJSWASMModule());
  await expect(run, PROGRAMS.trivial, 1);
  return run;
}

// The data workload: a new module per run whose runtime is never freed. Freeing a runtime that
// parsed the 50,000 rows aborts the module (an assertion in `JS_FreeRuntime` finds objects
// still on its GC list, even when nothing references the rows any more), so each run's module
// is dropped whole instead; its phases are timed inside the program either way.
function dataRun() {
  return async (body, options) => runner(await newQuickJSWASMModule(), { free: false })(body, options);
}

const runs = parseRuns(200);
const run = runner(await newQuickJSWASMModule());
const report = { peer: 'quickjs-emscripten', ...(await measure(run, { runs, rssRun, dataRun })) };
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

//! `WasmCodeRuntime`: the `CodeRuntime` service over a fresh Boa-in-wasm instance per run.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use codemode_runtime::code::{
    validate_bindings, BoxFuture, CodeRuntime, FailureKind, Language, Reply, Resume, RunFailure,
    RunRejection, RunRequest, RunResult,
};
use codemode_runtime::signal::{AbortController, AbortSignal};
use codemode_runtime::telemetry::{self, RunCost};
use tokio::sync::Notify;
use tracing::Instrument;
use wasmtime::{InstancePre, Module};

use crate::bridge;
use crate::completion::Completion;
use crate::config::{BudgetError, Budgets};
use crate::durable::memory::Image;
use crate::durable::record::Header;
use crate::durable::Durability;
use crate::engine::{self, EngineError, Guest};
use crate::explain;
use crate::interruption::Interruption;
use crate::preflight;
use crate::run::{self, Admission, Keeping, MemoryCap, Resumed, RunMetrics, Start};
use crate::source::Source;
use crate::store::RunState;
use crate::strip::strip_types_then;

/// Why a runtime could not be built.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SetupError {
    /// A budget is unusable.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// The engine or the guest module could not be set up.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

struct Inner {
    /// The guest every run of this runtime starts: the runtime's language.
    guest: Guest,
    interruption: Interruption,
    /// Stops a private engine's epoch ticker with the last clone of the runtime.
    _ticker: Option<engine::Ticker>,
    pre: InstancePre<RunState>,
    slots: Arc<tokio::sync::Semaphore>,
    budgets: Budgets,
    disposed: AtomicBool,
    dispose: AbortController,
    live: Mutex<usize>,
    /// Runs waiting for admission (an instance slot or their share of the memory cap).
    waiting: AtomicUsize,
    drained: Notify,
    /// Where paused runs are kept; without it requests that pause or resume are refused.
    durability: Mutex<Option<Durability>>,
    /// The most memory the budgets of concurrent runs may add up to; none means no cap.
    memory_cap: Mutex<Option<Arc<MemoryCap>>>,
    /// The memory a fresh instance starts with: what a paused run's pages are compared with.
    image: tokio::sync::OnceCell<Arc<Image>>,
}

/// Runs TypeScript programs, each in a brand-new wasm instance, under the runtime's budgets.
/// Cheap to clone; clones share budgets, live runs and disposal.
#[derive(Clone)]
pub struct WasmCodeRuntime {
    inner: Arc<Inner>,
}

/// Whether `max_mb` can cap the memory of concurrent runs under `budgets`
/// ([`WasmCodeRuntime::limit_memory`]): at least one run's budget, and countable.
pub fn check_memory_cap(budgets: &Budgets, max_mb: u64) -> Result<(), BudgetError> {
    let budget = budgets.memory_mb;
    if max_mb < budget.max(1) {
        return Err(BudgetError {
            key: "maxMemoryMb",
            problem: format!(
                "must be at least the memory budget of one run ({budget} MiB), got {max_mb}"
            ),
        });
    }
    let countable = u64::try_from(tokio::sync::Semaphore::MAX_PERMITS).unwrap_or(u64::MAX);
    if max_mb > countable {
        return Err(BudgetError {
            key: "maxMemoryMb",
            problem: format!("must be at most {countable}, got {max_mb}"),
        });
    }
    Ok(())
}

/// The load of a runtime's engine at one moment ([`WasmCodeRuntime::occupancy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occupancy {
    /// Instance slots the engine has (shared by every runtime on it).
    pub slots: usize,
    /// Slots a run holds right now.
    pub slots_in_use: usize,
    /// This runtime's runs waiting to be admitted.
    pub runs_waiting: usize,
}

/// Counts a run as live until dropped, so that `dispose` can wait for every one.
struct LiveGuard(Arc<Inner>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let mut live = self.0.live.lock().unwrap_or_else(|p| p.into_inner());
        *live = live.saturating_sub(1);
        if *live == 0 {
            self.0.drained.notify_waiters();
        }
    }
}

fn instance_pre(
    engine: &wasmtime::Engine,
    module: &Module,
) -> Result<InstancePre<RunState>, EngineError> {
    bridge::linker(engine)
        .and_then(|linker| linker.instantiate_pre(module))
        .map_err(EngineError::link)
}

impl WasmCodeRuntime {
    /// A runtime over the built-in guest. The guest is compiled once per process (or loaded
    /// from the on-disk cache).
    pub fn new(budgets: Budgets) -> Result<Self, SetupError> {
        Self::for_language(Language::TypeScript, budgets)
    }

    /// A runtime for programs in `language`: TypeScript (and JavaScript) run on the Boa guest,
    /// Python on the Monty guest. Each guest is compiled once per process, the first time a
    /// runtime asks for it (or loaded from the on-disk cache).
    pub fn for_language(language: Language, budgets: Budgets) -> Result<Self, SetupError> {
        budgets.validate()?;
        let guest = match language {
            Language::Python => Guest::Python,
            Language::TypeScript => Guest::JavaScript,
        };
        let shared = engine::shared()?;
        let module = shared.module(guest)?;
        let pre = instance_pre(&shared.engine, &module)?;
        let mut runtime = Self::from_parts(shared, pre, budgets, None);
        if let Some(inner) = Arc::get_mut(&mut runtime.inner) {
            inner.guest = guest;
        }
        Ok(runtime)
    }

    /// A runtime on a private engine that interrupts wasm with `interruption` only, for
    /// measuring what each mechanism costs. Budgets the scheme lacks go unenforced while wasm
    /// runs (see [`Interruption`]); use [`WasmCodeRuntime::new`] for real work. Each scheme
    /// compiles (or loads from the disk cache) its own copy of the guest.
    #[cfg(feature = "bench")]
    pub fn with_interruption(
        budgets: Budgets,
        interruption: Interruption,
    ) -> Result<Self, SetupError> {
        budgets.validate()?;
        let (shared, ticker) = engine::private(interruption)?;
        let module = shared.module(Guest::JavaScript)?;
        let pre = instance_pre(&shared.engine, &module)?;
        Ok(Self::from_parts(&shared, pre, budgets, Some(ticker)))
    }

    /// A runtime over another guest module (WAT or wasm bytes) speaking the same bridge, for
    /// testing the host against hostile guests.
    #[cfg(feature = "bench")]
    pub fn with_guest_module(bytes: &[u8], budgets: Budgets) -> Result<Self, SetupError> {
        budgets.validate()?;
        let module = engine::compile(bytes)?;
        let shared = engine::shared()?;
        let pre = instance_pre(&shared.engine, &module)?;
        Ok(Self::from_parts(shared, pre, budgets, None))
    }

    fn from_parts(
        shared: &engine::Shared,
        pre: InstancePre<RunState>,
        budgets: Budgets,
        ticker: Option<engine::Ticker>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                guest: Guest::JavaScript,
                interruption: shared.interruption,
                _ticker: ticker,
                pre,
                slots: shared.slots.clone(),
                budgets,
                disposed: AtomicBool::new(false),
                dispose: AbortController::new(),
                live: Mutex::new(0),
                waiting: AtomicUsize::new(0),
                drained: Notify::new(),
                durability: Mutex::new(None),
                memory_cap: Mutex::new(None),
                image: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// Keeps paused runs with `durability`: requests may then name pausing bindings
    /// (`RunRequest::pause_on`) and resume paused runs (`RunRequest::resume`). Replaces any
    /// earlier setting for runs that start afterwards.
    pub fn keep_paused_runs(&self, durability: Durability) {
        *self
            .inner
            .durability
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(durability);
    }

    /// [`WasmCodeRuntime::keep_paused_runs`], as a builder.
    pub fn with_durability(self, durability: Durability) -> Self {
        self.keep_paused_runs(durability);
        self
    }

    /// Caps the memory that runs in progress may hold at once: the memory budgets of the runs
    /// this runtime is running add up to at most `max_mb` MiB. A run that does not fit waits
    /// for runs to end, within its wall budget; past it, it fails as a `timeout`. No cap is
    /// the default. Applies to runs that start afterwards; runs already admitted keep their
    /// share of the cap they were admitted under.
    ///
    /// `Err` when `max_mb` is zero, beyond what can be counted, or smaller than the runtime's
    /// own memory budget (no run could ever start).
    pub fn limit_memory(&self, max_mb: u64) -> Result<(), BudgetError> {
        check_memory_cap(&self.inner.budgets, max_mb)?;
        *self
            .inner
            .memory_cap
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(MemoryCap::new(max_mb)));
        Ok(())
    }

    /// [`WasmCodeRuntime::limit_memory`], as a builder.
    pub fn with_memory_cap(self, max_mb: u64) -> Result<Self, BudgetError> {
        self.limit_memory(max_mb)?;
        Ok(self)
    }

    /// The cap [`WasmCodeRuntime::limit_memory`] set, in MiB, and how much of it the runs in
    /// progress hold right now; `None` without a cap.
    pub fn memory_cap(&self) -> Option<(u64, u64)> {
        let cap = self.current_memory_cap()?;
        let free = u64::try_from(cap.permits.available_permits()).unwrap_or(u64::MAX);
        Some((cap.mb, cap.mb.saturating_sub(free)))
    }

    fn current_memory_cap(&self) -> Option<Arc<MemoryCap>> {
        self.inner
            .memory_cap
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    async fn image(&self) -> Result<Arc<Image>, String> {
        let inner = &self.inner;
        inner
            .image
            .get_or_try_init(|| async {
                // A slot like any run's: callers hold none yet, so this cannot deadlock.
                let _slot = inner
                    .slots
                    .acquire()
                    .await
                    .map_err(|_| "the sandbox's slots are closed".to_owned())?;
                run::pristine_memory(&inner.pre)
                    .await
                    .map(|bytes| Arc::new(Image::new(bytes)))
            })
            .await
            .cloned()
    }

    /// The budgets every run of this runtime gets.
    pub fn budgets(&self) -> &Budgets {
        &self.inner.budgets
    }

    /// Runs live right now.
    pub fn live_runs(&self) -> usize {
        *self.inner.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How full the engine's instance slots are, and how many of this runtime's runs wait for
    /// one (or for their share of the memory cap): what a server reports as its load.
    pub fn occupancy(&self) -> Occupancy {
        let total = engine::MAX_CONCURRENT_RUNS as usize;
        Occupancy {
            slots: total,
            slots_in_use: total.saturating_sub(self.inner.slots.available_permits()),
            runs_waiting: self.inner.waiting.load(Ordering::Relaxed),
        }
    }

    /// Runs a program like [`CodeRuntime::run`] and also reports what the run cost.
    pub async fn run_measured(
        &self,
        request: RunRequest,
    ) -> Result<(RunResult, RunMetrics), RunRejection> {
        let started = Instant::now();
        let mut metrics = RunMetrics::default();
        let mut result = self.run_program(request, &mut metrics).await?;
        metrics.total = started.elapsed();
        result.compute_fuel = Some(metrics.fuel_consumed);
        Ok((result, metrics))
    }

    async fn run_program(
        &self,
        request: RunRequest,
        metrics: &mut RunMetrics,
    ) -> Result<RunResult, RunRejection> {
        let inner = &self.inner;
        if inner.disposed.load(Ordering::SeqCst) {
            return Err(RunRejection::Disposed);
        }
        validate_bindings(&request.bindings)?;
        let asked = match &request.budgets {
            Some(asked) => {
                asked.validate()?;
                Some(asked.within(&inner.budgets))
            }
            None => None,
        };
        {
            let mut live = inner.live.lock().unwrap_or_else(|p| p.into_inner());
            *live += 1;
        }
        let _guard = LiveGuard(inner.clone());
        let budgets = asked.as_ref().unwrap_or(&inner.budgets);
        let pauses = !request.pause_on.is_empty()
            || !request.approve_on.is_empty()
            || request.resume.is_some();
        // Only a request that pauses or resumes looks at the state store: other runs' start
        // stays as it was. Calls that may need a person's input pause a run only where there
        // is a store to keep it in.
        let durability = if pauses || request.input_calls.is_some() {
            let durability = inner
                .durability
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if durability.is_none() && pauses {
                return Err(RunRejection::Pause(
                    "this runtime keeps no paused runs: give it a state store (WasmCodeRuntime::keep_paused_runs; --state on the CLI)".into(),
                ));
            }
            durability
        } else {
            None
        };
        let mut sources = vec![inner.dispose.signal()];
        sources.extend(request.signal.iter().cloned());
        let control = AbortSignal::any(&sources);
        if let Some(reason) = control.reason() {
            return Ok(run::failure_before_start(
                RunFailure::new(FailureKind::Abort, reason),
                budgets,
            ));
        }
        if let (Some(durability), Some(resume)) = (&durability, request.resume.clone()) {
            return self
                .resume(durability, resume, request, control, metrics)
                .await;
        }
        let image = match &durability {
            Some(_) => Some(self.image().await.map_err(RunRejection::Pause)?),
            None => None,
        };
        // The namespaces' members, for preflight and for explaining a failure.
        let namespaces = Arc::new(preflight::namespaces(
            &request.bindings,
            request.preflight.as_deref(),
            request.web_fetch.as_ref(),
        ));
        // A Python program is run as written: Monty parses it in the guest. Its calls are
        // read from its tokens for preflight.
        let (program, completion) = if inner.guest == Guest::Python {
            if request.preflight.is_some() {
                let reading = Instant::now();
                let problems = preflight::check_python(&request.program, &namespaces);
                metrics.preflight = reading.elapsed();
                if !problems.is_empty() {
                    return Ok(run::failure_before_start(
                        preflight::failure(&problems),
                        budgets,
                    ));
                }
            }
            (request.program.clone(), None)
        } else {
            let checked = request.preflight.is_some().then(|| namespaces.clone());
            let stripping = Instant::now();
            // A large program is parsed off this worker, and read again there; the wait ends with
            // the run's abort or its wall clock like any other wait.
            let stripped = tokio::select! {
                biased;
                stripped = strip_types_then(&request.program, move |source| {
                    let reading = Instant::now();
                    (analyse(source, checked), reading.elapsed())
                }).instrument(tracing::info_span!("strip")) => stripped,
                reason = control.aborted() => {
                    return Ok(run::failure_before_start(RunFailure::new(FailureKind::Abort, reason), budgets));
                }
                () = tokio::time::sleep(budgets.wall()) => {
                    return Ok(run::failure_before_start(
                        run::failure_from_stop(&crate::store::Stop::Wall, budgets),
                        budgets,
                    ));
                }
            };
            let (program, ((problems, completion), reading)) = match stripped {
                Ok(stripped) => stripped,
                Err(error) => {
                    return Ok(run::failure_before_start(
                        RunFailure::new(FailureKind::Exception, error.message)
                            .at(error.line, error.column),
                        budgets,
                    ))
                }
            };
            metrics.preflight = reading;
            metrics.strip = stripping.elapsed().saturating_sub(reading);
            if !problems.is_empty() {
                return Ok(run::failure_before_start(
                    preflight::failure(&problems),
                    budgets,
                ));
            }
            let program = match completion.and_then(|c| c.apply(&program)) {
                Some(returning) => returning,
                None => program,
            };
            (program, completion)
        };
        let keeping = durability
            .as_ref()
            .zip(image)
            .map(|(durability, image)| Keeping {
                durability,
                guest: inner.guest.sha256(),
                image,
                program: &request.program,
                pause_on: request.pause_on.clone(),
                approve_on: request.approve_on.clone(),
                input_calls: request.input_calls.clone(),
            });
        let memory_cap = self.current_memory_cap();
        let admission = Admission {
            slots: &inner.slots,
            memory: memory_cap.as_deref(),
            waiting: &inner.waiting,
        };
        let mut result = run::execute(
            inner.interruption,
            &inner.pre,
            admission,
            budgets,
            Start::Program(&program, request.web_fetch.as_ref()),
            request.bindings,
            request.held,
            control,
            keeping,
            request.call_caps,
            metrics,
        )
        .await;
        if let Some(completion) = completion {
            completion.restore_position(&mut result);
        }
        match inner.guest {
            Guest::JavaScript => {
                explain::explain(
                    &request.program,
                    namespaces,
                    &mut result,
                    budgets.max_output_bytes,
                )
                .await;
            }
            Guest::Python => python_hint(&request.program, &mut result),
        }
        Ok(result)
    }
}

impl WasmCodeRuntime {
    /// Continues a paused run: its record checked, claimed, restored and answered. Everything
    /// that can refuse the resume happens before the claim, so a refused resume leaves the run
    /// resumable.
    async fn resume(
        &self,
        durability: &Durability,
        resume: Resume,
        request: RunRequest,
        control: AbortSignal,
        metrics: &mut RunMetrics,
    ) -> Result<RunResult, RunRejection> {
        let inner = &self.inner;
        let restoring = Instant::now();
        let image = self.image().await.map_err(RunRejection::Pause)?;
        let loaded = durability
            .load(&resume.run_id, inner.guest.sha256(), &image.digest)
            .await
            .map_err(|message| {
                RunRejection::Pause(other_language(inner.guest, &resume.run_id, message))
            })?;
        let replies = match_replies(&loaded.header, resume.replies)?;
        // A run that could never be admitted here is refused before it is consumed, so another
        // process (with a larger cap) can still resume it.
        if let Some(cap) = self.current_memory_cap() {
            if loaded.header.budgets.memory_mb > cap.mb {
                return Err(RunRejection::Pause(format!(
                    "run {} needs {} MiB of memory, more than all runs of this process may hold at once ({} MiB); resume it where the cap is larger (--max-memory-mb)",
                    resume.run_id, loaded.header.budgets.memory_mb, cap.mb
                )));
            }
        }
        durability
            .claim(&loaded)
            .await
            .map_err(RunRejection::Pause)?;
        let crate::durable::Loaded { header, runs, .. } = loaded;
        metrics.restore = restoring.elapsed();
        // The run keeps the budgets it started with.
        let budgets = Budgets::from(&header.budgets);
        let program = header.program.clone();
        let namespaces = Arc::new(preflight::namespaces(&request.bindings, None, None));
        let keeping = Keeping {
            durability,
            guest: inner.guest.sha256(),
            image,
            program: &program,
            pause_on: request.pause_on,
            approve_on: request.approve_on,
            input_calls: request.input_calls,
        };
        let resumed = Resumed {
            header,
            runs,
            replies,
        };
        let memory_cap = self.current_memory_cap();
        let admission = Admission {
            slots: &inner.slots,
            memory: memory_cap.as_deref(),
            waiting: &inner.waiting,
        };
        let mut result = run::execute(
            inner.interruption,
            &inner.pre,
            admission,
            &budgets,
            Start::Resumed(Box::new(resumed)),
            request.bindings,
            request.held,
            control,
            Some(keeping),
            request.call_caps,
            metrics,
        )
        .await;
        // The record keeps the program as written; its completion is found again the same way,
        // when there is a position to move back.
        if inner.guest == Guest::Python {
            python_hint(&program, &mut result);
            return Ok(result);
        }
        if result.error.as_ref().is_some_and(|e| e.line.is_some()) {
            let completion = crate::strip::with_parser_stack(&program, |program| {
                Source::parse(program)
                    .ok()
                    .and_then(|source| Completion::of(&source))
            })
            .await
            .flatten();
            if let Some(completion) = completion {
                completion.restore_position(&mut result);
            }
        }
        explain::explain(&program, namespaces, &mut result, budgets.max_output_bytes).await;
        Ok(result)
    }
}

/// A Python program that returned nothing and ends by assigning a name gets the hint a
/// TypeScript program ending in a declaration gets.
fn python_hint(program: &str, result: &mut RunResult) {
    if result.error.is_some() || result.value.is_some() || result.paused.is_some() {
        return;
    }
    if let Some((line, name)) = preflight::python_assigned_last(program) {
        result.hint = Some(format!(
            "hint: the program returned nothing; its last statement (line {line}) assigns `{name}`: end with `{name}` (or `return {name}`) to return it"
        ));
    }
}

/// A record refused as another guest's, when that guest is this build's other language: which
/// runtime resumes it. Anything else is passed on as it is.
fn other_language(guest: Guest, run_id: &str, message: String) -> String {
    let other = match guest {
        Guest::JavaScript => Guest::Python,
        Guest::Python => Guest::JavaScript,
    };
    if !message.contains(&other.sha256()[..16]) {
        return message;
    }
    let (language, flag) = match other {
        Guest::Python => ("Python", "python"),
        Guest::JavaScript => ("TypeScript", "typescript"),
    };
    format!(
        "run {run_id} is a paused {language} program's run: resume it with a runtime for {language} (`codemode resume {run_id} --lang {flag}`)"
    )
}

/// Reads the program the stripper parsed: the problems preflight finds in its calls (with
/// `namespaces` to check against) and where its completion value is.
fn analyse(
    source: &Source,
    namespaces: Option<Arc<preflight::Namespaces>>,
) -> (Vec<preflight::Problem>, Option<Completion>) {
    let problems = namespaces
        .map(|namespaces| preflight::check_source(source, &namespaces))
        .unwrap_or_default();
    (problems, Completion::of(source))
}

/// The answers by the guest's call ids; every one must name a distinct pending call. A
/// refusal names only the call it was given: never the run, nor the calls the run waits on
/// (whoever answers was told them by the pause; anyone else learns nothing here).
fn match_replies(
    header: &Header,
    replies: Vec<(String, Reply)>,
) -> Result<Vec<(u32, Reply)>, RunRejection> {
    let mut matched = Vec::with_capacity(replies.len());
    for (call_id, reply) in replies {
        let Some(call) = header
            .host
            .pending
            .iter()
            .find(|call| call.id.to_string() == call_id)
        else {
            return Err(RunRejection::Pause(format!(
                "the answers name call \"{}\", which is not a call this paused run waits on; answer only the calls its pause asked about",
                call_id.escape_debug()
            )));
        };
        if call.approval {
            if let Err(expected) = crate::run::read_approval(&reply) {
                return Err(RunRejection::Pause(format!(
                    "call {call_id} waits for an approval: {expected}"
                )));
            }
        }
        if matched.iter().any(|(id, _)| *id == call.id) {
            return Err(RunRejection::Pause(format!(
                "call {call_id} is answered twice"
            )));
        }
        matched.push((call.id, reply));
    }
    Ok(matched)
}

impl CodeRuntime for WasmCodeRuntime {
    fn language(&self) -> Language {
        match self.inner.guest {
            Guest::JavaScript => Language::TypeScript,
            Guest::Python => Language::Python,
        }
    }

    fn isolation(&self) -> &str {
        "wasm"
    }

    fn run(&self, request: RunRequest) -> BoxFuture<'_, Result<RunResult, RunRejection>> {
        Box::pin(async move {
            let (result, metrics) = self.run_measured(request).await?;
            // The `run_code` span this run is polled in, when something records it.
            let span = tracing::Span::current();
            if !span.is_disabled() {
                let cost = RunCost {
                    fuel: metrics.fuel_consumed,
                    compute_ms: metrics.fuel_consumed / crate::config::FUEL_PER_MS,
                    wall_ms: u64::try_from(metrics.total.as_millis()).unwrap_or(u64::MAX),
                    output_bytes: codemode_runtime::ledger::result_cost(&result),
                };
                telemetry::record_run_cost(&span, cost);
            }
            Ok(result)
        })
    }

    fn dispose(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let inner = &self.inner;
            inner.disposed.store(true, Ordering::SeqCst);
            inner.dispose.abort("runtime disposed");
            loop {
                let notified = inner.drained.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.live_runs() == 0 {
                    return;
                }
                notified.await;
            }
        })
    }
}

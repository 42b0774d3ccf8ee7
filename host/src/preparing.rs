//! The sandbox prepared off the request path: a server answers `initialize` at once while the
//! guest is pre-initialised and compiled on a blocking thread (seconds, on a machine whose disk
//! cache has no module for this build), and runs that arrive meanwhile wait for it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use codemode_runtime::code::{
    CodeRuntime, FailureCause, FailureKind, RunFailure, RunRejection, RunRequest, RunResult,
};
use codemode_sdk_gen::Language;
use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::config::{BudgetError, Budgets};
use crate::engine::{self, EngineError, Guest, ModuleSource};
use crate::run;
use crate::runtime::{SetupError, WasmCodeRuntime};

/// What [`prepare`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// Whether the module came from the disk cache (else it was built now, and cached).
    pub from_cache: bool,
    /// Where the module is cached; `None` when no cache directory is known (no `HOME`).
    pub cache_dir: Option<PathBuf>,
}

/// Prepares the sandbox every run of this process uses (the shared engine and both
/// pre-initialised guests, TypeScript's and Python's), reading them from the disk cache or
/// building and caching them. Blocks for seconds when it builds: call it from a blocking
/// thread.
pub fn prepare() -> Result<Prepared, EngineError> {
    let shared = engine::shared()?;
    let mut from_cache = true;
    for guest in [Guest::JavaScript, Guest::Python] {
        shared.module(guest)?;
        from_cache &= shared.module_source(guest) == Some(ModuleSource::DiskCache);
    }
    Ok(Prepared {
        from_cache,
        cache_dir: engine::cache_dir(),
    })
}

/// Where a background preparation stands.
#[derive(Clone)]
enum State {
    Preparing,
    Ready(WasmCodeRuntime),
    Failed(Arc<SetupError>),
}

/// Watches a background preparation: for a readiness probe, and for runs that wait on it.
#[derive(Clone)]
pub struct Readiness(watch::Receiver<State>);

impl Readiness {
    /// Whether runs can start without waiting.
    pub fn is_ready(&self) -> bool {
        matches!(*self.0.borrow(), State::Ready(_))
    }

    /// The runtime, once prepared.
    pub fn runtime(&self) -> Option<WasmCodeRuntime> {
        match &*self.0.borrow() {
            State::Ready(runtime) => Some(runtime.clone()),
            _ => None,
        }
    }

    /// Why the preparation failed, once it has.
    pub fn failure(&self) -> Option<String> {
        match &*self.0.borrow() {
            State::Failed(error) => Some(error.to_string()),
            _ => None,
        }
    }

    /// The runtime once prepared, or why it could not be.
    async fn settled(&mut self) -> Result<WasmCodeRuntime, Arc<SetupError>> {
        loop {
            match &*self.0.borrow_and_update() {
                State::Ready(runtime) => return Ok(runtime.clone()),
                State::Failed(error) => return Err(error.clone()),
                State::Preparing => {}
            }
            if self.0.changed().await.is_err() {
                // The preparing thread ended without a word: it panicked.
                let error = SetupError::Engine(EngineError::configure(wasmtime::Error::msg(
                    "the preparation of the sandbox stopped unexpectedly",
                )));
                return Err(Arc::new(error));
            }
        }
    }
}

/// A [`WasmCodeRuntime`] whose sandbox is prepared in the background: usable at once, its runs
/// wait for the preparation within their wall budget (then run with their whole budgets).
pub struct PreparingRuntime {
    language: Language,
    readiness: Readiness,
    budgets: Budgets,
    disposed: AtomicBool,
}

impl PreparingRuntime {
    /// Starts preparing a runtime with `budgets` on a blocking thread of the current Tokio
    /// runtime; `configure` sees it before any run does (a memory cap, a state store).
    /// Budgets are checked now: only the engine's own failure can come later.
    pub fn start(
        budgets: Budgets,
        language: Language,
        configure: impl FnOnce(&WasmCodeRuntime) + Send + 'static,
    ) -> Result<Self, BudgetError> {
        budgets.validate()?;
        let (sender, receiver) = watch::channel(State::Preparing);
        let runs = budgets.clone();
        tokio::task::spawn_blocking(move || {
            let state = match WasmCodeRuntime::for_language(language, runs) {
                Ok(runtime) => {
                    configure(&runtime);
                    tracing::info!("the sandbox is prepared");
                    State::Ready(runtime)
                }
                Err(error) => {
                    tracing::error!("the sandbox could not be prepared: {error}");
                    State::Failed(Arc::new(error))
                }
            };
            sender.send_replace(state);
        });
        Ok(Self {
            language,
            readiness: Readiness(receiver),
            budgets,
            disposed: AtomicBool::new(false),
        })
    }

    /// Where the preparation stands.
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// The runtime, once prepared.
    pub fn runtime(&self) -> Option<WasmCodeRuntime> {
        self.readiness.runtime()
    }

    /// Waits for the runtime within the run's wall budget and until its abort; a failure is
    /// the run's outcome.
    async fn wait(&self, request: &RunRequest) -> Result<WasmCodeRuntime, RunResult> {
        let budgets = &self.budgets;
        let started = Instant::now();
        let mut readiness = self.readiness.clone();
        let aborted = async {
            match &request.signal {
                Some(signal) => signal.aborted().await,
                None => std::future::pending().await,
            }
        };
        let failure = tokio::select! {
            settled = readiness.settled() => match settled {
                Ok(runtime) => return Ok(runtime),
                Err(error) => RunFailure::new(
                    FailureKind::WorkerExit,
                    format!("worker error: the sandbox could not be prepared: {error}"),
                )
                .with_cause(FailureCause::Trap),
            },
            reason = aborted => RunFailure::new(FailureKind::Abort, reason),
            () = tokio::time::sleep(budgets.wall()) => RunFailure::new(
                FailureKind::Timeout,
                format!(
                    "wall-clock ceiling reached ({}ms) while the sandbox was still being prepared for first use (about ten seconds, once per machine and version; waited {}ms): retry in a moment, or prepare it ahead of time with `codemode prepare`",
                    budgets.wall_ms,
                    started.elapsed().as_millis()
                ),
            )
            .with_cause(FailureCause::Wall),
        };
        Err(run::failure_before_start(failure, budgets))
    }
}

impl CodeRuntime for PreparingRuntime {
    fn language(&self) -> Language {
        self.language
    }

    fn isolation(&self) -> &str {
        "wasm"
    }

    fn run(&self, request: RunRequest) -> BoxFuture<'_, Result<RunResult, RunRejection>> {
        Box::pin(async move {
            if self.disposed.load(Ordering::SeqCst) {
                return Err(RunRejection::Disposed);
            }
            match self.wait(&request).await {
                Ok(runtime) => runtime.run(request).await,
                Err(failed) => Ok(failed),
            }
        })
    }

    fn dispose(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.disposed.store(true, Ordering::SeqCst);
            // A runtime still being prepared has no run to end; one prepared later is dropped
            // with this one.
            if let Some(runtime) = self.runtime() {
                runtime.dispose().await;
            }
        })
    }
}

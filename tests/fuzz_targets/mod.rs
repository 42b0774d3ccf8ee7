//! The fuzz targets' bodies, shared by the `cargo fuzz` crate (`tests/fuzz/`) and by the stable
//! replays in `tests/e2e/fuzz_replay.rs`, so that CI checks on every change exactly what the
//! fuzzer explores.
//!
//! Each target takes arbitrary bytes and panics only when a property the sandbox promises is
//! broken: a decoder that panics or disagrees with its encoder, a run that ends without exactly
//! one typed outcome, output past the ledger's cap, a reply delivered twice or for a call never
//! accepted, a binding handed arguments that are not lossless JSON, a module rewrite that panics or
//! returns a module that does not validate, an erasure that differs from swc's stripper's.

mod frames;
mod programs;
mod python_programs;
mod raw_guest;
mod rewrite;
mod strip;
mod strip_differential;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use codemode_host::{Budgets, WasmCodeRuntime};
use codemode_runtime::code::{binding, BindingFn, CodeRuntime, RunRequest, RunResult};
use codemode_runtime::json;
use codemode_runtime::ledger::{string_cost, value_cost};
use serde_json::Value;

pub use frames::frames;
pub use programs::{program_text, programs};
pub use python_programs::{python_program_text, python_programs};
pub use raw_guest::{guest_wat, raw_guest};
pub use rewrite::rewrite;
pub use strip::strip;
pub use strip_differential::{differential_program, strip_differential};

/// The budgets every fuzzed run gets: small, so that an execution takes milliseconds.
pub fn fuzz_budgets() -> Budgets {
    Budgets {
        compute_ms: 50,
        wall_ms: 1_000,
        max_output_bytes: 4_096,
        memory_mb: 64,
    }
}

/// How long past its wall budget a run may take to come back before it counts as a hang:
/// teardown, a slot's reset and a busy machine, never a whole second budget.
const HANG_SLACK: Duration = Duration::from_secs(10);

fn tokio() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime starts")
    })
}

/// Bindings that check what they are handed: a violation is remembered, not panicked on
/// inside the host's task, and reported by [`Checked::run`].
struct Checked {
    lossy_arguments: Arc<AtomicBool>,
}

impl Checked {
    fn new() -> Self {
        Self {
            lossy_arguments: Arc::new(AtomicBool::new(false)),
        }
    }

    fn guard(&self, f: impl Fn(Value) -> BindingResult + Send + Sync + 'static) -> BindingFn {
        let flag = self.lossy_arguments.clone();
        let f = Arc::new(f);
        binding(move |args, signal| {
            if !json::is_lossless(&args) {
                flag.store(true, Ordering::SeqCst);
            }
            let f = f.clone();
            async move {
                match f(args) {
                    BindingResult::Now(r) => r,
                    BindingResult::After(ms, value) => {
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(value),
                            reason = signal.aborted() => Err(reason),
                        }
                    }
                }
            }
        })
    }

    /// `tools.echo`, `tools.sleep` (5 ms), `tools.fail`, and `other.echo` without an error class.
    fn namespaces(&self) -> Vec<codemode_runtime::code::BindingNamespace> {
        vec![
            crate::tools(vec![
                ("echo", self.guard(|args| BindingResult::Now(Ok(args)))),
                ("sleep", self.guard(|args| BindingResult::After(5, args))),
                (
                    "fail",
                    self.guard(|_| BindingResult::Now(Err("it failed".into()))),
                ),
            ]),
            crate::namespace(
                "other",
                vec![("echo", self.guard(|args| BindingResult::Now(Ok(args))))],
                None,
            ),
        ]
    }

    /// Runs `program` on `rt` and checks every property of the outcome.
    fn run(&self, rt: &WasmCodeRuntime, program: &str) -> RunResult {
        let started = Instant::now();
        let request = RunRequest {
            program: program.into(),
            bindings: self.namespaces(),
            signal: None,
            ..Default::default()
        };
        let result = tokio()
            .block_on(rt.run(request))
            .unwrap_or_else(|e| panic!("a run must resolve to an outcome, got {e:?}"));
        let budgets = rt.budgets();
        let elapsed = started.elapsed();
        assert!(
            elapsed < Duration::from_millis(budgets.wall_ms) + HANG_SLACK,
            "the run took {elapsed:?}, far past its {} ms wall budget",
            budgets.wall_ms
        );
        check_outcome(&result, budgets.max_output_bytes);
        assert!(
            !self.lossy_arguments.load(Ordering::SeqCst),
            "a binding was invoked with arguments that are not lossless JSON"
        );
        result
    }
}

enum BindingResult {
    Now(Result<Value, String>),
    After(u64, Value),
}

/// Exactly one of value and error, and the whole output inside the ledger's cap.
fn check_outcome(result: &RunResult, max_output_bytes: u64) {
    assert!(
        !(result.value.is_some() && result.error.is_some()),
        "a run ended with both a value and an error: {result:?}"
    );
    let logs: u64 = 2
        + result.logs.iter().map(|l| string_cost(l)).sum::<u64>()
        + result.logs.len().saturating_sub(1) as u64;
    let tail = match (&result.value, &result.error) {
        (Some(value), _) => value_cost(value),
        (None, Some(error)) => string_cost(&error.message),
        (None, None) => 0,
    };
    assert!(
        logs + tail <= max_output_bytes,
        "output of {} bytes passed the {max_output_bytes}-byte cap: {result:?}",
        logs + tail
    );
    if let Some(value) = &result.value {
        assert!(json::is_lossless(value), "a run's value is not lossless");
    }
}

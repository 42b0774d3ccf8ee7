//! codemode's sandbox: TypeScript programs run in a fresh Boa-in-wasm instance per run,
//! under compute (fuel), wall-clock, memory and output budgets, calling host bindings through
//! a validated bridge. [`WasmCodeRuntime`] is the way in; the `codemode` binary
//! (`codemode-cli`) and the MCP server (`codemode-mcp`) use it as any embedder does.
//!
//! The TypeScript front-end (`codemode-typescript`), the module rewrites
//! (`codemode-rewrite`) and durable runs (`codemode-durable`) are crates of their own; this one
//! owns the engine, the bridge, the run's event loop and its budgets' enforcement.
//!
//! Features, off by default: `s3` (paused runs in an object store), `bench` (the seams
//! benchmarks and hostile-guest tests use: a chosen interruption scheme, an arbitrary module).

#![warn(missing_docs)]

mod bridge;
pub mod builtins;
#[cfg(test)]
mod documented_limits;
mod engine;
mod interruption;
#[cfg(test)]
mod layering;
mod meter;
mod preinit;
mod preparing;
mod run;
mod runtime;
mod store;
mod wire;

// Budgets are the contract's; the sandbox has always named them `config`.
pub use codemode_runtime::budgets as config;
// Durable runs live in their own crate, under the path embedders have always named.
pub use codemode_durable as durable;
// The TypeScript front-end, under the paths the sandbox and its users have always named.
use codemode_typescript::{completion, explain, source};
pub use codemode_typescript::{preflight, strip};

pub use config::{BudgetError, Budgets, FUEL_PER_MS};
pub use durable::Durability;
pub use engine::EngineError;
pub use engine::{cache_dir, module_from_disk_cache, on_guest_preparation, Guest};
#[cfg(feature = "bench")]
pub use engine::{GUEST_WASM, PYTHON_GUEST_WASM};
#[cfg(feature = "bench")]
pub use interruption::Interruption;
pub use preparing::{prepare, Prepared, PreparingRuntime, Readiness};
pub use run::RunMetrics;
pub use runtime::{check_memory_cap, Occupancy, SetupError, WasmCodeRuntime};

/// This crate's directory, for tests that read the repository's files: as `cargo test` names
/// it when it runs them, else as it was at build time. A test binary reused from another
/// checkout of the same sources (a shared target directory is not rebuilt for a new path)
/// would otherwise read that checkout's files.
#[cfg(test)]
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

//! codemode's wasm sandbox: TypeScript programs run in a fresh Boa-in-wasm instance per run,
//! under compute (fuel), wall-clock, memory and output budgets, calling host bindings through
//! a validated bridge. The `codemode` binary (src/main.rs) wires this crate to the CLI.
//!
//! Features, all on by default: `mcp` (upstream MCP servers as tools, and `run_code` served
//! over MCP), `s3` (paused runs in an object store), `cli` (the binary; both of those and the
//! command line), `bench` (`codemode bench` and the seams benchmarks and hostile-guest tests
//! use). A library user that only runs programs turns them off.

#![warn(missing_docs)]

mod bridge;
pub mod builtins;
#[cfg(test)]
mod documented_limits;
mod engine;
#[cfg(feature = "mcp")]
pub mod mcp;
mod meter;
mod preinit;
mod preparing;
mod run;
mod runtime;

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
pub use engine::{cache_dir, module_from_disk_cache, on_guest_preparation};
#[cfg(feature = "bench")]
pub use engine::{Interruption, GUEST_WASM};
pub use preparing::{prepare, Prepared, PreparingRuntime, Readiness};
pub use run::RunMetrics;
pub use runtime::{check_memory_cap, Occupancy, SetupError, WasmCodeRuntime};

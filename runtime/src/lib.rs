//! codemode's shared vocabulary: tools and the pipeline every call goes through, and `run_code`,
//! the tool that runs a program against them on any [`code::CodeRuntime`].
//!
//! - [`tools`]: definitions, the registry (scopes, modes, guards, hooks) and the pipeline
//!   (policy, approval, validation, execution, post-processing, events);
//! - [`run_code`]: the Code Mode transport, its scheduler of sub-calls, and prompt assembly
//!   ([`run_code::prompt`]: the SDK sections and wire tools a model is shown);
//! - [`code`]: the contract between `run_code` and a runtime (requests, results, failures,
//!   pauses);
//! - [`held`]: the one count of the host memory a run holds outside its sandbox (arguments in
//!   flight, results waiting for the program);
//! - [`ledger`]: the one count of a run's output bytes; [`json`]: the one definition of JSON;
//!   [`signal`]: abort signals;
//! - [`telemetry`]: the spans a run and its sub-calls open, and the names of their fields.
//!
//! Architecture invariant: nothing in this crate knows about wasm (`codemode-host` runs
//! programs in a sandbox; a test can run them anywhere).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod budgets;
pub mod code;
pub mod held;
/// Lossless JSON, codemode's one definition of it (the `codemode-json` crate).
pub use codemode_json as json;
pub mod ledger;
pub mod run_code;
pub mod signal;
pub mod telemetry;
pub mod tools;

//! The rewrites codemode makes to a WebAssembly module before wasmtime compiles it, each a pure
//! function from bytes to bytes over wasmparser and wasm-encoder: no engine, no I/O, so each
//! can be tested and fuzzed alone.
//!
//! - [`meter`]: the compute meter compiled into the module (a fuel global charged at each
//!   check point, and an import called when it runs out), with the warm functions' exports.
//! - [`noting`]: every indirect call through table 0 reports its slot first, for the warm
//!   profile the host takes while the guest is pre-initialised.
//! - [`globals`]: every mutable global exported, so that a paused run's globals can be read
//!   and written back.
//!
//! The meter and the noting rewrite each add one imported function; [`signatures`] is what
//! they share to move every defined function up by one and to give bodies locals of their own.
//!
//! A rewrite refuses a module it cannot read with an error that says why; given a valid
//! module, its output is a valid module (`tests/fuzz` checks both on mutated modules).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod globals;
pub mod meter;
pub mod noting;
pub mod signatures;

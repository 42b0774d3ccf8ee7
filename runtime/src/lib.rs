//! codemode's shared vocabulary. Architecture invariant: nothing in this crate knows about wasm.

#![warn(missing_docs)]

pub mod code;
/// Lossless JSON, codemode's one definition of it (the `codemode-json` crate).
pub use codemode_json as json;
pub mod ledger;
pub mod run_code;
pub mod signal;
pub mod tools;

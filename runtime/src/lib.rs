//! codemode's shared vocabulary. Architecture invariant: nothing in this crate knows about wasm.

#![warn(missing_docs)]

pub mod code;
pub mod json;
pub mod ledger;
pub mod run_code;
pub mod signal;
pub mod tools;

//! The TypeScript front-end of codemode: what happens to a program before the sandbox runs
//! it, and to a failure after. Nothing here knows about wasm.
//!
//! - [`source`]: the program parsed with swc once, as the body of the async function it runs
//!   as, and spans mapped back to the lines and columns the model wrote;
//! - [`strip`]: its types erased from swc's tree, one character written for each one erased,
//!   so every column stays where it was;
//! - [`preflight`]: its statically known tool calls checked against the tools' schemas before
//!   anything runs;
//! - [`completion`]: `return ` written before a last expression statement;
//! - [`explain`]: a failure's message sharpened with what the program meant (the nearest tool
//!   name, a program that ends in a declaration).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod completion;
pub mod explain;
pub mod preflight;
pub mod source;
pub mod strip;

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

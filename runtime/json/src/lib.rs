//! Lossless JSON: what may cross a sandbox or tool boundary, read and written without recursion.
//!
//! This is codemode's one definition of JSON. The tool pipeline, the guest bridge, the output
//! ledger and the SDK generator all read, check and write values here, so they agree on:
//!
//! - **losslessness**: numbers are finite and never `-0` ([`is_lossless`]);
//! - **depth**: nesting is bounded by [`MAX_DEPTH`], so that every host path (parse, write, byte
//!   counting, drop) stays within a small native stack;
//! - **number spelling**: as JavaScript's `String(n)` ([`write_number`]); an integer beyond
//!   2^53 is the double JavaScript would hold, as a program would see it;
//! - **equality**: scalars compare as JavaScript's `===` compares them ([`scalar_eq`]);
//! - **key order**: a map's own order (serde_json's `preserve_order`, which is the order a
//!   program's `JSON.stringify` wrote), or UTF-16 code-unit order for the canonical form
//!   ([`to_string_sorted`]).
//!
//! Values are `serde_json::Value`. Parsing and writing use explicit work stacks; output matches
//! JavaScript's `JSON.stringify` byte for byte, which the output ledger relies on.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod parse;
mod value;
mod write;

pub use parse::{heap_bytes, number_value, parse, parse_within};
pub use value::{clone_deep, drop_deep, is_lossless, is_lossless_number, scalar_eq, walk};
pub use write::{
    char_len, cmp_utf16, string_len, to_string, to_string_sorted, write, write_number, write_string,
};

/// The deepest nesting accepted at a boundary: what the reference's deepest tests use. serde_json
/// drops and clones a `Value` recursively, and a thread's stack holds far fewer levels than
/// this (cloning takes the most per level), so hosts holding deep values should use
/// [`drop_deep`] and [`clone_deep`], which need no stack at all.
pub const MAX_DEPTH: usize = 5_000;

/// Why a text or value is not lossless JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// The text is not JSON; holds the byte offset of the fault.
    #[error("malformed JSON at byte {0}")]
    Syntax(usize),
    /// A number overflows to infinity or is `-0`; holds its byte offset.
    #[error("number at byte {0} is not a finite JSON number other than -0")]
    Number(usize),
    /// The nesting exceeds [`MAX_DEPTH`].
    #[error("value is nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// Non-whitespace follows the value; holds its byte offset.
    #[error("trailing data at byte {0}")]
    Trailing(usize),
    /// Building the value would take more host memory than allowed (see [`heap_bytes`]).
    #[error("value needs more than {0} bytes of host memory")]
    TooLarge(usize),
}

//! Renders the tools an agent can see as the `tools:sdk` prompt text: a compact, exact
//! TypeScript (or Python) declaration of every tool, preceded by the instructions for writing a
//! `run_code` program against it.
//!
//! A leaf: a pure function of tool schemas, with no knowledge of registries, modes or runtimes
//! (`codemode_runtime::run_code::prompt` assembles the prompt sections from a registry with
//! it). JSON values are written by `codemode-json`, the one definition every codemode crate
//! shares. The `cli` feature (on by default) adds the `codemode-sdk` binary.
//!
//! Architecture invariant: the output is a pure function of the *set* of tools. Tool order, key
//! order in schemas and repeated calls never change a byte, so the prompt prefix stays cacheable.
//! Rendering is total (what cannot be typed is `unknown` / `Any`, never an error) and never
//! exhausts the stack, whatever the schemas.
//!
//! ```
//! use codemode_sdk_gen::{render_sdk, Language, ToolSchema};
//! use serde_json::json;
//!
//! let tools = [ToolSchema {
//!     name: "read_file".into(),
//!     description: Some("Read a file.".into()),
//!     parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
//!     output: None,
//! }];
//! let sdk = render_sdk(&tools, Language::TypeScript);
//! assert!(sdk.contains("  /** Read a file. */\n  read_file: {\n    path: string;\n  };\n"));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod annotations;
mod discovery;
mod input;
mod instructions;
mod python;
mod refs;
mod sdk;
mod shape;
mod text;
mod typescript;

pub use discovery::{estimate_tokens, render_declarations, search, tool_index};
pub use input::{parse_tool_list, tool_list_from_value, InputError};
pub use instructions::{PYTHON_INSTRUCTIONS, TYPESCRIPT_INSTRUCTIONS};
pub use sdk::{render_sdk, Language, ToolSchema};
pub use shape::MAX_DEPTH;

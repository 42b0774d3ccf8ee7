//! The `codemode` command: the sandbox (`codemode-host`), the built-in tools, the execution
//! tools (`codemode-exec`), upstream MCP servers and the `run_code` server (`codemode-mcp`) and
//! the SDK generator (`codemode-sdk-gen`), wired to the command line. Every subcommand lives in
//! its own module under `cli/`; this crate adds no behaviour of its own beyond flags, exit
//! codes, the HTTP transport, logs, traces and metrics.
//!
//! Exit codes: 0 success, 1 the program failed, 2 a usage or I/O error, 3 the program paused.
//!
//! Feature `bench` adds `codemode bench` (the measurements in BENCHMARKS.md); it is not in
//! what ships.

#![forbid(unsafe_code)]

mod cli;

pub use cli::main;

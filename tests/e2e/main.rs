//! The end-to-end suites, one module each, in one test binary: the library API (`sandbox`,
//! `budgets`, `run_code`, `durable`, ...), the `codemode` binary (`cli`, `mcp`, ...) and hostile
//! guests and programs, through public surfaces only. `cargo test -p codemode-e2e --test e2e
//! budgets::` runs one suite.
//!
//! The tests run on the harness's threads side by side, so none may depend on the process
//! beyond itself: no process-wide environment variables, no fixed ports, no shared files or
//! directories (each test makes its own with `codemode_e2e::temp_dir`). What does need the
//! process to itself is in the `whole_process` binary.

mod architecture;
mod budgets;
mod cli;
mod conformance;
mod declarations;
mod durable;
mod errors;
mod exec;
mod fast_paths;
mod fetch;
mod fleet;
mod fuzz_replay;
mod held_results;
mod hostile_corpus;
mod hostile_guests;
mod hostile_programs;
mod json_parse;
mod json_stringify;
mod mcp;
mod mcp_http_security;
mod memory_admission;
mod observability;
mod preflight;
mod python;
mod run_code;
mod sandbox;

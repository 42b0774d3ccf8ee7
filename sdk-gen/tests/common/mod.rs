//! Helpers shared by the integration suites: fixture paths, tool lists, fenced code.
#![allow(dead_code)]

use codemode_sdk_gen::{parse_tool_list, ToolSchema};
use std::path::{Path, PathBuf};

/// This crate's directory: as `cargo test` names it when it runs the tests, else as it was at
/// build time. A test binary reused from another checkout of the same sources (a shared target
/// directory is not rebuilt for a new path) would otherwise read that checkout's files.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The repository root (the crate lives in `<root>/sdk-gen`).
pub fn repo_root() -> PathBuf {
    manifest_dir()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

pub fn fixtures() -> PathBuf {
    repo_root().join("fixtures")
}

/// `(case name, tool list file)` for every tool list with golden SDK files: the captured real
/// servers and our own schema fixtures, sorted by name.
pub fn golden_cases() -> Vec<(String, PathBuf)> {
    let mut cases = Vec::new();
    for dir in [
        fixtures().join("mcp-tools"),
        fixtures().join("sdk").join("tools"),
    ] {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                let name = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                cases.push((name, path));
            }
        }
    }
    cases.sort();
    cases
}

/// Reads and parses a tool list file (either accepted shape).
pub fn load_tools(path: &Path) -> Vec<ToolSchema> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_tool_list(&text, "").unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The code inside the section's fenced block.
pub fn fenced_code(sdk: &str) -> &str {
    let start = sdk
        .find("\n```ts\n")
        .map(|i| i + 7)
        .or_else(|| sdk.find("\n```python\n").map(|i| i + 11));
    let start = start.unwrap_or_else(|| panic!("no fenced block in:\n{sdk}"));
    let body = &sdk[start..];
    body.strip_suffix("\n```")
        .unwrap_or_else(|| panic!("the fenced block does not end the text:\n{sdk}"))
}

/// A tool schema from its parts.
pub fn tool(
    name: &str,
    description: Option<&str>,
    parameters: serde_json::Value,
    output: Option<serde_json::Value>,
) -> ToolSchema {
    ToolSchema {
        name: name.to_owned(),
        description: description.map(str::to_owned),
        parameters,
        output,
    }
}

//! Golden SDK text for the captured real MCP servers and our own schema fixtures.
//!
//! `UPDATE_GOLDEN=1 cargo test -p codemode-sdk-gen --test golden` rewrites the files; review the
//! diff before keeping it, because these bytes are a prompt prefix.

mod common;

use codemode_sdk_gen::{render_sdk, Language};
use common::{fixtures, golden_cases, load_tools};
use std::path::PathBuf;

const LANGUAGES: [(Language, &str); 2] = [(Language::TypeScript, "ts"), (Language::Python, "py")];

fn golden_path(case: &str, extension: &str) -> PathBuf {
    fixtures()
        .join("sdk")
        .join("golden")
        .join(format!("{case}.{extension}.md"))
}

#[test]
fn at_least_thirteen_real_servers_are_captured() {
    let captured = golden_cases()
        .iter()
        .filter(|(_, path)| path.parent().is_some_and(|p| p.ends_with("mcp-tools")))
        .count();
    assert!(
        captured >= 13,
        "only {captured} captured tool lists in fixtures/mcp-tools"
    );
}

#[test]
fn generated_sdks_match_their_golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let mut mismatches = Vec::new();
    for (case, input) in golden_cases() {
        let tools = load_tools(&input);
        for (language, extension) in LANGUAGES {
            let rendered = format!("{}\n", render_sdk(&tools, language));
            let path = golden_path(&case, extension);
            if update {
                std::fs::write(&path, &rendered)
                    .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
                continue;
            }
            let expected = std::fs::read_to_string(&path).unwrap_or_default();
            if expected != rendered {
                let line = expected
                    .lines()
                    .zip(rendered.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or_else(|| expected.lines().count().min(rendered.lines().count()))
                    + 1;
                mismatches.push(format!("{} differs from line {line}", path.display()));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{}\n(regenerate with UPDATE_GOLDEN=1 after reviewing the change)",
        mismatches.join("\n")
    );
}

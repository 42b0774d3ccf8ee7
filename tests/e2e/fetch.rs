//! `fetch` through the real CLI against HTTP servers on loopback: the allow-list (exact,
//! wildcard, ports), redirects checked again, names that resolve into the host's network,
//! byte caps, deadlines, secret headers that no output shows, the pipeline's policy and
//! records, the Web-shaped global `fetch` in TypeScript and `tools.fetch` in Python.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use codemode_e2e::{codemode_binary, output_with_stdin, temp_dir};
use serde_json::Value;

/// What the server was sent.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: String,
}

/// A loopback HTTP/1.1 server: one thread per connection, every request recorded.
struct Server {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen on loopback");
        let port = listener.local_addr().expect("bound").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || serve(stream, port, &log));
            }
        });
        Self { port, received }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("not poisoned").clone()
    }
}

fn serve(stream: TcpStream, port: u16, log: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let request = Received {
        method,
        path: path.clone(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    log.lock().expect("not poisoned").push(request.clone());
    let (status, content_type, extra, body): (&str, &str, String, Vec<u8>) =
        match path.split_once('?').map_or(path.as_str(), |(p, _)| p) {
            "/text" => ("200 OK", "text/plain", String::new(), b"hello".to_vec()),
            "/json" => (
                "200 OK",
                "application/json",
                "X-Thing: one\r\n".to_owned(),
                br#"{"a":1,"list":[1,2]}"#.to_vec(),
            ),
            "/echo" => {
                let text = serde_json::json!({
                    "method": request.method,
                    "headers": request.headers,
                    "body": request.body,
                });
                (
                    "200 OK",
                    "application/json",
                    String::new(),
                    text.to_string().into_bytes(),
                )
            }
            "/big" => ("200 OK", "text/plain", String::new(), vec![b'x'; 100_000]),
            "/binary" => (
                "200 OK",
                "application/octet-stream",
                String::new(),
                (0..=255u8).collect(),
            ),
            "/redirect" => {
                let to = path.split_once("?to=").map_or("", |(_, to)| to);
                let to = to.replace("PORT", &port.to_string());
                (
                    "302 Found",
                    "text/plain",
                    format!("Location: {to}\r\n"),
                    Vec::new(),
                )
            }
            "/slow" => {
                // Holds the response until the client gives up and closes the connection.
                let mut rest = Vec::new();
                let _ = reader.read_to_end(&mut rest);
                return;
            }
            _ => ("404 Not Found", "text/plain", String::new(), b"no".to_vec()),
        };
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
}

fn run(program: &str, flags: &[&str]) -> Output {
    output_with_stdin(
        Command::new(codemode_binary())
            .args(["run", "--json"])
            .args(flags)
            .arg("-"),
        program,
    )
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn result(out: &Output) -> Value {
    let value = json(out);
    assert_eq!(out.status.code(), Some(0), "{value}");
    value["result"].clone()
}

fn error(out: &Output) -> String {
    let value = json(out);
    assert_eq!(out.status.code(), Some(1), "{value}");
    value["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_global_fetch_answers_with_a_web_response() {
    let server = Server::start();
    let host = format!("127.0.0.1:{}", server.port);
    let program = format!(
        r#"
        const r = await fetch("{json}");
        const data = await r.json();
        let again = "";
        try {{ await r.text(); }} catch (e) {{ again = e.message; }}
        const bin = await fetch("{binary}");
        const bytes = new Uint8Array(await bin.arrayBuffer());
        const posted = await (await fetch("{echo}", {{
            method: "POST",
            headers: {{ "Content-Type": "application/json", "X-One": "1" }},
            body: JSON.stringify({{ q: "hi" }}),
        }})).json();
        const missing = await fetch("{missing}");
        return {{
            status: r.status, ok: r.ok, type: r.headers.get("CONTENT-TYPE"), thing: r.headers.get("x-thing"),
            none: r.headers.get("x-none"), data, again, used: r.bodyUsed,
            binLength: bytes.length, last: bytes[255], binText: (await (await fetch("{binary}")).text()).length,
            method: posted.method, sent: posted.headers["x-one"], body: posted.body,
            missing: [missing.status, missing.ok, missing.statusText],
        }};
        "#,
        json = server.url("/json"),
        binary = server.url("/binary"),
        echo = server.url("/echo"),
        missing = server.url("/missing"),
    );
    let out = run(
        &program,
        &["--allow-host", &host, "--allow-private-network"],
    );
    let value = result(&out);
    assert_eq!(value["status"], 200);
    assert_eq!(value["ok"], true);
    assert_eq!(value["type"], "application/json");
    assert_eq!(value["thing"], "one");
    assert_eq!(value["none"], Value::Null);
    assert_eq!(value["data"], serde_json::json!({"a": 1, "list": [1, 2]}));
    assert_eq!(value["again"], "Body has already been consumed.");
    assert_eq!(value["used"], true);
    assert_eq!(value["binLength"], 256);
    assert_eq!(value["last"], 255);
    assert_eq!(
        value["binText"], 256,
        "bytes 0x80..0xff each decode to U+FFFD"
    );
    assert_eq!(value["method"], "POST");
    assert_eq!(value["sent"], "1");
    assert_eq!(value["body"], r#"{"q":"hi"}"#);
    assert_eq!(
        value["missing"],
        serde_json::json!([404, false, "Not Found"])
    );
}

#[test]
fn hosts_not_allowed_are_refused_before_anything_is_sent() {
    let server = Server::start();
    let url = server.url("/text");
    // Not named: refused at run time (the URL is computed, so preflight cannot see it).
    let program = format!("const u = ['{url}'][0];\nawait fetch(u);");
    let out = run(
        &program,
        &["--allow-host", "example.com", "--allow-private-network"],
    );
    let message = error(&out);
    assert!(
        message.contains(&format!(
            "127.0.0.1:{} is not an allowed host (allowed: example.com)",
            server.port
        )),
        "{message}"
    );
    // A literal URL is refused by preflight, with its place.
    let out = run(
        &format!("await fetch('{url}');"),
        &["--allow-host", "example.com"],
    );
    let value = json(&out);
    assert_eq!(value["error"]["cause"], "preflight", "{value}");
    assert_eq!(value["error"]["line"], 1, "{value}");
    // The wrong port of an allowed host is another host.
    let other = format!("127.0.0.1:{}", server.port + 1);
    let out = run(
        &program,
        &["--allow-host", &other, "--allow-private-network"],
    );
    assert!(error(&out).contains("is not an allowed host"));
    // A wildcard covers subdomains, not the name itself.
    let apex = format!("await fetch(['http://localhost:{}/text'][0]);", server.port);
    let out = run(
        &apex,
        &["--allow-host", "*.localhost", "--allow-private-network"],
    );
    assert!(error(&out).contains("is not an allowed host (allowed: *.localhost)"));
    let sub = format!(
        "await fetch(['http://api.localhost:{}/text'][0]);",
        server.port
    );
    let out = run(
        &sub,
        &["--allow-host", "*.localhost", "--allow-private-network"],
    );
    let value = json(&out);
    let message = value["error"]["message"].as_str().unwrap_or("");
    assert!(!message.contains("not an allowed host"), "{value}");
    // Only http and https.
    let out = run(
        "await fetch(['file:///etc/passwd'][0]);",
        &["--allow-host", "localhost"],
    );
    assert!(error(&out).contains("only http and https URLs are fetched, not file:"));
    // Without --allow-host there is no fetch, and the error says how to get one.
    let out = run("await fetch('http://example.com/');", &[]);
    let message = error(&out);
    assert!(
        message.starts_with("ReferenceError: fetch is not defined: this run may reach no host"),
        "{message}"
    );
    let out = run("return typeof fetch;", &[]);
    assert_eq!(result(&out), "undefined");
    assert!(server.received().is_empty(), "{:?}", server.received());
}

#[test]
fn the_hosts_own_network_is_refused_by_name_and_in_every_spelling() {
    let server = Server::start();
    let port = server.port;
    let allow = [
        "--allow-host",
        "localhost",
        "--allow-host",
        "127.0.0.1",
        "--allow-host",
        "[::ffff:7f00:1]",
        "--allow-host",
        "2130706433",
    ];
    // A name that resolves to loopback: refused after resolution, before connecting.
    let out = run(
        &format!("await fetch(['http://localhost:{port}/text'][0]);"),
        &allow,
    );
    let message = error(&out);
    assert!(
        message.contains("localhost resolves to")
            && message.contains("a loopback address")
            && message.contains("--allow-private-network"),
        "{message}"
    );
    for spelling in [
        format!("http://127.0.0.1:{port}/text"),
        format!("http://[::ffff:127.0.0.1]:{port}/text"),
        format!("http://2130706433:{port}/text"),
        format!("http://0x7f.0.0.1:{port}/text"),
    ] {
        let out = run(&format!("await fetch(['{spelling}'][0]);"), &allow);
        let message = error(&out);
        assert!(
            message.contains("is a loopback address"),
            "{spelling}: {message}"
        );
    }
    let out = run(
        "await tools.fetch({ url: ['http://169.254.169.254/latest/meta-data/'][0] });",
        &["--allow-host", "169.254.169.254"],
    );
    assert!(error(&out).contains("is a cloud metadata address"));
    let out = run(
        "await fetch(['http://0.0.0.0:1/'][0]);",
        &["--allow-host", "0.0.0.0"],
    );
    assert!(error(&out).contains("is a unspecified (this host) address"));
    assert!(server.received().is_empty(), "{:?}", server.received());
    // With --allow-private-network the same name reaches the server.
    let out = run(
        &format!("return (await fetch(['http://localhost:{port}/text'][0])).text();"),
        &["--allow-host", "localhost", "--allow-private-network"],
    );
    assert_eq!(result(&out), "hello");
}

#[test]
fn every_redirect_is_checked_again() {
    let server = Server::start();
    let port = server.port;
    let host = format!("127.0.0.1:{port}");
    let flags = ["--allow-host", host.as_str(), "--allow-private-network"];
    // A redirect within the allowed host is followed.
    let out = run(
        &format!(
            "const r = await fetch('{}');\nreturn [r.status, r.redirected, r.url, await r.text()];",
            server.url("/redirect?to=/text")
        ),
        &flags,
    );
    assert_eq!(
        result(&out),
        serde_json::json!([200, true, server.url("/text"), "hello"])
    );
    // One that leaves it is refused, and its target never hears of it.
    let out = run(
        &format!(
            "await fetch('{}');",
            server.url("/redirect?to=http://localhost:PORT/text")
        ),
        &flags,
    );
    let message = error(&out);
    assert!(
        message.contains(&format!(
            "redirected to http://localhost:{port}/text, which is refused"
        )),
        "{message}"
    );
    assert!(message.contains("is not an allowed host"), "{message}");
    let paths: Vec<String> = server.received().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/redirect?to=/text",
            "/text",
            "/redirect?to=http://localhost:PORT/text"
        ]
    );
}

#[test]
fn bodies_are_capped_and_slow_servers_time_out() {
    let server = Server::start();
    let host = format!("127.0.0.1:{}", server.port);
    let flags = [
        "--allow-host",
        host.as_str(),
        "--allow-private-network",
        "--fetch-max-bytes",
        "1000",
    ];
    let out = run(&format!("const r = await tools.fetch({{ url: '{}' }});\nreturn [r.body.length, r.truncated, r.encoding];", server.url("/big")), &flags);
    assert_eq!(result(&out), serde_json::json!([1000, true, "text"]));
    let out = run(
        &format!(
            "await fetch('{}', {{ method: 'POST', body: 'y'.repeat(1001) }});",
            server.url("/echo")
        ),
        &flags,
    );
    assert!(error(&out).contains("more than the 1000 a request may carry (--fetch-max-bytes)"));
    // The deadline, against a server that never answers (the other fetches keep the default).
    let slow = [&flags[..], &["--fetch-timeout-ms", "300"]].concat();
    let out = run(&format!("await fetch('{}');", server.url("/slow")), &slow);
    let message = error(&out);
    assert!(
        message.contains("did not answer within 300 ms"),
        "{message}"
    );
    assert!(
        !server.received().iter().any(|r| r.path == "/echo"),
        "the oversized body was sent"
    );
}

#[test]
fn secret_headers_reach_their_host_and_nothing_else_sees_them() {
    const SECRET: &str = "s3cr3t-Value-9f8e7d";
    let server = Server::start();
    let port = server.port;
    let dir = temp_dir("fetch-secret");
    let events = dir.join("events.jsonl");
    let host = format!("127.0.0.1:{port}");
    let program = format!(
        r#"
        const echoed = await (await fetch("{echo}")).json();
        console.log("seen by the program:", JSON.stringify(echoed));
        const away = await fetch("{away}");
        let failed = "";
        try {{ await fetch("{echo}", {{ headers: {{ "X-Api-Key": "mine" }}, method: "TRACE" }}); }} catch (e) {{ failed = e.message; }}
        return {{ echoed, away: await away.json(), failed }};
        "#,
        echo = server.url("/echo"),
        away = server.url("/redirect?to=http://localhost:PORT/echo"),
    );
    let out = output_with_stdin(
        Command::new(codemode_binary())
            .args([
                "run",
                "--json",
                "--allow-host",
                &host,
                "--allow-host",
                "localhost",
                "--allow-private-network",
            ])
            .args([
                "--fetch-header",
                &format!("{host}=X-Api-Key:CODEMODE_TEST_FETCH_SECRET"),
            ])
            .arg("--events")
            .arg(&events)
            .arg("-")
            .env("CODEMODE_TEST_FETCH_SECRET", SECRET)
            .env("RUST_LOG", "trace"),
        &program,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let value: Value = serde_json::from_str(&stdout).expect("JSON");
    // The server got it; the program saw the echo with the value cut out.
    let received = server.received();
    assert_eq!(
        received[0].headers.get("x-api-key").map(String::as_str),
        Some(SECRET)
    );
    assert_eq!(
        value["result"]["echoed"]["headers"]["x-api-key"],
        "[hidden]"
    );
    // Not sent once a redirect leaves the host.
    let last = received.last().expect("the redirect's target");
    assert_eq!(last.path, "/echo");
    assert_eq!(last.headers.get("x-api-key"), None, "{last:?}");
    assert_eq!(value["result"]["away"]["headers"].get("x-api-key"), None);
    assert!(value["result"]["failed"]
        .as_str()
        .unwrap_or("")
        .contains("does not make TRACE requests"));
    let events = std::fs::read_to_string(&events).expect("events written");
    assert!(!events.is_empty());
    for (place, text) in [
        ("stdout", stdout.as_ref()),
        ("stderr", stderr.as_ref()),
        ("events", events.as_str()),
    ] {
        assert!(!text.contains(SECRET), "the secret is in {place}");
    }
    // A header for a host that is not allowed, or from an unset variable, is refused up front.
    let out = run(
        "return 1;",
        &[
            "--allow-host",
            "a.example",
            "--fetch-header",
            "b.example=X:HOME",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not among the --allow-host entries"));
    let out = run(
        "return 1;",
        &[
            "--allow-host",
            "a.example",
            "--fetch-header",
            "a.example=X:CODEMODE_TEST_UNSET_VARIABLE",
        ],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("CODEMODE_TEST_UNSET_VARIABLE is not set")
    );
}

#[test]
fn fetch_goes_through_the_pipeline_like_any_tool() {
    let server = Server::start();
    let host = format!("127.0.0.1:{}", server.port);
    let program = format!("await fetch('{}');", server.url("/text"));
    let out = run(
        &program,
        &[
            "--allow-host",
            &host,
            "--allow-private-network",
            "--deny",
            "fetch",
        ],
    );
    let value = json(&out);
    assert_eq!(value["calls"][0]["tool"], "fetch", "{value}");
    assert_eq!(value["calls"][0]["outcome"], "rejected", "{value}");
    assert!(server.received().is_empty());
    let out = run(
        &format!("{program}\nawait fetch('{}');", server.url("/text")),
        &[
            "--allow-host",
            &host,
            "--allow-private-network",
            "--max-calls-per-tool",
            "fetch=1",
        ],
    );
    let value = json(&out);
    assert_eq!(value["error"]["cause"], "calls", "{value}");
    assert_eq!(server.received().len(), 1);
    // The SDK declares it when it is on.
    let sdk = Command::new(codemode_binary())
        .args(["sdk", "--allow-host", "example.com"])
        .output()
        .expect("sdk");
    let text = String::from_utf8_lossy(&sdk.stdout);
    assert!(text.contains("fetch("), "{text}");
}

#[test]
fn python_programs_fetch_through_tools() {
    let server = Server::start();
    let host = format!("127.0.0.1:{}", server.port);
    let program = format!(
        "r = await tools.fetch(url='{}', method='POST', body='hi')\n{{'status': r['status'], 'body': r['body']}}",
        server.url("/text")
    );
    let out = output_with_stdin(
        Command::new(codemode_binary()).args([
            "run",
            "--json",
            "--lang",
            "python",
            "--allow-host",
            &host,
            "--allow-private-network",
            "-",
        ]),
        &program,
    );
    assert_eq!(
        result(&out),
        serde_json::json!({"status": 200, "body": "hello"})
    );
    assert_eq!(server.received()[0].body, "hi");
}

#[test]
fn the_mcp_server_takes_the_same_flags() {
    use crate::mcp::{drive, run_code, stdio_server};
    let server = Server::start();
    let host = format!("127.0.0.1:{}", server.port);
    let target = stdio_server(&["--allow-host", &host, "--allow-private-network"]);
    let program = format!(
        "const r = await fetch('{}');\nreturn [r.status, await r.text()];",
        server.url("/text")
    );
    let answers = drive(
        serde_json::json!({"steps": [run_code(&program), run_code("await fetch('http://example.com/');")]}),
        "stdio",
        &target,
    );
    assert_eq!(
        answers[0]["structured"]["result"],
        serde_json::json!([200, "hello"]),
        "{answers:?}"
    );
    let refused = answers[1]["text"].as_str().unwrap_or_default();
    assert!(
        refused.contains("example.com:80 is not an allowed host"),
        "{answers:?}"
    );
    assert_eq!(server.received().len(), 1);
}

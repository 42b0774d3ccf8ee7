//! What an operator sees of codemode, checked with real parts: log records on stderr by
//! `RUST_LOG` and `--log-format`; one OpenTelemetry trace per run, exported over OTLP/HTTP to a
//! receiver that decodes it with the official `opentelemetry-proto` package
//! (`fixtures/observability/otlp_receiver.py`), continued from a client's `traceparent` and
//! into an upstream server that records the `_meta` it gets
//! (`fixtures/mcp-servers/meta_recorder.py`); `/healthz`, `/readyz` and `/metrics` (parsed
//! with `prometheus_client`'s parser) behind the server's token; and the sandbox prepared
//! ahead of time (`codemode prepare`) or off the request path.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use codemode_e2e::{
    codemode_binary as binary, is_run_id, output_with_stdin, spawn_announced, temp_dir, url_address,
};
use serde_json::{json, Value};

const TOKEN: &str = "observability-token-0123456789";
const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT_SPAN: &str = "b7ad6b7169203331";

fn repo() -> PathBuf {
    codemode_e2e::manifest_dir().join("..")
}

fn fixture(path: &str) -> String {
    repo().join("fixtures").join(path).display().to_string()
}

/// A child process ended when dropped (SIGTERM first, so that it flushes what it holds).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        stop(&mut self.0);
    }
}

fn stop(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill with a pid this test started and an integer signal.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A local OTLP/HTTP receiver writing each span it decodes as a JSON line to `spans`.
struct Receiver {
    _process: Running,
    endpoint: String,
    spans: PathBuf,
}

impl Receiver {
    fn start(dir: &Path) -> Self {
        let spans = dir.join("spans.jsonl");
        let mut child = Command::new("python3")
            .arg(fixture("observability/otlp_receiver.py"))
            .arg("--out")
            .arg(&spans)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 with opentelemetry-proto (pip install -r tests/toolchain/requirements.txt)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("the receiver says where it listens");
        let endpoint = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Self {
            _process: Running(child),
            endpoint,
            spans,
        }
    }

    /// The spans received so far, once `done` holds for them (waiting up to 20 s).
    fn spans_until(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans: Vec<Value> = std::fs::read_to_string(&self.spans)
                .unwrap_or_default()
                .lines()
                .map(|line| serde_json::from_str(line).expect("a span per line"))
                .collect();
            if done(&spans) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The environment that turns export on, to this receiver.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", self.endpoint.clone()),
            ("OTEL_SERVICE_NAME", "codemode-under-test".to_owned()),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-probe=present".to_owned()),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=e2e".to_owned(),
            ),
        ]
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one span {name:?} in {spans:#?}");
    found[0]
}

fn run(args: &[&str], env: &[(&str, String)], program: &str) -> Output {
    let mut command = Command::new(binary());
    command.arg("run").args(args).env_remove("RUST_LOG");
    for (name, value) in env {
        command.env(name, value);
    }
    output_with_stdin(&mut command, program)
}

const PROGRAM: &str =
    "await tools.echo({ a: 1 }); try { await tools.fail({ message: 'no' }); } catch {} console.log('done'); return 1;";

#[test]
fn logs_go_to_stderr_by_level_and_json_stays_one_object() {
    // Quiet by default: a clean run writes nothing on stderr.
    let quiet = run(&["--json"], &[], PROGRAM);
    assert_eq!(quiet.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), "");

    // Every level on: stdout still holds exactly one JSON object.
    let loud = run(&["--json"], &[("RUST_LOG", "trace".into())], PROGRAM);
    let stdout = String::from_utf8_lossy(&loud.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let doc: Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(doc["result"], 1);
    let stderr = String::from_utf8_lossy(&loud.stderr);
    assert!(stderr.contains("run finished"), "{stderr}");
    assert!(stderr.contains("codemode.stage"), "{stderr}");

    // JSON records, one per line, with the run's id, outcome and duration.
    let json = run(
        &["--log-format", "json"],
        &[("RUST_LOG", "info".into())],
        PROGRAM,
    );
    assert_eq!(String::from_utf8_lossy(&json.stdout), "done\n1\n");
    let records: Vec<Value> = String::from_utf8_lossy(&json.stderr)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(records
        .iter()
        .all(|r| r["level"].is_string() && r["timestamp"].is_string()));
    let finished = records
        .iter()
        .find(|r| r["message"] == "run finished")
        .expect("the run is logged");
    assert!(is_run_id(finished["run"].as_str().unwrap()), "{finished}");
    assert_eq!(finished["outcome"], "value");
    assert_eq!(finished["calls"], 2);
    assert!(finished["duration_ms"].is_u64(), "{finished}");

    // A filter that does not parse is said, and the default applies.
    let bad = run(&[], &[("RUST_LOG", "codemode=[".into())], "return 1");
    assert_eq!(bad.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("RUST_LOG is not a filter"), "{stderr}");
}

#[test]
fn a_run_is_one_trace_exported_over_otlp() {
    let dir = temp_dir("otlp-run");
    let receiver = Receiver::start(dir.path());
    let out = run(&["--json"], &receiver.env(), PROGRAM);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The CLI flushes before it exits: every span is there already.
    let spans = receiver.spans_until(|s| !s.is_empty());
    let root = one(&spans, "execute_tool run_code");
    assert_eq!(root["parent_span_id"], "");
    let trace = root["trace_id"].as_str().unwrap();
    assert!(spans.iter().all(|s| s["trace_id"] == trace), "one trace");
    let attributes = &root["attributes"];
    assert_eq!(attributes["gen_ai.operation.name"], "execute_tool");
    assert_eq!(attributes["gen_ai.tool.name"], "run_code");
    assert!(is_run_id(
        attributes["gen_ai.tool.call.id"].as_str().unwrap()
    ));
    assert_eq!(attributes["codemode.outcome"], "value");
    assert_eq!(attributes["codemode.calls"], 2);
    assert!(
        attributes["codemode.fuel"].as_u64().unwrap() > 0,
        "{attributes}"
    );
    assert!(attributes["codemode.wall_ms"].is_u64(), "{attributes}");
    assert!(attributes["codemode.compute_ms"].is_u64(), "{attributes}");
    // `["done"]` and `1`.
    assert_eq!(attributes["codemode.output_bytes"], 9);
    let root_id = &root["span_id"];
    for phase in ["strip", "instantiate", "evaluate"] {
        assert_eq!(&one(&spans, phase)["parent_span_id"], root_id, "{phase}");
    }
    let echo = one(&spans, "execute_tool echo");
    assert_eq!(&echo["parent_span_id"], root_id);
    assert_eq!(echo["attributes"]["codemode.outcome"], "resolved");
    assert_eq!(
        echo["attributes"]["gen_ai.tool.call.id"],
        format!(
            "{}:code:1",
            attributes["gen_ai.tool.call.id"].as_str().unwrap()
        )
    );
    assert_ne!(echo["status_code"], 2, "{echo}");
    let stages: Vec<&str> = echo["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["policy", "validation", "execute", "post"]);
    let fail = one(&spans, "execute_tool fail");
    assert_eq!(fail["attributes"]["codemode.outcome"], "rejected");
    // STATUS_CODE_ERROR, with the tool's message.
    assert_eq!(fail["status_code"], 2, "{fail}");
    assert_eq!(fail["status_message"], "no");
    assert!(fail["attributes"]["error.type"].is_string(), "{fail}");
    // The standard variables name the service, the resource and the headers.
    assert_eq!(root["resource"]["service.name"], "codemode-under-test");
    assert_eq!(root["resource"]["deployment.environment"], "e2e");
    assert_eq!(root["headers"]["x-probe"], "present");

    // A failed run says why on its span.
    let failed = run(
        &["--json", "--compute-ms", "100"],
        &receiver.env(),
        "while (true) {}",
    );
    assert_eq!(failed.status.code(), Some(1));
    let spans = receiver.spans_until(|s| named(s, "execute_tool run_code").len() == 2);
    let root = named(&spans, "execute_tool run_code")
        .into_iter()
        .find(|s| s["attributes"]["codemode.outcome"] != "value")
        .expect("the failed run's span");
    assert_eq!(root["attributes"]["codemode.outcome"], "timeout");
    assert_eq!(root["attributes"]["codemode.cause"], "compute");
    assert_eq!(root["status_code"], 2);
}

/// Runs the Python MCP client's `plan` (see `tests/e2e/mcp/drive.py`).
fn drive(plan: Value, transport: &str, target: &[String], env: &[(&str, String)]) -> Vec<Value> {
    let mut command = Command::new("python3");
    command
        .arg(repo().join("tests/e2e/mcp/drive.py"))
        .arg(plan.to_string())
        .arg(transport)
        .args(target);
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().expect("python3 with the `mcp` package");
    let stdout = String::from_utf8_lossy(&out.stdout);
    match serde_json::from_str::<Value>(stdout.lines().last().unwrap_or_default()) {
        Ok(Value::Array(answers)) => answers,
        _ => panic!(
            "the client failed: {}\nstdout: {stdout}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn recorder() -> String {
    format!("rec=python3 {}", fixture("mcp-servers/meta_recorder.py"))
}

#[test]
fn a_trace_continues_from_the_client_through_codemode_into_upstream_servers() {
    let dir = temp_dir("otlp-mcp");
    let receiver = Receiver::start(dir.path());
    let meta_log = dir.join("meta.jsonl");
    let mut env = receiver.env();
    env.push(("META_LOG", meta_log.display().to_string()));
    let target = vec![
        binary().display().to_string(),
        "mcp".to_owned(),
        "--mcp".to_owned(),
        recorder(),
    ];
    let traceparent = format!("00-{TRACE_ID}-{PARENT_SPAN}-01");
    let answers = drive(
        json!({"steps": [{
            "op": "call",
            "tool": "run_code",
            "args": {"code": "return await tools.mcp__rec__record({ text: 'hi' });", "description": "Record"},
            "meta": {"traceparent": traceparent},
        }]}),
        "stdio",
        &target,
        &env,
    );
    assert_eq!(answers[0]["isError"], false, "{answers:?}");
    let spans = receiver.spans_until(|s| !named(s, "tools/call run_code").is_empty());
    // The server's span continues the client's trace; everything of the run is in it.
    let served = one(&spans, "tools/call run_code");
    assert_eq!(served["trace_id"], TRACE_ID);
    assert_eq!(served["parent_span_id"], PARENT_SPAN);
    // SPAN_KIND_SERVER, with MCP's attribute names.
    assert_eq!(served["kind"], 2);
    assert_eq!(served["attributes"]["mcp.method.name"], "tools/call");
    assert_eq!(served["attributes"]["gen_ai.tool.name"], "run_code");
    assert!(
        spans.iter().all(|s| s["trace_id"] == TRACE_ID),
        "{spans:#?}"
    );
    let run_span = one(&spans, "execute_tool run_code");
    assert_eq!(run_span["parent_span_id"], served["span_id"]);
    let sub_call = one(&spans, "execute_tool mcp__rec__record");
    assert_eq!(sub_call["parent_span_id"], run_span["span_id"]);
    // The upstream request: a client span under the sub-call, whose context the server got.
    let upstream = one(&spans, "tools/call record");
    assert_eq!(upstream["parent_span_id"], sub_call["span_id"]);
    assert_eq!(upstream["kind"], 3);
    assert_eq!(upstream["attributes"]["codemode.mcp.server"], "rec");
    let received: Vec<Value> = std::fs::read_to_string(&meta_log)
        .expect("the upstream server recorded its calls")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0]["meta"]["traceparent"],
        format!("00-{TRACE_ID}-{}-01", upstream["span_id"].as_str().unwrap())
    );
}

/// A running `codemode mcp --http 127.0.0.1:0`.
struct HttpServer {
    process: Running,
    addr: SocketAddr,
}

impl HttpServer {
    fn start(args: &[&str], env: &[(&str, String)]) -> Self {
        let mut command = Command::new(binary());
        command
            .args(["mcp", "--http", "127.0.0.1:0"])
            .args(args)
            .env("CODEMODE_MCP_TOKEN", TOKEN)
            .env_remove("RUST_LOG");
        for (name, value) in env {
            command.env(name, value);
        }
        let (child, url, _) = spawn_announced(&mut command);
        let addr = url_address(&url);
        Self {
            process: Running(child),
            addr,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// `GET path`, with the token when `token`: the status and the body.
    fn get(&self, path: &str, token: bool) -> (u16, String) {
        let mut stream = TcpStream::connect(self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let auth = if token {
            format!("Authorization: Bearer {TOKEN}\r\n")
        } else {
            String::new()
        };
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\n{auth}Connection: close\r\n\r\n",
            self.addr
        )
        .expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answer");
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default();
        (status, body)
    }

    /// Waits up to 60 s for `/readyz` to answer 200.
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.get("/readyz", true).0 != 200 {
            assert!(Instant::now() < deadline, "the server never got ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `/metrics` parsed by `prometheus_client`: each family's samples.
fn scrape(server: &HttpServer) -> BTreeMap<String, Vec<Value>> {
    let (status, text) = server.get("/metrics", true);
    assert_eq!(status, 200, "{text}");
    let out = output_with_stdin(
        Command::new("python3").arg(fixture("observability/parse_metrics.py")),
        &text,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "not Prometheus text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    parsed["families"]
        .as_object()
        .expect("families")
        .iter()
        .map(|(name, family)| {
            (
                name.clone(),
                family["samples"].as_array().cloned().unwrap_or_default(),
            )
        })
        .collect()
}

/// The value of the sample `name` whose labels include `labels`.
fn sample(families: &BTreeMap<String, Vec<Value>>, name: &str, labels: Value) -> f64 {
    let family = name
        .trim_end_matches("_total")
        .trim_end_matches("_count")
        .trim_end_matches("_sum");
    let samples = families
        .get(family)
        .unwrap_or_else(|| panic!("no family {family}: {families:#?}"));
    samples
        .iter()
        .find(|s| {
            s["name"] == name
                && labels
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| &s["labels"][k] == v)
        })
        .and_then(|s| s["value"].as_f64())
        .unwrap_or_else(|| panic!("no sample {name} {labels}: {samples:#?}"))
}

#[test]
fn probes_follow_the_token_and_metrics_count_what_ran() {
    let dir = temp_dir("metrics");
    let receiver = Receiver::start(dir.path());
    let mut env = receiver.env();
    env.push(("META_LOG", dir.join("meta.jsonl").display().to_string()));
    let server = HttpServer::start(&["--builtins", "--mcp", &recorder()], &env);
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(server.get(path, false).0, 401, "{path} needs the token");
    }
    assert_eq!(server.get("/healthz", true), (200, "ok\n".to_owned()));
    server.wait_ready();

    let traceparent = format!("00-{TRACE_ID}-{PARENT_SPAN}-01");
    let answers = drive(
        json!({
            "headers": {"Authorization": format!("Bearer {TOKEN}"), "traceparent": traceparent},
            "steps": [{"op": "call", "tool": "run_code", "args": {"code": PROGRAM, "description": "Echo and fail"}}],
        }),
        "http",
        &[server.url()],
        &[],
    );
    assert_eq!(answers[0]["isError"], false, "{answers:?}");
    let families = scrape(&server);
    assert_eq!(
        sample(
            &families,
            "codemode_runs_total",
            json!({"outcome": "value"})
        ),
        1.0
    );
    assert_eq!(
        sample(&families, "codemode_run_duration_seconds_count", json!({})),
        1.0
    );
    assert_eq!(
        sample(
            &families,
            "codemode_sub_calls_total",
            json!({"tool": "echo", "outcome": "resolved"})
        ),
        1.0
    );
    assert_eq!(
        sample(
            &families,
            "codemode_sub_calls_total",
            json!({"tool": "fail", "outcome": "rejected"})
        ),
        1.0
    );
    assert_eq!(
        sample(
            &families,
            "codemode_sub_call_duration_seconds_count",
            json!({"tool": "echo"})
        ),
        1.0
    );
    assert!(sample(&families, "codemode_fuel_spent_total", json!({})) > 0.0);
    assert_eq!(sample(&families, "codemode_pool_slots", json!({})), 256.0);
    assert_eq!(
        sample(&families, "codemode_pool_slots_in_use", json!({})),
        0.0
    );
    assert_eq!(sample(&families, "codemode_runs_waiting", json!({})), 0.0);
    assert_eq!(sample(&families, "codemode_ready", json!({})), 1.0);
    assert!(sample(&families, "codemode_sessions", json!({})) >= 0.0);
    assert_eq!(
        sample(&families, "codemode_upstream_up", json!({"server": "rec"})),
        1.0
    );

    // An HTTP `traceparent` header is the parent of the call's spans.
    let spans = receiver.spans_until(|s| !named(s, "tools/call run_code").is_empty());
    let served = one(&spans, "tools/call run_code");
    assert_eq!(served["trace_id"], TRACE_ID);
    assert_eq!(served["parent_span_id"], PARENT_SPAN);
    drop(server);

    // With --probes-without-token a scraper needs no secret; /mcp still does.
    let open = HttpServer::start(&["--builtins", "--probes-without-token"], &[]);
    assert_eq!(open.get("/healthz", false), (200, "ok\n".to_owned()));
    open.wait_ready();
    assert_eq!(open.get("/metrics", false).0, 200);
    assert_eq!(open.get("/mcp", false).0, 401);
}

#[test]
fn the_sandbox_is_prepared_ahead_of_time_or_off_the_request_path() {
    let dir = temp_dir("prepare");
    let cache = dir.join("cache");
    let prepare = || {
        Command::new(binary())
            .arg("prepare")
            .env("CODEMODE_CACHE_DIR", &cache)
            .env_remove("RUST_LOG")
            .output()
            .expect("codemode prepare")
    };
    let first = prepare();
    assert_eq!(first.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(stderr.contains("preparing the sandbox"), "{stderr}");
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        stdout.starts_with("the sandbox is prepared in "),
        "{stdout}"
    );
    assert!(stdout.contains(&cache.display().to_string()), "{stdout}");
    let again = prepare();
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&again.stderr), "");
    assert!(String::from_utf8_lossy(&again.stdout).starts_with("the sandbox was already prepared"));
    // A prepared machine's first run says nothing of preparation.
    let out = output_with_stdin(
        Command::new(binary())
            .arg("run")
            .env("CODEMODE_CACHE_DIR", &cache)
            .env_remove("RUST_LOG"),
        "return 1",
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");

    // A server on a cold machine is up at once and ready later; a call made meanwhile waits,
    // told so by progress notifications, and then runs.
    let cold = dir.join("cold");
    let server = HttpServer::start(
        &["--builtins"],
        &[("CODEMODE_CACHE_DIR", cold.display().to_string())],
    );
    assert_eq!(server.get("/healthz", true).0, 200);
    let (status, body) = server.get("/readyz", true);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("being prepared"), "{body}");
    let answers = drive(
        json!({
            "headers": {"Authorization": format!("Bearer {TOKEN}")},
            "steps": [{"op": "call", "tool": "run_code", "progress": true, "args": {"code": "return 6 * 7", "description": "Answer"}}],
        }),
        "http",
        &[server.url()],
        &[],
    );
    assert_eq!(answers[0]["isError"], false, "{answers:?}");
    assert_eq!(answers[0]["structured"]["result"], 42, "{answers:?}");
    let progress = answers[0]["progress"].as_array().expect("progress");
    assert!(
        progress.iter().any(|p| p[1]
            .as_str()
            .is_some_and(|m| m.contains("for the sandbox to be prepared"))),
        "{progress:?}"
    );
    assert_eq!(server.get("/readyz", true), (200, "ready\n".to_owned()));
    drop(server.process);
}

#[test]
fn codemode_introduces_itself_to_upstream_servers_and_offers_a_version_with_initialize() {
    let out = codemode_e2e::output_with_stdin(
        Command::new(binary()).args(["run", "--json", "--mcp", &recorder(), "-"]),
        "return JSON.parse((await tools.mcp__rec__whoami({})).result);",
    );
    let value: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        value["result"],
        json!({"name": "codemode", "version": env!("CARGO_PKG_VERSION"), "protocolVersion": "2025-11-25"}),
        "{value}"
    );
}

//! Upstream servers kept up and passed through: one that dies is started again with backoff
//! and clients hear of its new tools; its progress reaches the client of the call; one at a
//! URL is reached over streamable HTTP with headers taken from the environment.

use super::*;

#[test]
fn a_server_that_dies_is_started_again_and_clients_hear_of_its_new_tools() {
    let dir = temp_dir("mcp-restart");
    let starts = dir.join("starts");
    // The fixture lists `added` from its second start on.
    let server = stdio_server(&["--mcp", &fragile()]);
    let description = |listed: &Value| -> String {
        listed
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == "run_code"))
            .map(|t| t["description"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    let died = "try { await tools.mcp__fragile__die({}); } catch (e) {} \
                await new Promise((resolve) => setTimeout(resolve, 2500)); \
                return await tools.mcp__fragile__ok({ text: 'back' });";
    let out = Command::new("python3")
        .arg(repo().join("tests/e2e/mcp/drive.py"))
        .arg(
            json!({"steps": [
                {"op": "list"},
                run_code(died),
                {"op": "notifications"},
                {"op": "list"},
                run_code("return await tools.mcp__fragile__added({});"),
            ]})
            .to_string(),
        )
        .arg("stdio")
        .args(&server)
        .env("FRAGILE_STARTS", &starts)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answers: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(!description(&answers[0]).contains("mcp__fragile__added"));
    assert_eq!(
        answers[1]["structured"]["result"],
        json!({"result": "back"}),
        "{answers}"
    );
    assert_eq!(
        std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .count(),
        2,
        "started once, then once more"
    );
    assert!(
        answers[2]
            .as_array()
            .is_some_and(|n| n.iter().any(|m| m == "notifications/tools/list_changed")),
        "{answers}"
    );
    assert!(
        description(&answers[3]).contains("mcp__fragile__added"),
        "{answers}"
    );
    assert_eq!(
        answers[4]["structured"]["result"],
        json!({"result": "start 2"}),
        "{answers}"
    );
}

#[test]
fn a_list_of_tools_with_a_time_to_live_is_listed_again_when_it_runs_out() {
    // The fixture never says its tools changed; its list holds for a second (`ttlMs`), and
    // each listing offers another tool.
    let expiring = format!(
        "expiring=python3 {}",
        repo().join("fixtures/mcp-servers/expiring.py").display()
    );
    let server = stdio_server(&["--mcp", &expiring]);
    let answers = drive(
        json!({"steps": [
            {"op": "list"},
            {"op": "wait_notification", "method": "notifications/tools/list_changed", "within": 60},
            {"op": "list"},
        ]}),
        "stdio",
        &server,
    );
    // The tools are declared in run_code's description.
    let declared = |listed: &Value| -> Vec<String> {
        let description = listed[0]["description"].as_str().unwrap_or_default();
        description
            .split("mcp__expiring__")
            .skip(1)
            .map(|rest| rest.split(':').next().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(declared(&answers[0]), ["v1", "v1"], "{answers:?}");
    assert_eq!(answers[1], json!(true), "{answers:?}");
    let later = declared(&answers[2]);
    assert!(
        !later.is_empty() && !later.contains(&"v1".to_owned()),
        "{answers:?}"
    );
}

#[test]
fn an_upstream_servers_progress_reaches_the_client_of_the_call() {
    let server = stdio_server(&["--mcp", &fragile()]);
    let answers = drive(
        json!({"steps": [{
            "op": "call", "tool": "run_code", "progress": true,
            "args": {"code": "return await tools.mcp__fragile__progress({ steps: 3 });", "description": "Progress"},
        }]}),
        "stdio",
        &server,
    );
    assert_eq!(
        answers[0]["structured"]["result"],
        json!({"result": "done"}),
        "{answers:?}"
    );
    let messages: Vec<&str> = answers[0]["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(|p| p[1].as_str())
        .collect();
    for step in 1..=3 {
        let expected = format!("fragile: step {step} of 3");
        assert!(messages.contains(&expected.as_str()), "{messages:?}");
    }
    let values: Vec<f64> = answers[0]["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(|p| p[0].as_f64())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress grows: {values:?}"
    );
}

/// `fixtures/mcp-servers/fragile.py` over streamable HTTP on a free port (killed on drop).
struct HttpUpstream {
    _child: codemode_e2e::Reaped,
    url: String,
}

fn http_upstream() -> HttpUpstream {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("python3")
        .arg(repo().join("fixtures/mcp-servers/fragile.py"))
        .args(["http", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the HTTP upstream did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    HttpUpstream {
        _child: codemode_e2e::Reaped(child),
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

#[test]
fn an_upstream_at_a_url_is_reached_over_http_with_headers_from_the_environment() {
    let upstream = http_upstream();
    let dir = temp_dir("mcp-remote");
    let config = dir.join("servers.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"remote": {
            "url": upstream.url,
            "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}"},
        }}})
        .to_string(),
    )
    .unwrap();
    let config = config.to_str().expect("a UTF-8 path");
    let program = "return [await tools.mcp__remote__ok({ text: 'over http' }), await tools.mcp__remote__authorization({})];";
    let out = output_with_stdin(
        Command::new(binary())
            .args(["run", "--json", "--config", config])
            .env("REMOTE_TOKEN", "t0ken"),
        program,
    );
    assert_eq!(
        document(&out)["result"],
        json!([{"result": "over http"}, {"result": "Bearer t0ken"}]),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A header naming a variable that is not set is a usage error, before anything runs.
    let out = output_with_stdin(
        Command::new(binary())
            .args(["run", "--json", "--config", config])
            .env_remove("REMOTE_TOKEN"),
        program,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mcpServers.remote.headers.Authorization: ${REMOTE_TOKEN} is not set"),
        "{stderr}"
    );
}

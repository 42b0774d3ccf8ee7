//! A fleet without affinity: three `codemode mcp --http --stateless` replicas over one S3 state
//! store (a local moto server) and one key, driven by the official Python client
//! (`tests/e2e/fleet/fleet.py`, protocol 2026-07-28) with every request sent to the next
//! replica. Approvals and pausing calls come back as input-required results and resume on
//! whichever replica receives the answer, also after the replica that asked was killed.

use std::path::Path;
use std::process::{Command, Stdio};

use codemode_e2e::{announced_url, codemode_binary, temp_dir, Reaped};
use serde_json::{json, Value};

use crate::durable::s3::S3Server;

const KEY: &str = "the fleet's one state key, 32 bytes or more";

/// A `codemode mcp` process (killed on drop) and the URL it serves at.
struct Replica {
    child: Reaped,
    url: String,
}

fn replica(s3: &S3Server, unused_state: &Path) -> Replica {
    let mut command = stateless();
    s3.serve(&mut command);
    command
        .args(["--ask", "echo", "--pause-on", "read_file"])
        .args(["--state", "s3://fleet/paused"])
        .env("CODEMODE_STATE_KEY", KEY)
        .env("CODEMODE_STATE_DIR", unused_state);
    serve(command)
}

/// `codemode mcp --http 127.0.0.1:0 --stateless --builtins`, to be given more.
fn stateless() -> Command {
    let mut command = Command::new(codemode_binary());
    command.args(["mcp", "--http", "127.0.0.1:0", "--stateless", "--builtins"]);
    command
}

/// Starts `command` and waits for the address it serves at.
fn serve(mut command: Command) -> Replica {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn codemode mcp");
    let (url, line) = announced_url(&mut child);
    assert!(line.contains("(stateless)"), "{line}");
    Replica {
        child: Reaped(child),
        url,
    }
}

#[test]
fn approvals_and_pauses_resume_on_any_replica_of_a_stateless_fleet() {
    let temp = temp_dir("fleet");
    let s3 = S3Server::start("fleet", &temp.join("moto.log"));
    let unused = temp.join("unused");
    let replicas: Vec<Replica> = (0..3).map(|_| replica(&s3, &unused)).collect();
    let list: Vec<Value> = replicas
        .iter()
        .map(|r| json!({"url": r.url, "pid": r.child.0.id()}))
        .collect();
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/fleet/fleet.py");
    let out = Command::new("python3")
        .arg(driver)
        .arg(Value::Array(list).to_string())
        .output()
        .expect("python3 with the `mcp` package (pip install -r tests/toolchain/requirements.txt)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| {
            panic!(
                "{e}: the client failed: {}\nstdout: {stdout}",
                String::from_utf8_lossy(&out.stderr)
            )
        });

    // The question and its answer reach different replicas; the run resumes on the second.
    let approved = &report["approved"];
    assert_eq!(
        approved["structured"]["result"],
        json!({"ship": true}),
        "{report}"
    );
    assert_eq!(
        approved["asked"],
        json!(["Allow tool \"echo\" with {\"ship\":true}?"])
    );
    let served = approved["replicas"].as_array().expect("replicas");
    assert_eq!(served.len(), 2, "asked, then answered: {approved}");
    assert_ne!(served[0], served[1]);

    assert_eq!(
        report["declined"]["structured"]["result"], "ToolCallError: tool \"echo\" was not approved",
        "{report}"
    );
    let reply = &report["reply"];
    assert_eq!(
        reply["structured"],
        json!({"logs": ["asking"], "result": {"plan": "the plan", "shouted": "THE PLAN"}}),
        "{report}"
    );
    assert!(
        reply["asked"][0]
            .as_str()
            .is_some_and(|q| q
                .starts_with("The program called tool \"read_file\" with {\"path\":\"plan.md\"}")),
        "{reply}"
    );

    // Resumed once: the same answer again is refused, and so is a forged state.
    let replayed = &report["replayed"];
    assert_eq!(replayed["keys"], json!(["approval:1"]));
    assert_eq!(
        replayed["first"]["structured"]["result"],
        json!({"ship": true}),
        "{replayed}"
    );
    assert_eq!(replayed["again"]["isError"], true, "{replayed}");
    assert!(
        replayed["again"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("was already resumed; a paused run resumes once")),
        "{replayed}"
    );
    assert!(
        replayed["forged"]["error"]
            .as_str()
            .is_some_and(|t| t.contains("requestState: it is not authentic")),
        "{replayed}"
    );

    // The replica that asked was killed before the answer: another one resumes the run.
    let killed = &report["killed"];
    assert_eq!(
        killed["structured"]["result"],
        json!({"ship": true}),
        "{report}"
    );
    let dead = report["killed_replicas"]
        .as_array()
        .expect("killed replicas");
    assert_eq!(dead.len(), 1, "{report}");
    assert_eq!(killed["replicas"][0], dead[0]);
    assert_ne!(killed["replicas"][1], dead[0]);
    assert_eq!(report["after"]["structured"]["result"], "still serving");
    assert!(
        !unused.exists(),
        "nothing was kept outside the shared store"
    );
}

#[test]
fn an_older_client_is_served_request_by_request() {
    // The official client's 2025-11-25 session: `initialize`, then each request on its own.
    let server = serve(stateless());
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/mcp/drive.py");
    let plan = json!({"steps": [
        {"op": "list"},
        {"op": "call", "tool": "run_code", "args": {"code": "return await tools.echo({ old: true });", "description": "Older client"}},
    ]});
    let out = Command::new("python3")
        .arg(driver)
        .arg(plan.to_string())
        .args(["http", &server.url])
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answers: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(answers[0][0]["name"], "run_code", "{answers}");
    assert_eq!(
        answers[1]["structured"]["result"],
        json!({"old": true}),
        "{answers}"
    );
}

#[test]
fn a_stateless_server_refuses_what_needs_a_session() {
    let out = Command::new(codemode_binary())
        .args(["mcp", "--http", "127.0.0.1:0", "--stateless", "--exec"])
        .stdin(Stdio::null())
        .output()
        .expect("codemode runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--stateless cannot serve --exec"),
        "{stderr}"
    );
    let out = Command::new(codemode_binary())
        .args(["mcp", "--stateless"])
        .stdin(Stdio::null())
        .output()
        .expect("codemode runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--http"));
}

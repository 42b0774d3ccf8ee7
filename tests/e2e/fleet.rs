//! A fleet without affinity: three `codemode mcp --http --stateless` replicas over one S3 state
//! store (a local moto server) and one key, driven by the official Python client
//! (`tests/e2e/fleet/fleet.py`, protocol 2026-07-28) with every request sent to the next
//! replica. Approvals and pausing calls come back as input-required results and resume on
//! whichever replica receives the answer, also after the replica that asked was killed; a task
//! whose replica is killed is reported failed by another once its lease lapses.

use std::path::Path;
use std::process::{Command, Stdio};

use codemode_e2e::mcp_wire::Client;
use codemode_e2e::{codemode_binary, spawn_announced, temp_dir, url_address, Reaped};
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
        .args([
            "--ask",
            "echo",
            "--pause-on",
            "read_file",
            "--task-after-ms",
            "300",
        ])
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
    let (child, url, line) = spawn_announced(&mut command);
    assert!(line.contains("(stateless)"), "{line}");
    Replica {
        child: Reaped(child),
        url,
    }
}

/// Runs the Python driver `script` (under `tests/e2e/`) with `args`, and parses the JSON its
/// last line prints.
fn driver(script: &str, args: &[&str]) -> Value {
    let path = codemode_e2e::manifest_dir().join("e2e").join(script);
    let out = Command::new("python3")
        .arg(path)
        .args(args)
        .output()
        .expect("python3 with the `mcp` package (pip install -r tests/toolchain/requirements.txt)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
        panic!(
            "{e}: {script} failed: {}\nstdout: {stdout}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
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
    let report = driver("fleet/fleet.py", &[&Value::Array(list).to_string()]);

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
            .is_some_and(|t| t.contains("requestState: it does not match this request")),
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

    let alive: Vec<&Replica> = replicas
        .iter()
        .enumerate()
        .filter(|(i, _)| !dead.iter().any(|d| d.as_u64() == Some(*i as u64)))
        .map(|(_, r)| r)
        .collect();
    tasks_across(&alive);
}

/// Calls that outlive the threshold become tasks, which any replica reports, cancels and
/// resumes: `tests/e2e/fleet/tasks.py` speaks the tasks extension over HTTP.
fn tasks_across(replicas: &[&Replica]) {
    let urls: Vec<&str> = replicas.iter().map(|r| r.url.as_str()).collect();
    let report = driver("fleet/tasks.py", &[&json!(urls).to_string()]);

    // A quick call is answered, not made a task.
    assert_eq!(
        report["quick"]["answer"]["structuredContent"]["result"], 1,
        "{report}"
    );
    let completed = &report["completed"];
    assert_eq!(completed["created"]["resultType"], "task", "{report}");
    assert_eq!(completed["created"]["status"], "working");
    assert_eq!(completed["task"]["status"], "completed", "{report}");
    assert_eq!(
        completed["task"]["result"]["structuredContent"]["result"],
        "late"
    );
    let polled = completed["polled"].as_array().expect("replicas polled");
    assert!(
        polled.iter().any(|r| r != &completed["asked_on"]),
        "another replica answered: {completed}"
    );

    let cancelled = &report["cancelled"];
    assert_ne!(cancelled["cancelled_on"], cancelled["asked_on"]);
    assert_eq!(cancelled["answer"]["resultType"], "complete", "{cancelled}");
    assert_eq!(cancelled["after"]["status"], "cancelled", "{cancelled}");
    assert_eq!(
        cancelled["later"]["status"], "cancelled",
        "the run's end does not undo it"
    );
    assert!(
        cancelled["again"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already ended (cancelled)")),
        "{cancelled}"
    );

    let input = &report["input"];
    assert_eq!(input["waiting"]["status"], "input_required", "{input}");
    assert!(
        input["waiting"]["inputRequests"]["approval:1"].is_object(),
        "{input}"
    );
    assert!(
        input["waiting"].get("requestState").is_none(),
        "codemode's own"
    );
    assert_ne!(input["updated_on"], input["asked_on"]);
    assert_eq!(input["task"]["status"], "completed", "{input}");
    assert_eq!(
        input["task"]["result"]["structuredContent"]["result"],
        json!({"ask": 1})
    );
    assert!(
        report["unknown"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no task 000")),
        "{report}"
    );
}

#[test]
fn an_older_client_is_served_request_by_request() {
    // The official client's 2025-11-25 session: `initialize`, then each request on its own.
    let server = serve(stateless());
    let plan = json!({"steps": [
        {"op": "list"},
        {"op": "call", "tool": "run_code", "args": {"code": "return await tools.echo({ old: true });", "description": "Older client"}},
    ]});
    let answers = driver("mcp/drive.py", &[&plan.to_string(), "http", &server.url]);
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

#[test]
fn a_task_whose_replica_dies_is_reported_failed_by_another() {
    // Two replicas over one state directory; leases renewed every 200 ms.
    let temp = temp_dir("fleet-lease");
    let state = temp.join("state");
    let replica = || {
        let mut command = stateless();
        command
            .args([
                "--task-after-ms",
                "100",
                "--task-lease-ms",
                "200",
                "--state",
            ])
            .arg(&state)
            .env("CODEMODE_STATE_KEY", KEY);
        serve(command)
    };
    let (mut running, other) = (replica(), replica());
    let asker = Client::new(url_address(&running.url)).with_tasks();
    let poller = Client::new(url_address(&other.url)).with_tasks();
    let arguments = json!({
        "code": "await new Promise((r) => setTimeout(r, 600000)); return 'never';",
        "description": "lease",
    });
    let created = asker.run_code(&arguments, json!({}));
    assert_eq!(created["resultType"], "task", "{created}");
    let task_id = created["taskId"].as_str().expect("a task id");
    let working = poller.task(task_id);
    assert_eq!(working["status"], "working", "{working}");

    // The replica running the task dies without a word.
    running.child.0.kill().expect("SIGKILL");
    running.child.0.wait().expect("reaped");
    // Polled until the other replica says so; the bound only guards against a hang.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let failed = loop {
        let task = poller.task(task_id);
        if task["status"] != "working" {
            break task;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still working: {task}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(failed["status"], "failed", "{failed}");
    let message = failed["statusMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("the process running this task stopped"),
        "{failed}"
    );
    // Said once, kept: the same again, and cancelling it is refused as ended.
    assert_eq!(poller.task(task_id)["status"], "failed");
    let cancel = poller.request("tasks/cancel", json!({"taskId": task_id}), task_id);
    assert!(
        cancel["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already ended (failed)")),
        "{cancel}"
    );
}

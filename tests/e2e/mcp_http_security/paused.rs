//! Paused runs of an HTTP server's clients, each client a bearer token of its own: a
//! `requestState` opens only for the client it was issued to and the arguments it answered,
//! and a refusal names no run and no call; a task is its client's alone, and its document in
//! the store shows neither the program nor a `requestState`; a pause past a client's quota is
//! not written, and the program is told why.

use std::path::Path;

use codemode_e2e::mcp_wire::Client;
use serde_json::{json, Value};

use super::*;

const ALICE: &str = "alice-5e8d3f1a0b4f1c0d6e9b";
const BOB: &str = "bob-c5e8d3f1a0b4f1c0d6e9b";
const KEY: &str = "one state key, 32 characters or more";

/// A server with a token per client, approvals of `echo` that pause into a state directory
/// (its key in the environment, as a fleet's would be), tasks after 300 ms, and `extra`.
struct Served {
    _server: Server,
    alice: Client,
    bob: Client,
    state: PathBuf,
    _dir: TempDir,
}

fn serve(label: &str, extra: &[&str]) -> Served {
    let dir = temp_dir(label);
    let token = |name: &str, token: &str| {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("{token}\n")).expect("write a token file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        path.display().to_string()
    };
    let (alice, bob) = (token("alice", ALICE), token("bob", BOB));
    let state = dir.join("state");
    let state_arg = state.display().to_string();
    let mut args = vec![
        "--builtins",
        "--ask",
        "echo",
        "--pause-on-ask",
        "--task-after-ms",
        "300",
        "--state",
        &state_arg,
        "--auth-token-file",
        &alice,
        "--auth-token-file",
        &bob,
    ];
    args.extend_from_slice(extra);
    let server = Server::start(&args, &[("CODEMODE_STATE_KEY", KEY)]);
    Served {
        alice: Client::new(server.addr).with_token(ALICE),
        bob: Client::new(server.addr).with_token(BOB),
        _server: server,
        state,
        _dir: dir,
    }
}

fn retry(client: &Client, arguments: &Value, state: &str, answers: Value) -> Value {
    client.run_code(
        arguments,
        json!({"requestState": state, "inputResponses": answers}),
    )
}

fn error_message(answer: &Value) -> &str {
    answer["error"]["message"].as_str().unwrap_or_else(|| {
        panic!("a protocol error: {answer}");
    })
}

#[test]
fn a_request_state_opens_only_for_its_client_and_its_arguments() {
    let served = serve("http-paused-bound", &[]);
    let arguments =
        json!({"code": "return await tools.echo({ ship: true });", "description": "bound"});
    let asked = served.alice.run_code(&arguments, json!({}));
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let state = asked["requestState"].as_str().expect("a requestState");
    let run_id = state.split('.').nth(1).expect("a run id in it");
    assert!(state.starts_with("cm2."), "{state}");
    let keys: Vec<&String> = asked["inputRequests"]
        .as_object()
        .expect("questions")
        .keys()
        .collect();
    assert_eq!(keys, ["approval:1"]);
    let accept = || json!({"approval:1": {"action": "accept", "content": {}}});
    let says_nothing_more = |message: &str| {
        assert!(
            message.contains("requestState: it does not match this request"),
            "{message}"
        );
        for hidden in [run_id, "approval", "echo", "call 1", "1 ("] {
            assert!(!message.contains(hidden), "{hidden} in {message}");
        }
    };

    // Bob, with Alice's state and her very arguments.
    let stolen = retry(&served.bob, &arguments, state, accept());
    says_nothing_more(error_message(&stolen));
    // Alice, with other arguments.
    let changed =
        json!({"code": "return await tools.echo({ ship: false });", "description": "bound"});
    says_nothing_more(error_message(&retry(
        &served.alice,
        &changed,
        state,
        accept(),
    )));
    // A changed state, and one of the earlier, unbound kind.
    let (body, tag) = state.rsplit_once('.').expect("a tag");
    let flipped = if tag.starts_with('0') { "1" } else { "0" };
    let tampered = format!("{body}.{flipped}{}", &tag[1..]);
    says_nothing_more(error_message(&retry(
        &served.alice,
        &arguments,
        &tampered,
        accept(),
    )));
    let earlier = format!("cm1.{}", &state[4..]);
    let refused = retry(&served.alice, &arguments, &earlier, accept());
    assert!(
        error_message(&refused).contains("earlier version of codemode"),
        "{refused}"
    );
    // The right state with an answer to a call the run does not wait on: named, and nothing
    // else (the run stays resumable).
    let wrong = retry(
        &served.alice,
        &arguments,
        state,
        json!({"approval:7": {"action": "accept", "content": {}}}),
    );
    assert_eq!(wrong["isError"], true, "{wrong}");
    let said = text(&wrong);
    assert!(
        said.contains("call \"7\", which is not a call this paused run waits on"),
        "{said}"
    );
    assert!(
        !said.contains(run_id) && !said.contains("waits on 1"),
        "{said}"
    );

    // Alice's own retry resumes the run, once.
    let done = retry(&served.alice, &arguments, state, accept());
    assert_eq!(
        done["structuredContent"]["result"],
        json!({"ship": true}),
        "{done}"
    );
    let again = retry(&served.alice, &arguments, state, accept());
    assert!(text(&again).contains("already resumed"), "{again}");
}

/// Polls `tasks/get` until the task's status is one of `statuses`; a bound only against hangs.
fn until(client: &Client, task_id: &str, statuses: &[&str]) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let task = client.task(task_id);
        let status = task["status"].as_str().unwrap_or_default();
        if statuses.contains(&status) {
            return task;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task {task_id} never became {statuses:?}: {task}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every file under `dir`, read.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push((path.clone(), std::fs::read(&path).expect("read")));
        }
    }
    found
}

#[test]
fn a_task_is_its_clients_and_its_document_shows_neither_program_nor_state() {
    let served = serve("http-paused-task", &[]);
    let alice = served.alice.clone().with_tasks();
    let bob = served.bob.clone().with_tasks();
    let marker = "the-secret-plan-7d1f";
    let arguments = json!({
        "code": format!("await new Promise((r) => setTimeout(r, 1000)); return await tools.echo({{ plan: '{marker}' }});"),
        "description": "task",
    });
    let created = alice.run_code(&arguments, json!({}));
    assert_eq!(created["resultType"], "task", "{created}");
    let task_id = created["taskId"].as_str().expect("a task id").to_owned();
    let waiting = until(&alice, &task_id, &["input_required", "failed", "completed"]);
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    assert!(waiting.get("requestState").is_none(), "{waiting}");

    // On disk, sealed: no program text, nothing of the question, no requestState.
    let tasks = files_under(&served.state.join("tasks"));
    assert!(tasks.len() >= 2, "a document and a lease: {tasks:?}");
    for (path, bytes) in &tasks {
        let shown = String::from_utf8_lossy(bytes);
        for hidden in [
            marker,
            "cm2.",
            "cm1.",
            "requestState",
            "input_required",
            "setTimeout",
        ] {
            assert!(!shown.contains(hidden), "{hidden} in {}", path.display());
        }
    }

    // Another client cannot see, answer or cancel it: to Bob it does not exist.
    let unknown = bob.task(&task_id);
    assert!(
        error_message(&unknown).contains(&format!("no task {task_id}")),
        "{unknown}"
    );
    let answers = json!({"approval:1": {"action": "accept", "content": {}}});
    let update = |client: &Client| {
        client.request(
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": answers}),
            &task_id,
        )
    };
    assert!(
        error_message(&update(&bob)).contains("no task"),
        "Bob's answer is refused"
    );
    let cancel = bob.request("tasks/cancel", json!({"taskId": task_id}), &task_id);
    assert!(error_message(&cancel).contains("no task"), "{cancel}");

    // Alice answers; the run resumes and completes.
    let updated = update(&alice);
    assert!(updated.get("error").is_none(), "{updated}");
    let done = until(&alice, &task_id, &["completed", "failed"]);
    assert_eq!(
        done["result"]["structuredContent"]["result"],
        json!({"plan": marker}),
        "{done}"
    );
}

#[test]
fn a_pause_past_the_clients_quota_is_refused_and_the_program_told_why() {
    let served = serve("http-paused-quota", &["--state-quota-per-client-mb", "1"]);
    // About 2 MiB of random doubles: a record that cannot fit 1 MiB.
    let big = json!({
        "code": "const noise = Array.from({ length: 300000 }, () => Math.random()); try { await tools.echo({ n: noise.length }); return 'paused'; } catch (e) { return `${e.name}: ${e.message}`; }",
        "description": "quota",
    });
    let refused = served.alice.run_code(&big, json!({}));
    let result = refused["structuredContent"]["result"]
        .as_str()
        .unwrap_or_else(|| panic!("the program's own answer: {refused}"));
    assert!(
        result.starts_with("ToolCallError: the run could not pause: this client's paused runs"),
        "{result}"
    );
    assert!(
        result.contains("past the quota of 1.0 MiB per client (--state-quota-per-client-mb)"),
        "{result}"
    );
    let runs = files_under(&served.state.join("runs"));
    assert!(runs.is_empty(), "nothing written: {runs:?}");

    // A small pause still fits, and so does Bob's.
    let small = json!({"code": "return await tools.echo({ n: 1 });", "description": "quota"});
    for client in [&served.alice, &served.bob] {
        let asked = client.run_code(&small, json!({}));
        assert_eq!(asked["resultType"], "input_required", "{asked}");
    }
}

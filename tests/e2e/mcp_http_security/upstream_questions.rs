//! An upstream server's questions reach a client of MCP 2026-07-28 of a server that keeps
//! paused runs: the upstream asks in an input-required result, the run pauses with the call
//! pending, the client is asked in an input-required result of its own, and its answers
//! resume the run, which makes the upstream call again with them and the upstream's state.

use codemode_e2e::mcp_wire::Client;
use serde_json::{json, Value};

use super::*;

const KEY: &str = "one state key, 32 characters or more";

fn repo() -> PathBuf {
    codemode_e2e::manifest_dir().join("..")
}

struct Upstreamed {
    _server: Server,
    client: Client,
    log: PathBuf,
    config: String,
    state: String,
    _dir: TempDir,
}

fn serve(label: &str) -> Upstreamed {
    let dir = temp_dir(label);
    let log = dir.join("calls.jsonl");
    let config = dir.join("servers.json");
    let script = repo().join("fixtures/mcp-servers/mrtr.py");
    std::fs::write(
        &config,
        json!({"mcpServers": {"mrtr": {
            "command": "python3",
            "args": [script.display().to_string()],
            "env": {"MRTR_LOG": log.display().to_string()},
        }}})
        .to_string(),
    )
    .expect("write the configuration");
    let state = dir.join("state").display().to_string();
    let config = config.display().to_string();
    let server = Server::start(
        &["--config", &config, "--state", &state],
        &[("CODEMODE_STATE_KEY", KEY)],
    );
    Upstreamed {
        client: Client::new(server.addr),
        _server: server,
        log,
        config,
        state,
        _dir: dir,
    }
}

fn program(code: &str) -> Value {
    json!({"code": code, "description": "ship"})
}

/// The questions of an input-required answer, and its state.
fn asked(answer: &Value) -> (serde_json::Map<String, Value>, String) {
    assert_eq!(answer["resultType"], "input_required", "{answer}");
    let questions = answer["inputRequests"]
        .as_object()
        .expect("questions")
        .clone();
    let state = answer["requestState"].as_str().expect("a requestState");
    (questions, state.to_owned())
}

fn answer(client: &Client, arguments: &Value, state: &str, answers: Value) -> Value {
    client.run_code(
        arguments,
        json!({"requestState": state, "inputResponses": answers}),
    )
}

#[test]
fn an_upstream_question_pauses_the_run_and_its_answer_goes_back_to_the_upstream() {
    let served = serve("upstream-questions");
    let arguments = program(
        "const out = await tools.mcp__mrtr__ship({ crate: \"serde\" });\nreturn `${out}, after the pause`;",
    );
    let (questions, state) = asked(&served.client.run_code(&arguments, json!({})));
    let keys: Vec<&String> = questions.keys().collect();
    assert_eq!(keys, ["input:1:confirm"]);
    let question = &questions["input:1:confirm"];
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(
        question["params"]["message"],
        "Tool \"mcp__mrtr__ship\" asks: Ship serde?"
    );
    assert_eq!(
        question["params"]["requestedSchema"]["properties"]["ok"]["type"],
        "boolean"
    );

    let done = answer(
        &served.client,
        &arguments,
        &state,
        json!({"input:1:confirm": {"action": "accept", "content": {"ok": true}}}),
    );
    assert_eq!(done["isError"], false, "{done}");
    assert!(
        text(&done).contains("shipped serde, after the pause"),
        "{done}"
    );
    // The upstream was called twice: the second time with the answer and its own state.
    let calls: Vec<Value> = std::fs::read_to_string(&served.log)
        .expect("the upstream's log")
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0]["arguments"], json!({"crate": "serde"}));
    assert_eq!(calls[0].get("requestState"), None);
    assert_eq!(calls[1]["arguments"], json!({"crate": "serde"}));
    assert_eq!(calls[1]["requestState"], "asked:serde");
    assert_eq!(
        calls[1]["inputResponses"],
        json!({"confirm": {"action": "accept", "content": {"ok": true}}})
    );
}

#[test]
fn each_round_of_upstream_questions_is_a_pause_and_a_declined_one_reaches_the_upstream() {
    let served = serve("upstream-rounds");
    let arguments = program(
        "const a = await tools.mcp__mrtr__ship({ crate: \"a\" });\nconst b = await tools.mcp__mrtr__ship({ crate: \"b\" });\nreturn [a, b];",
    );
    // `a`: accepted with a note wanted, so the upstream asks a second time.
    let (_, state) = asked(&served.client.run_code(&arguments, json!({})));
    let again = answer(
        &served.client,
        &arguments,
        &state,
        json!({"input:1:confirm": {"action": "accept", "content": {"ok": true, "note": true}}}),
    );
    let (questions, state) = asked(&again);
    let keys: Vec<&String> = questions.keys().collect();
    assert_eq!(keys, ["input:1:note"]);
    let noted = answer(
        &served.client,
        &arguments,
        &state,
        json!({"input:1:note": {"action": "accept", "content": {"note": "fragile"}}}),
    );
    // `b`: declined.
    let (questions, state) = asked(&noted);
    assert!(questions.contains_key("input:2:confirm"), "{noted}");
    let done = answer(
        &served.client,
        &arguments,
        &state,
        json!({"input:2:confirm": {"action": "decline"}}),
    );
    let out = text(&done);
    assert!(
        out.contains("shipped a: fragile") && out.contains("kept b (decline)"),
        "{done}"
    );
    // A reply that is not an answer to the question is refused, naming what is wrong.
    let (_, state) = asked(&served.client.run_code(&arguments, json!({})));
    let refused = answer(
        &served.client,
        &arguments,
        &state,
        json!({"input:1:confirm": {"content": {"ok": true}}}),
    );
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("inputResponses") && message.contains("action"),
        "{refused}"
    );
}

/// `codemode resume` of a run paused for an upstream's questions, with its tools from the same
/// configuration: left unanswered, it pauses again and lists the questions by key; answered
/// with an object of elicitation results by key, the call is made again with them.
#[test]
fn the_cli_resumes_a_run_paused_for_upstream_questions() {
    let served = serve("upstream-questions-cli");
    let arguments = program("return await tools.mcp__mrtr__ship({ crate: \"rand\" });");
    let (_, state) = asked(&served.client.run_code(&arguments, json!({})));
    let run_id = state
        .split('.')
        .nth(1)
        .expect("a run id in the requestState");
    let resume = |run: &str, extra: &[&str]| {
        Command::new(binary())
            .args([
                "resume",
                run,
                "--state",
                &served.state,
                "--config",
                &served.config,
            ])
            .args(extra)
            .env("CODEMODE_STATE_KEY", KEY)
            .stdin(Stdio::null())
            .output()
            .expect("codemode resume")
    };
    let again = resume(run_id, &[]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("waiting for answers by key") && stderr.contains("confirm: Ship rand?"),
        "{stderr}"
    );
    let next = stderr
        .split("paused: run ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the run id of the new pause");
    let done = resume(
        next,
        &[
            "--reply",
            r#"1={"confirm": {"action": "accept", "content": {"ok": true}}}"#,
        ],
    );
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&done.stdout).trim(), "shipped rand");
}

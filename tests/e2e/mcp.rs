//! MCP both ways with real peers: upstream servers from the npm registry
//! (`@modelcontextprotocol/server-memory`, `@modelcontextprotocol/server-everything`) and a
//! misbehaving server written with the official Python SDK (`fixtures/mcp-servers/fragile.py`)
//! behind `codemode run`; and `codemode mcp` driven by the official Python client
//! (`tests/e2e/mcp/drive.py`) over stdio and streamable HTTP; and a hostile server written by
//! hand (`fixtures/mcp-servers/hostile.py`). `.ci/run` installs all of them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use codemode_e2e::{
    codemode_binary as binary, host_pid, output_with_stdin, spawn_announced, temp_dir,
};
use serde_json::{json, Value};

mod hostile_upstream;
mod upstream_start;
mod upstreams;

fn repo() -> PathBuf {
    codemode_e2e::manifest_dir().join("..")
}

/// An npm-installed MCP server from `tests/toolchain` (`npm ci --prefix tests/toolchain`).
fn server(bin: &str) -> String {
    let path = repo().join("tests/toolchain/node_modules/.bin").join(bin);
    assert!(
        path.exists(),
        "{} is missing: run `npm ci --prefix tests/toolchain` (the test command does)",
        path.display()
    );
    path.display().to_string()
}

fn everything() -> String {
    format!("everything={} stdio", server("mcp-server-everything"))
}

fn fragile() -> String {
    format!(
        "fragile=python3 {}",
        repo().join("fixtures/mcp-servers/fragile.py").display()
    )
}

fn run(args: &[&str], program: &str) -> Output {
    output_with_stdin(
        Command::new(binary()).args(["run", "--json"]).args(args),
        program,
    )
}

fn document(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {text:?}, stderr {:?}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs the Python client's `plan` against `target` and returns its answers.
pub(crate) fn drive(plan: Value, transport: &str, target: &[String]) -> Vec<Value> {
    let out = Command::new("python3")
        .arg(repo().join("tests/e2e/mcp/drive.py"))
        .arg(plan.to_string())
        .arg(transport)
        .args(target)
        .output()
        .expect("python3 with the `mcp` package (pip install -r tests/toolchain/requirements.txt)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    match serde_json::from_str::<Value>(last) {
        Ok(Value::Array(answers)) => answers,
        _ => panic!(
            "the client failed: {}\nstdout: {stdout}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

pub(crate) fn stdio_server(args: &[&str]) -> Vec<String> {
    let mut target = vec![binary().display().to_string(), "mcp".to_owned()];
    target.extend(args.iter().map(|a| a.to_string()));
    target
}

pub(crate) fn run_code(code: &str) -> Value {
    json!({"op": "call", "tool": "run_code", "args": {"code": code, "description": "Test program"}})
}

#[test]
fn programs_call_real_upstream_servers_through_the_pipeline() {
    let dir = temp_dir("mcp-upstream");
    let memory_file = dir.join("memory.jsonl");
    let config = dir.join("servers.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"memory": {
            "command": server("mcp-server-memory"),
            "env": {"MEMORY_FILE_PATH": memory_file.display().to_string()}
        }}})
        .to_string(),
    )
    .unwrap();
    let program = r#"
        await tools.mcp__memory__create_entities({ entities: [
          { name: "Ada", entityType: "person", observations: ["wrote the first program"] },
          { name: "Analytical Engine", entityType: "machine", observations: [] },
        ] });
        const found = await tools.mcp__memory__open_nodes({ names: ["Ada"] });
        const sums = await Promise.all([1, 2, 3, 4, 5].map((a) => tools["mcp__everything__get-sum"]({ a, b: 10 })));
        const refused = [];
        try { await tools["mcp__everything__get-sum"]({ a: "one", b: 2 }); } catch (e) { refused.push(e.message); }
        try { await tools.mcp__memory__delete_entities({ entityNames: ["Ada"] }); } catch (e) { refused.push(e.message); }
        const still = await tools.mcp__memory__read_graph({});
        return { found, sums, refused, names: still.entities.map((e) => e.name) };
    "#;
    let config_arg = config.display().to_string();
    let out = run(
        &[
            "--config",
            &config_arg,
            "--mcp",
            &everything(),
            "--deny",
            "mcp__memory__delete_entities",
            // The refused `get-sum` literal is the pipeline's to refuse here.
            "--no-preflight",
        ],
        program,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = document(&out);
    let result = &doc["result"];
    assert_eq!(
        result["found"]["entities"][0],
        json!({"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]})
    );
    assert_eq!(result["sums"][4], "The sum of 5 and 10 is 15.");
    assert_eq!(
        result["refused"],
        json!([
            "invalid arguments: \"a\" must be a number",
            "tool \"mcp__memory__delete_entities\" is denied by policy"
        ])
    );
    assert_eq!(result["names"], json!(["Ada", "Analytical Engine"]));
    let calls = doc["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 10);
    assert!(calls[2]["tool"] == "mcp__everything__get-sum" && calls[2]["outcome"] == "resolved");
    assert_eq!(calls[7]["outcome"], "rejected");
    // The SDK declares the upstream tools, typed from their schemas.
    let sdk = Command::new(binary())
        .args(["sdk", "--config", &config_arg, "--mcp", &everything()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&sdk.stdout);
    assert!(
        text.contains("  \"mcp__everything__get-sum\": {\n    /** First number */\n    a: number;"),
        "{text}"
    );
    assert!(
        text.contains("  mcp__memory__read_graph: {\n    entities: {"),
        "{text}"
    );
}

#[test]
fn upstream_failures_reach_the_program_naming_the_server_and_never_hang() {
    let program = r#"
        const out = [];
        const attempt = async (f) => { try { out.push(await f()); } catch (e) { out.push(`${e.toolName}: ${e.message}`); } };
        await attempt(() => tools.mcp__fragile__ok({ text: "first" }));
        await attempt(() => tools.mcp__fragile__fail({ message: "upstream says no" }));
        await attempt(() => tools.mcp__fragile__die({}));
        await attempt(() => tools.mcp__fragile__ok({}));
        // Until the new process is up: each refusal in between says it is being started again.
        for (;;) {
            try { out.push(await tools.mcp__fragile__ok({ text: "again" })); break; }
            catch (e) { if (!e.message.includes("codemode starts it again")) { out.push(e.message); break; } }
            await new Promise((resolve) => setTimeout(resolve, 50));
        }
        return out;
    "#;
    let out = run(&["--mcp", &fragile()], program);
    let result = &document(&out)["result"];
    assert_eq!(result[0], json!({"result": "first"}));
    assert!(
        result[1]
            .as_str()
            .unwrap()
            .starts_with("mcp__fragile__fail: Error executing tool fail"),
        "{result}"
    );
    // The call in flight fails with the exit; the next, made before the server is back, says
    // it is being started again; once the backoff is over, a call reaches the new process.
    let exited = "mcp server \"fragile\" is unavailable: its process exited (exit status: 3)";
    let text = |i: usize| result[i].as_str().unwrap_or_default().to_owned();
    assert!(
        text(2).starts_with(&format!("mcp__fragile__die: {exited}")),
        "{result}"
    );
    assert!(
        text(3).starts_with(&format!(
            "mcp__fragile__ok: {exited}; codemode starts it again"
        )),
        "{result}"
    );
    assert_eq!(result[4], json!({"result": "again"}), "{result}");
    let garbled = run(
        &["--mcp", &fragile()],
        "const out = []; for (const f of [() => tools.mcp__fragile__garble({}), () => tools.mcp__fragile__ok({})]) { try { await f(); } catch (e) { out.push(e.message); } } return out;",
    );
    let why = "mcp server \"fragile\" is unavailable: it wrote a line that is not JSON-RPC: \"this is not json\"";
    for message in document(&garbled)["result"]
        .as_array()
        .expect("two messages")
    {
        assert!(
            message.as_str().is_some_and(|m| m.starts_with(why)),
            "{message}"
        );
    }
}

#[test]
fn a_server_that_cannot_start_is_reported_and_the_others_serve() {
    let out = run(
        &["--mcp", "dead=/nonexistent/mcp-server", "--mcp", &everything()],
        "return [typeof tools.mcp__dead__anything, await tools.mcp__everything__echo({ message: 'alive' })];",
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        document(&out)["result"],
        json!(["undefined", "Echo: alive"])
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mcp server \"dead\" could not start `/nonexistent/mcp-server`")
            && stderr.contains("its tools are absent"),
        "{stderr}"
    );
    let bad = run(&["--mcp", "no command"], "return 1");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected NAME=COMMAND"));
    let twice = run(&["--mcp", "a=true", "--mcp", "a=false"], "return 1");
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("two MCP servers are named \"a\""));
}

#[test]
fn codemode_mcp_serves_run_code_to_the_official_client_over_stdio() {
    let answers = drive(
        json!({"steps": [
            {"op": "list"},
            run_code("console.log('adding'); return (await Promise.all([1, 2, 3, 4, 5].map((a) => tools['mcp__everything__get-sum']({ a, b: 1 })))).length;"),
            run_code("console.log('before'); throw new Error('boom');"),
            {"op": "call", "tool": "run_code", "args": {"code": 42}},
            {"op": "call", "tool": "no_such_tool", "args": {}},
            run_code("const image = await tools['mcp__everything__get-tiny-image']({}); return image.length > 0;"),
        ]}),
        "stdio",
        &stdio_server(&["--mcp", &everything()]),
    );
    let tools = answers[0].as_array().unwrap();
    assert_eq!(tools.len(), 1, "code mode lists run_code alone: {tools:?}");
    let description = tools[0]["description"].as_str().unwrap();
    assert!(description.starts_with(
        "Execute a TypeScript program against the tools declared at the end of this description."
    ));
    assert!(description.contains("## Writing code for run_code"));
    assert!(
        description.contains("\"mcp__everything__get-sum\": {"),
        "{description}"
    );
    assert_eq!(
        tools[0]["inputSchema"]["required"],
        json!(["code", "description"])
    );
    assert_eq!(answers[1]["isError"], false);
    assert_eq!(
        answers[1]["structured"],
        json!({"logs": ["adding"], "result": 5})
    );
    assert_eq!(answers[1]["text"], "adding\n5");
    assert_eq!(answers[2]["isError"], true);
    assert_eq!(
        answers[2]["text"],
        "Error: code run failed (exception): Error: boom\n    1 | console.log('before'); throw new Error('boom');\n      |                              ^\nCaptured output:\nbefore"
    );
    assert_eq!(answers[3]["isError"], true);
    assert!(answers[3]["text"]
        .as_str()
        .unwrap()
        .starts_with("Error: invalid arguments:"));
    assert_eq!(answers[4]["error"], "unknown tool \"no_such_tool\"");
    assert_eq!(answers[5]["structured"]["result"], true);
    assert_eq!(
        answers[5]["images"],
        json!(["image/png"]),
        "images come back with the result"
    );
}

#[test]
fn codemode_mcp_lang_python_serves_python_programs_with_the_python_sdk() {
    let answers = drive(
        json!({"steps": [
            {"op": "list"},
            run_code("import asyncio\nsums = await asyncio.gather(*[tools['mcp__everything__get-sum']({'a': a, 'b': 1}) for a in range(5)])\nprint('adding')\nlen(sums)"),
            run_code("print('before')\nraise ValueError('boom')"),
        ]}),
        "stdio",
        &stdio_server(&["--lang", "python", "--mcp", &everything()]),
    );
    let tools = answers[0].as_array().unwrap();
    let description = tools[0]["description"].as_str().unwrap();
    assert!(
        description.starts_with("Execute a Python program"),
        "{description}"
    );
    assert!(description.contains("```python"), "{description}");
    assert!(
        description.contains("class ToolCallError(Exception):\n    tool_name: str"),
        "{description}"
    );
    assert_eq!(answers[1]["isError"], false, "{}", answers[1]);
    assert_eq!(
        answers[1]["structured"],
        json!({"logs": ["adding"], "result": 5})
    );
    assert_eq!(answers[2]["isError"], true);
    assert_eq!(
        answers[2]["text"],
        "Error: code run failed (exception): ValueError: boom\n    2 | raise ValueError('boom')\n      |       ^\nCaptured output:\nbefore"
    );
}

#[test]
fn a_compute_failure_with_upstream_calls_in_flight_leaves_the_next_run_healthy() {
    let dir = temp_dir("mcp-fragile");
    let log = dir.join("cancelled.log");
    let config = dir.join("fragile.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"fragile": {
            "command": "python3",
            "args": [repo().join("fixtures/mcp-servers/fragile.py").display().to_string()],
            "env": {"FRAGILE_CANCEL_LOG": log.display().to_string()}
        }}})
        .to_string(),
    )
    .unwrap();
    let answers = drive(
        json!({"steps": [
            run_code("tools.mcp__fragile__slow({ seconds: 30 }); tools.mcp__fragile__slow({ seconds: 30 }); for (;;) {}"),
            run_code("return await tools.mcp__fragile__ok({ text: 'healthy' });"),
        ]}),
        "stdio",
        &stdio_server(&[
            "--config",
            &config.display().to_string(),
            "--compute-ms",
            "300",
        ]),
    );
    assert_eq!(
        answers[0]["text"],
        format!(
            "Error: code run failed (timeout): compute budget exhausted (300ms busy, {} fuel)",
            300 * codemode_host::FUEL_PER_MS
        )
    );
    assert_eq!(
        answers[1]["structured"]["result"],
        json!({"result": "healthy"})
    );
    // The abandoned calls were cancelled at the server, not left running.
    let cancelled = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(cancelled.lines().count(), 2, "{cancelled:?}");
}

#[test]
fn ask_goes_to_the_client_as_an_elicitation() {
    let program =
        "try { return await tools.fail({ message: 'ran' }); } catch (e) { return e.message; }";
    let server = stdio_server(&["--builtins", "--ask", "fail"]);
    let answer = |elicit: Value| {
        drive(
            json!({"elicit": elicit, "steps": [run_code(program)]}),
            "stdio",
            &server,
        )[0]["structured"]["result"]
            .clone()
    };
    assert_eq!(answer(json!("accept")), "ran");
    assert_eq!(answer(json!("decline")), "the user rejected tool \"fail\"");
    assert_eq!(
        answer(json!("cancel")),
        "approval for tool \"fail\" was cancelled"
    );
    assert_eq!(
        answer(Value::Null),
        "tool \"fail\" requires approval, but no approval channel is available"
    );
}

#[test]
fn a_scoped_answer_approves_a_loop_once() {
    // Five calls of an --ask tool, two of them at once: one question when the answer is
    // scoped to the run or the session, and a declined scope declines the rest.
    let program = "const out = [];\nfor (let i = 0; i < 3; i++) {\n  try { out.push((await tools.echo({ i })).i); } catch (e) { out.push(e.message); }\n}\nconst both = await Promise.allSettled([tools.echo({ i: 3 }), tools.echo({ i: 4 })]);\nreturn [...out, ...both.map((r) => r.status === 'fulfilled' ? r.value.i : r.reason.message)];";
    let server = stdio_server(&["--builtins", "--ask", "echo"]);
    let answers = |elicit: Value, runs: usize| {
        let mut steps: Vec<Value> = (0..runs).map(|_| run_code(program)).collect();
        steps.push(json!({"op": "elicitations"}));
        drive(json!({"elicit": elicit, "steps": steps}), "stdio", &server)
    };
    let all = json!([0, 1, 2, 3, 4]);
    let run = answers(json!({"action": "accept", "content": {"scope": "run"}}), 2);
    assert_eq!(run[0]["structured"]["result"], all, "{run:?}");
    assert_eq!(run[1]["structured"]["result"], all, "{run:?}");
    assert_eq!(
        run[2].as_array().map(Vec::len),
        Some(2),
        "one question per run: {run:?}"
    );
    let question = run[2][0].as_str().unwrap_or_default();
    assert!(
        question.starts_with("Allow tool \"echo\" with {\"i\":0}?"),
        "{question}"
    );
    let session = answers(
        json!({"action": "accept", "content": {"scope": "session"}}),
        2,
    );
    assert_eq!(session[1]["structured"]["result"], all, "{session:?}");
    assert_eq!(
        session[2].as_array().map(Vec::len),
        Some(1),
        "one question per session: {session:?}"
    );
    let call = answers(json!({"action": "accept", "content": {"scope": "call"}}), 1);
    assert_eq!(call[1].as_array().map(Vec::len), Some(5), "{call:?}");
    let declined = answers(json!({"action": "decline", "content": {"scope": "run"}}), 1);
    assert_eq!(
        declined[0]["structured"]["result"],
        json!([
            "the user rejected tool \"echo\" for the rest of this run",
            "the user rejected tool \"echo\" for the rest of this run",
            "the user rejected tool \"echo\" for the rest of this run",
            "the user rejected tool \"echo\" for the rest of this run",
            "the user rejected tool \"echo\" for the rest of this run"
        ]),
        "{declined:?}"
    );
    assert_eq!(
        declined[1].as_array().map(Vec::len),
        Some(1),
        "{declined:?}"
    );
}

#[test]
fn an_older_client_answers_a_paused_run_on_its_session_and_it_resumes_at_once() {
    // With --pause-on-ask and --pause-on, the run pauses into the store; a 2025-11-25 client
    // is asked on its session and the run resumes in the same call.
    let state = temp_dir("mcp-pausing");
    let state_dir = state.join("state");
    let program = "const approved = await tools.echo({ n: 1 }); const plan = await tools.read_file({ path: 'plan.md' }); return { approved, plan };";
    let server = stdio_server(&[
        "--builtins",
        "--ask",
        "echo",
        "--pause-on-ask",
        "--pause-on",
        "read_file",
        "--state",
        state_dir.to_str().expect("a UTF-8 path"),
    ]);
    let answers = drive(
        json!({
            "elicit": {"action": "accept", "content": {"reply": "\"the plan\""}},
            "steps": [run_code(program)],
        }),
        "stdio",
        &server,
    );
    assert_eq!(
        answers[0]["structured"]["result"],
        json!({"approved": {"n": 1}, "plan": "the plan"}),
        "{answers:?}"
    );
    let consumed = std::fs::read_dir(state_dir.join("consumed"))
        .unwrap()
        .count();
    assert_eq!(consumed, 2, "paused twice, resumed twice");

    let declined =
        "try { await tools.echo({ n: 2 }); } catch (e) { return `${e.name}: ${e.message}`; }";
    let answers = drive(
        json!({"elicit": "decline", "steps": [run_code(declined)]}),
        "stdio",
        &server,
    );
    assert_eq!(
        answers[0]["structured"]["result"],
        "ToolCallError: tool \"echo\" was not approved"
    );
    // A client that cannot be asked: the run stays paused, and the answer says so.
    let answers = drive(json!({"steps": [run_code(program)]}), "stdio", &server);
    assert_eq!(answers[0]["isError"], true);
    let text = answers[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("the run paused for an approval of tool \"echo\" (call 1)")
            && text.contains("can be asked neither"),
        "{text}"
    );
}

#[test]
fn both_mode_lists_upstream_tools_natively_and_progressive_discovery_finds_them() {
    let server = stdio_server(&[
        "--mode",
        "both",
        "--sdk-budget",
        "200",
        "--mcp",
        &everything(),
    ]);
    let answers = drive(
        json!({"steps": [
            {"op": "list"},
            {"op": "call", "tool": "search_tools", "args": {"query": "sum of two numbers", "limit": 1}},
            {"op": "call", "tool": "mcp__everything__get-sum", "args": {"a": 2, "b": 3}},
            {"op": "call", "tool": "mcp__everything__get-tiny-image", "args": {}},
            run_code("return await tools['mcp__everything__get-sum']({ a: 1, b: 1 });"),
            // A program searches too, and calls what it found.
            run_code("const found = await tools.search_tools({ query: 'sum of two numbers', limit: 1 });\nconst sum = await tools[found[0].name]({ a: 20, b: 22 });\n({ found: found.map((f) => [f.name, f.description]), declares: found[0].declaration.includes('a: number;'), sum })"),
        ]}),
        "stdio",
        &server,
    );
    let tools = answers[0].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names[..2], ["run_code", "search_tools"]);
    assert!(names.contains(&"mcp__everything__get-sum"));
    let description = tools[0]["description"].as_str().unwrap();
    assert!(description.contains("- `mcp__everything__get-sum`: Returns the sum of two numbers"));
    assert!(
        !description.contains("a: number;"),
        "names only past the budget"
    );
    let declarations = answers[1]["text"].as_str().unwrap();
    assert!(declarations.starts_with("```ts\n"));
    let member = "  /** Returns the sum of two numbers */\n  \"mcp__everything__get-sum\": {\n    /** First number */\n    a: number;\n    /** Second number */\n    b: number;\n  };";
    assert!(declarations.contains(member), "{declarations}");
    // The same text the whole SDK declares.
    let full = Command::new(binary())
        .args(["sdk", "--mcp", &everything()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&full.stdout).contains(member));
    assert_eq!(answers[2]["text"], "The sum of 2 and 3 is 5.");
    assert_eq!(answers[3]["images"], json!(["image/png"]));
    assert_eq!(
        answers[4]["structured"]["result"],
        "The sum of 1 and 1 is 2."
    );
    assert_eq!(
        answers[5]["structured"]["result"],
        json!({
            "found": [["mcp__everything__get-sum", "Returns the sum of two numbers"]],
            "declares": true,
            "sum": "The sum of 20 and 22 is 42.",
        }),
        "{}",
        answers[5]
    );
    assert_eq!(
        names.iter().filter(|n| **n == "search_tools").count(),
        1,
        "listed once: {names:?}"
    );
}

/// `codemode mcp --http` on a free port, and its URL.
fn http_server(args: &[&str]) -> (Child, String) {
    let (child, url, _) = spawn_announced(
        Command::new(binary())
            .args(["mcp", "--http", "127.0.0.1:0"])
            .args(args),
    );
    (child, url)
}

#[test]
fn codemode_mcp_serves_many_clients_over_streamable_http() {
    let dir = temp_dir("mcp-http");
    let events = dir.join("events.jsonl");
    let (mut child, url) = http_server(&["--builtins", "--events", &events.display().to_string()]);
    let sleepy = |n: u32| json!({"tool": "run_code", "args": {"code": format!("await tools.sleep({{ ms: 200 }}); return {n};"), "description": "Sleep"}});
    let clients: Vec<_> = (0..3)
        .map(|c| {
            let url = url.clone();
            let plan = json!({"steps": [
                {"op": "list"},
                {"op": "concurrent", "calls": [sleepy(c * 10 + 1), sleepy(c * 10 + 2)]},
                {"op": "call", "tool": "run_code", "progress": true, "args": {"code": "await tools.sleep({ ms: 2300 }); return 'slow';", "description": "Sleep long"}},
                {"op": "call", "tool": "run_code", "cancel_on_progress": true, "args": {"code": "await tools.sleep({ ms: 10000 });", "description": "Cancelled"}},
                run_code("return 'still serving';"),
            ]});
            std::thread::spawn(move || drive(plan, "http", &[url]))
        })
        .collect();
    for (c, client) in clients.into_iter().enumerate() {
        let answers = client.join().unwrap();
        assert_eq!(answers[0][0]["name"], "run_code");
        let c = c as u64;
        assert_eq!(answers[1][0]["structured"]["result"], json!(c * 10 + 1));
        assert_eq!(answers[1][1]["structured"]["result"], json!(c * 10 + 2));
        assert_eq!(answers[2]["structured"]["result"], "slow");
        let progress = answers[2]["progress"].as_array().unwrap();
        let says = |entry: &Value, start: &str| {
            entry[1]
                .as_str()
                .is_some_and(|text| text.starts_with(start))
        };
        // The program's call as it starts, a notification every second, the call as it settles.
        assert!(says(&progress[0], "call sleep started ("), "{progress:?}");
        assert!(
            progress.contains(&json!([1.0, "running for 1s"])),
            "a progress notification every second: {progress:?}"
        );
        assert!(
            progress.iter().any(|p| says(p, "call sleep resolved in ")),
            "{progress:?}"
        );
        // Cancelled once the server said the run was running, not after a guessed delay.
        assert_eq!(answers[3]["cancelled"], true, "{:?}", answers[3]);
        assert!(
            says(&answers[3]["progress"][0], "call sleep started ("),
            "{:?}",
            answers[3]
        );
        assert_eq!(answers[4]["structured"]["result"], "still serving");
    }
    let _ = child.kill();
    let _ = child.wait();
    // Each client's cancellation aborted its run on the server (its call in flight is
    // reported aborted too, as a sub-call's event).
    let log = std::fs::read_to_string(&events).unwrap();
    let aborted = log
        .lines()
        .filter(|line| line.contains("\"type\":\"tool/result\""))
        .filter(|line| line.contains("code run failed (abort): cancelled by the client"))
        .count();
    assert_eq!(aborted, 3, "{log}");
}

/// `codemode mcp --exec`: a session's background job ends when the session does, while the
/// server and the other sessions go on.
#[test]
fn a_sessions_jobs_end_with_the_session() {
    let root = temp_dir("mcp-exec-root");
    let root_arg = root.path().display().to_string();
    let (mut child, url) = http_server(&["--exec", "--root", &root_arg]);
    let answers = drive(
        json!({"steps": [
            run_code("const job = await tools.bash({ command: 'echo $$ $(readlink /proc/self/ns/pid) > job.pid; echo started; sleep 60', description: 'Sleep', run_in_background: true }); while (!(await tools.job_output({ jobId: job.jobId, offset: 0, waitMs: 1000 })).output.includes('started')) {} return job.kind;"),
        ]}),
        "http",
        std::slice::from_ref(&url),
    );
    assert_eq!(
        answers[0]["structured"]["result"], "background",
        "{answers:?}"
    );
    let written = std::fs::read_to_string(root.join("job.pid")).expect("the job ran");
    let pid = host_pid(&written).expect("a whole pid file");
    // SAFETY: signal 0 only checks that the process exists.
    let alive = || pid.is_some_and(|pid| unsafe { libc::kill(pid, 0) == 0 });
    let mut waited = 0;
    while alive() && waited < 600 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        waited += 1;
    }
    assert!(!alive(), "the job outlived its session");
    let again = drive(
        json!({"steps": [run_code("return 'still serving';")]}),
        "http",
        &[url],
    );
    assert_eq!(again[0]["structured"]["result"], "still serving");
    child.kill().unwrap();
    let _ = child.wait();
}

fn asker() -> String {
    format!(
        "ask=python3 {}",
        repo().join("fixtures/mcp-servers/asker.py").display()
    )
}

#[test]
fn an_upstream_servers_question_reaches_the_client_of_the_call_and_its_answer_returns() {
    let program = "return (await tools.mcp__ask__color({})).result;";
    let server = stdio_server(&["--mcp", &asker()]);
    let ask = |elicit: Value| {
        drive(
            json!({"elicit": elicit, "steps": [run_code(program), {"op": "elicitations"}]}),
            "stdio",
            &server,
        )
    };
    let accepted = ask(json!({"action": "accept", "content": {"color": "green"}}));
    assert_eq!(
        accepted[0]["structured"]["result"], "accept:green",
        "{accepted:?}"
    );
    assert_eq!(accepted[1], json!(["Which color?"]), "{accepted:?}");
    let declined = ask(json!("decline"));
    assert_eq!(
        declined[0]["structured"]["result"], "decline",
        "{declined:?}"
    );
    // A client that cannot be asked: the question is declined for it.
    let unasked = ask(Value::Null);
    assert_eq!(unasked[0]["structured"]["result"], "decline", "{unasked:?}");
}

#[test]
fn under_codemode_run_an_upstream_servers_question_is_asked_on_the_terminal() {
    use std::io::Write;
    let dir = temp_dir("upstream-question");
    let program = dir.join("program.ts");
    std::fs::write(&program, "return (await tools.mcp__ask__color({})).result;").unwrap();
    let answer = |typed: &str| {
        let command = format!(
            "{} run --json --mcp '{}' {}",
            binary().display(),
            asker(),
            program.display()
        );
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("script(1) from util-linux");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(typed.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let red = answer("y\nred\n");
    assert!(
        red.contains("mcp server \"ask\" asks: Which color?"),
        "{red}"
    );
    assert!(red.contains("\"result\":\"accept:red\""), "{red}");
    // Enter takes the field's default.
    let default = answer("y\n\n");
    assert!(default.contains("Enter for \"blue\""), "{default}");
    assert!(default.contains("\"result\":\"accept:blue\""), "{default}");
    assert!(answer("n\n").contains("\"result\":\"decline\""));
    // Without a terminal there is no one to ask.
    let out = codemode_e2e::output_with_stdin(
        Command::new(binary()).args(["run", "--json", "--mcp", &asker(), "-"]),
        "return (await tools.mcp__ask__color({})).result;",
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"result\":\"decline\""));
}

#[test]
fn a_paused_approval_answered_for_the_session_holds_for_the_sessions_later_runs() {
    // Approvals pause (--pause-on-ask); a 2025-11-25 client answers on its session with the
    // scope `session`: the rest of that run and the session's next runs are not asked again.
    let state = temp_dir("mcp-pausing-scope");
    let state_dir = state.join("state");
    let program = "const out = [];\nfor (let i = 0; i < 3; i++) out.push((await tools.echo({ i })).i);\nreturn out;";
    let server = stdio_server(&[
        "--builtins",
        "--ask",
        "echo",
        "--pause-on-ask",
        "--state",
        state_dir.to_str().expect("a UTF-8 path"),
    ]);
    let answers = drive(
        json!({
            "elicit": {"action": "accept", "content": {"scope": "session"}},
            "steps": [run_code(program), run_code(program), {"op": "elicitations"}],
        }),
        "stdio",
        &server,
    );
    assert_eq!(
        answers[0]["structured"]["result"],
        json!([0, 1, 2]),
        "{answers:?}"
    );
    assert_eq!(
        answers[1]["structured"]["result"],
        json!([0, 1, 2]),
        "{answers:?}"
    );
    assert_eq!(answers[2].as_array().map(Vec::len), Some(1), "{answers:?}");
    // Declined for the session: refused without a question, in this run and the next.
    let refused = "try { await tools.echo({}); return 'ran'; } catch (e) { return e.message; }";
    let answers = drive(
        json!({
            "elicit": {"action": "decline", "content": {"scope": "session"}},
            "steps": [run_code(refused), run_code(refused), {"op": "elicitations"}],
        }),
        "stdio",
        &server,
    );
    assert_eq!(
        answers[0]["structured"]["result"], "tool \"echo\" was not approved",
        "{answers:?}"
    );
    assert_eq!(
        answers[1]["structured"]["result"],
        "the user rejected tool \"echo\" for the rest of this session",
        "{answers:?}"
    );
    assert_eq!(answers[2].as_array().map(Vec::len), Some(1), "{answers:?}");
}

//! The `codemode` binary: exit codes, `--json`, the built-in tools and their root confinement.

use std::process::{Command, Output, Stdio};

use codemode_e2e::{
    codemode_binary as binary, fixtures, is_run_id, name_run_ids_run, output_with_stdin, temp_dir,
};
use serde_json::{json, Value};

fn run_with_stdin(args: &[&str], stdin: &str) -> Output {
    output_with_stdin(Command::new(binary()).args(args), stdin)
}

fn json_of(output: &Output) -> Value {
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one JSON object: {text:?}");
    let mut value = serde_json::from_str(lines[0]).expect("valid JSON");
    name_run_ids_run(&mut value);
    value
}

#[test]
fn the_example_program_runs_with_the_built_in_tools() {
    let program = fixtures().join("programs/hello.ts");
    let out = Command::new(binary())
        .args(["run", "--json"])
        .arg(&program)
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        without_fuel(json_of(&out)),
        json!({
            "logs": ["point { x: 1, y: 2 }", "fail failed: deliberate failure"],
            "result": {"echoed": {"greeting": "hello"}, "naps": [{"slept": 50}, {"slept": 50}]},
            "calls": [
                {"subCallId": "run:code:1", "tool": "echo", "outcome": "resolved"},
                {"subCallId": "run:code:2", "tool": "sleep", "outcome": "resolved"},
                {"subCallId": "run:code:3", "tool": "sleep", "outcome": "resolved"},
                {"subCallId": "run:code:4", "tool": "fail", "outcome": "rejected"},
            ]
        })
    );
}

#[test]
fn verbose_says_on_stderr_as_each_call_starts_and_settles() {
    let out = Command::new(binary())
        .args(["run", "--verbose", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("piped")
                .write_all(b"await tools.echo({ a: 1 });\ntry { await tools.fail({ message: 'x' }); } catch {}\nreturn 1;")?;
            child.wait_with_output()
        })
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("codemode: call "))
        .collect();
    assert_eq!(lines.len(), 4, "{stderr}");
    assert!(
        lines[0].starts_with("codemode: call echo started (run:code:1)")
            || lines[0].starts_with("codemode: call echo started ("),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with("codemode: call echo resolved in "),
        "{stderr}"
    );
    assert!(
        lines[2].starts_with("codemode: call fail started ("),
        "{stderr}"
    );
    assert!(
        lines[3].starts_with("codemode: call fail rejected in "),
        "{stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
}

#[test]
fn the_python_example_runs_with_the_built_in_tools() {
    let program = fixtures().join("programs/hello.py");
    let out = Command::new(binary())
        .args(["run", "--json"])
        .arg(&program)
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        without_fuel(json_of(&out)),
        json!({
            "logs": ["point {'x': 1, 'y': 2}", "fail failed: deliberate failure"],
            "result": {"echoed": {"greeting": "hello"}, "naps": 2, "sum": 3},
            "calls": [
                {"subCallId": "run:code:1", "tool": "echo", "outcome": "resolved"},
                {"subCallId": "run:code:2", "tool": "sleep", "outcome": "resolved"},
                {"subCallId": "run:code:3", "tool": "sleep", "outcome": "resolved"},
                {"subCallId": "run:code:4", "tool": "fail", "outcome": "rejected"},
            ]
        })
    );
}

/// The `--json` document without its `computeFuel`, which must be there: a count of fuel that
/// moves with every change to the guest, checked on its own by
/// `json_reports_the_fuel_a_run_burned_the_same_every_time`.
fn without_fuel(mut doc: Value) -> Value {
    let fuel = doc.as_object_mut().and_then(|d| d.remove("computeFuel"));
    assert!(
        fuel.as_ref().is_some_and(Value::is_u64),
        "computeFuel: {fuel:?}"
    );
    doc
}

#[test]
fn people_get_logs_then_the_result() {
    let out = run_with_stdin(&["run"], "console.log('hi'); return { a: 1 };");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hi\n{\n  \"a\": 1\n}\n"
    );
}

#[test]
fn no_result_key_when_nothing_is_returned() {
    let out = run_with_stdin(&["run", "--json", "-"], "console.log('x');");
    assert_eq!(
        without_fuel(json_of(&out)),
        json!({"logs": ["x"], "calls": []})
    );
}

#[test]
fn a_program_failure_exits_one_with_a_typed_error() {
    let out = run_with_stdin(
        &["run", "--json"],
        "const a = 1;\n  throw new Error('boom');",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        without_fuel(json_of(&out)),
        json!({"logs": [], "error": {"kind": "exception", "message": "Error: boom", "line": 2, "column": 9}, "calls": []})
    );
    let human = run_with_stdin(&["run"], "const a = 1;\n  throw new Error('boom');");
    assert_eq!(human.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&human.stderr);
    assert!(stderr.contains("error (exception) at 2:9"), "{stderr}");
    assert!(
        stderr.contains("throw new Error('boom');"),
        "the TypeScript line is shown: {stderr}"
    );
}

#[test]
fn rejected_typescript_is_a_program_failure() {
    let out = run_with_stdin(&["run", "--json"], "enum E { A }\nreturn 1;");
    assert_eq!(out.status.code(), Some(1));
    let doc = json_of(&out);
    assert_eq!(doc["error"]["kind"], "exception");
    assert_eq!(doc["error"]["line"], 1);
}

#[test]
fn json_reports_the_fuel_a_run_burned_the_same_every_time() {
    let program = "let s = 0;\nfor (let i = 0; i < 20000; i++) s += i % 7;\nreturn s;";
    let burned: Vec<u64> = (0..2)
        .map(|_| {
            let out = run_with_stdin(&["run", "--json"], program);
            assert_eq!(out.status.code(), Some(0));
            json_of(&out)["computeFuel"]
                .as_u64()
                .expect("computeFuel in --json")
        })
        .collect();
    assert!(burned[0] > 0);
    assert_eq!(burned[0], burned[1], "fuel is deterministic");
    let out = run_with_stdin(&["run", "--json"], "return 1;");
    let trivial = json_of(&out)["computeFuel"].as_u64().expect("computeFuel");
    assert!(trivial < burned[0], "{trivial} vs {}", burned[0]);
}

#[test]
fn budget_flags_are_applied() {
    let out = run_with_stdin(&["run", "--json", "--compute-ms", "100"], "while (true) {}");
    assert_eq!(out.status.code(), Some(1));
    let doc = json_of(&out);
    let budget = 100 * codemode_host::FUEL_PER_MS;
    assert_eq!(
        doc["error"],
        json!({"kind": "timeout", "message": format!("compute budget exhausted (100ms busy, {budget} fuel)"), "cause": "compute"})
    );
    // The loop burned its whole budget, but for part of the block it was stopped in.
    let burned = doc["computeFuel"].as_u64().expect("computeFuel in --json");
    assert!(
        burned <= budget && burned >= budget - budget / 1000,
        "{burned} fuel burned of {budget}"
    );
    let out = run_with_stdin(
        &["run", "--json", "--max-output-bytes", "10"],
        "return 'a long result';",
    );
    assert_eq!(json_of(&out)["error"]["kind"], "output-limit");
    let out = run_with_stdin(
        &["run", "--json", "--wall-ms", "200"],
        "await tools.sleep({ ms: 60000 });",
    );
    assert_eq!(json_of(&out)["error"]["cause"], "wall");
    let out = run_with_stdin(
        &["run", "--json", "--memory-mb", "32"],
        "const k: string[] = []; for (;;) k.push('x'.repeat(1 << 20) + k.length);",
    );
    assert_eq!(json_of(&out)["error"]["cause"], "memory");
}

#[test]
fn usage_errors_exit_two() {
    let out = Command::new(binary())
        .args(["run", "/nonexistent/program.ts"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
    let out = Command::new(binary())
        .args(["run", "--compute-ms", "zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(binary())
        .args(["run", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(binary())
        .args(["run", "--root", "/nonexistent"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(binary()).arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn file_tools_are_confined_to_the_root() {
    let base = temp_dir("cli-root");
    let root = base.join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/note.txt"), "inside").unwrap();
    std::fs::write(base.join("secret.txt"), "outside").unwrap();
    #[cfg(unix)]
    {
        let _ = std::os::unix::fs::symlink(base.join("secret.txt"), root.join("escape"));
        let _ = std::os::unix::fs::symlink("sub/note.txt", root.join("inner-link"));
    }
    let program = r#"
        const attempt = async (f: () => Promise<unknown>) => {
          try { return { ok: await f() }; } catch (e) { return { refused: e instanceof ToolCallError && e.toolName }; }
        };
        return {
          list: await tools.list_dir({ path: '.' }),
          read: await tools.read_file({ path: 'sub/note.txt' }),
          inner: await attempt(() => tools.read_file({ path: 'inner-link' })),
          dotdot: await attempt(() => tools.read_file({ path: '../secret.txt' })),
          absolute: await attempt(() => tools.read_file({ path: '/etc/hostname' })),
          symlink: await attempt(() => tools.read_file({ path: 'escape' })),
          listUp: await attempt(() => tools.list_dir({ path: '..' })),
        };
    "#;
    let out = run_with_stdin(
        &["run", "--json", "--root", root.to_str().unwrap()],
        program,
    );
    let doc = json_of(&out);
    let result = &doc["result"];
    assert_eq!(result["read"], "inside");
    assert_eq!(result["inner"], json!({"ok": "inside"}));
    assert_eq!(result["dotdot"], json!({"refused": "read_file"}));
    assert_eq!(result["absolute"], json!({"refused": "read_file"}));
    assert_eq!(result["symlink"], json!({"refused": "read_file"}));
    assert_eq!(result["listUp"], json!({"refused": "list_dir"}));
    let names: Vec<&str> = result["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["escape", "inner-link", "sub"]);
}

/// A FIFO without a writer used to block `open` forever (past the run's abort, keeping the CLI
/// from exiting); one with a writer, or a device, streamed past the size cap. Both are refused
/// from the opened handle now, without blocking.
#[cfg(unix)]
#[test]
fn read_file_refuses_fifos_and_devices_without_blocking() {
    let root = temp_dir("cli-fifo");
    std::fs::create_dir(root.join("dir")).unwrap();
    for name in ["idle", "fed"] {
        let made = Command::new("mkfifo")
            .arg(root.join(name))
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {name}");
    }
    // A writer that would stream without end into whoever opens the FIFO.
    let mut writer = Command::new("sh")
        .args([
            "-c",
            "exec yes codemode > \"$0\"",
            root.join("fed").to_str().unwrap(),
        ])
        .spawn()
        .unwrap();
    // A character device, where this user may make one (root); elsewhere the FIFOs stand alone.
    let device = Command::new("mknod")
        .arg(root.join("zero"))
        .args(["c", "1", "5"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let program = r#"
        const attempt = async (path: string) => {
          try { return { ok: (await tools.read_file({ path })).length }; }
          catch (e) { return { refused: String(e.message) }; }
        };
        return {
          idle: await attempt('idle'),
          fed: await attempt('fed'),
          dir: await attempt('dir'),
          zero: await attempt('zero'),
        };
    "#;
    let out = run_with_stdin(
        &["run", "--json", "--root", root.path().to_str().unwrap()],
        program,
    );
    let _ = writer.kill();
    let _ = writer.wait();
    let doc = json_of(&out);
    let result = &doc["result"];
    for name in ["idle", "fed"] {
        let refused = result[name]["refused"].as_str().unwrap_or_default();
        assert!(refused.contains("not a regular file"), "{name}: {doc}");
    }
    let dir = result["dir"]["refused"].as_str().unwrap_or_default();
    assert!(dir.contains("is a directory; use list_dir"), "{doc}");
    let zero = result["zero"]["refused"].as_str().unwrap_or_default();
    if device {
        assert!(zero.contains("not a regular file"), "{doc}");
    } else {
        assert!(zero.contains("No such file"), "{doc}");
    }
}

#[test]
fn sdk_prints_the_built_in_tools_in_both_languages() {
    let out = Command::new(binary()).args(["sdk"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("## Writing code for run_code"), "{text}");
    assert!(text.contains("```ts"));
    for name in ["echo", "sleep", "fail", "read_file", "list_dir"] {
        assert!(
            text.contains(&format!("  {name}: ")),
            "{name} missing: {text}"
        );
    }
    let again = Command::new(binary()).args(["sdk"]).output().unwrap();
    assert_eq!(out.stdout, again.stdout, "byte-identical every time");
    let py = Command::new(binary())
        .args(["sdk", "--lang", "python"])
        .output()
        .unwrap();
    assert_eq!(py.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&py.stdout).contains("```python"));
    let bad = Command::new(binary())
        .args(["sdk", "--lang", "cobol"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn sdk_stats_count_the_tokens_of_the_sdk_and_of_what_a_client_is_told() {
    let stats = |args: &[&str]| {
        let out = Command::new(binary())
            .args(["sdk", "--stats"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        // The SDK itself stays alone on stdout.
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("## Writing code for run_code"));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let tokens: Vec<usize> = stderr
            .split_whitespace()
            .filter_map(|w| w.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
            .collect();
        (stderr, tokens)
    };
    let (whole, counts) = stats(&[]);
    assert!(
        whole.starts_with("codemode: 5 tools; the SDK is about "),
        "{whole}"
    );
    assert!(
        whole.contains("(the whole SDK, within the budget of 8000)"),
        "{whole}"
    );
    // tools, SDK tokens, description tokens, budget: the description is the SDK and one line.
    let [_, sdk, description, _] = counts[..] else {
        panic!("{whole}")
    };
    assert!(description > sdk && description < sdk + 40, "{whole}");
    let (small, counts) = stats(&["--sdk-budget", "100"]);
    assert!(
        small.contains("past the budget of 100: the tools' names, with search_tools"),
        "{small}"
    );
    assert!(counts[2] < counts[1], "names only are shorter: {small}");
}

#[test]
fn bench_prints_one_object_with_every_workload() {
    let out = Command::new(binary())
        .args(["bench", "--json", "--runs", "3"])
        .output()
        .expect("bench");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json_of(&out);
    for key in [
        "/fresh_run_p50_us",
        "/fresh_run_p99_us",
        "/sub_call_us",
        "/pipeline_sub_call_us",
        "/parallel_10x100ms_ms",
        "/runs_per_sec",
        "/rss_per_instance_mib",
        "/kill_latency_ms",
        "/fuel_per_ms",
        "/compute_ms",
        "/calls_ms",
        "/loop_ms",
        "/calls/fuel",
        "/calls/phases_ms/construct",
        "/calls/phases_ms/recursion",
        "/idiomatic/total_ms",
        "/idiomatic/phases_ms/classes",
        "/idiomatic/phases_ms/memo",
    ] {
        let v = report.pointer(key);
        assert!(
            v.and_then(Value::as_f64)
                .is_some_and(|v| v.is_finite() && v >= 0.0),
            "{key}: {v:?}"
        );
    }
    assert!(
        report["interruption"].is_null(),
        "the study runs only when asked"
    );
}

#[test]
fn bench_in_python_reports_the_typescript_fields_it_has_a_twin_for() {
    let out = Command::new(binary())
        .args(["bench", "--json", "--runs", "3", "--lang", "python"])
        .output()
        .expect("bench");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json_of(&out);
    assert_eq!(report["language"], "python");
    assert_eq!(report["fresh_run_program"], "1 + 1");
    for key in [
        "/fresh_run_p50_us",
        "/fresh_run_p99_us",
        "/sub_call_us",
        "/pipeline_sub_call_us",
        "/parallel_10x100ms_ms",
        "/runs_per_sec",
        "/rss_per_instance_mib",
        "/private_per_instance_mib",
        "/kill_latency_ms",
        "/compute_ms",
        "/fuel_per_ms",
        "/calls_ms",
        "/loop_ms",
        "/loop_fuel",
        "/data/total_ms",
        "/data/check/rows",
        "/guest_module_bytes",
    ] {
        let v = report.pointer(key);
        assert!(
            v.and_then(Value::as_f64)
                .is_some_and(|v| v.is_finite() && v >= 0.0),
            "{key}: {v:?}"
        );
    }
    // The TypeScript-only studies are there, and empty.
    for key in ["durable", "preflight"] {
        assert!(report[key].is_null(), "{key}: {}", report[key]);
    }
}

/// The program's result under `flags`, run without a controlling terminal (`setsid`), so
/// `--ask` can never prompt whoever runs the tests.
fn result_without_terminal(flags: &[&str], program: &str) -> (Option<i32>, Value) {
    let out = output_with_stdin(
        Command::new("setsid")
            .arg(binary())
            .args(["run", "--json"])
            .args(flags),
        program,
    );
    (out.status.code(), json_of(&out))
}

const TRY_FAIL_AND_SLEEP: &str = r#"
    const attempt = async (f: () => Promise<unknown>) => {
      try { return await f(); } catch (e) { return `${e.toolName}: ${e.message}`; }
    };
    return [
      await attempt(() => tools.fail({ message: 'ran' })),
      await attempt(() => tools.sleep({ ms: 1 })),
    ];
"#;

#[test]
fn deny_and_allow_reach_the_program_as_tool_call_errors_with_the_reason() {
    let (code, doc) = result_without_terminal(&["--deny", "fail"], TRY_FAIL_AND_SLEEP);
    assert_eq!(code, Some(0));
    assert_eq!(
        doc["result"],
        json!(["fail: tool \"fail\" is denied by policy", {"slept": 1}])
    );
    let (_, doc) =
        result_without_terminal(&["--allow", "echo", "--allow", "fail"], TRY_FAIL_AND_SLEEP);
    assert_eq!(
        doc["result"],
        json!([
            "fail: ran",
            "sleep: tool \"sleep\" is not in the allowed set (echo, fail)"
        ])
    );
    assert_eq!(
        doc["calls"],
        json!([
            {"subCallId": "run:code:1", "tool": "fail", "outcome": "rejected"},
            {"subCallId": "run:code:2", "tool": "sleep", "outcome": "rejected"},
        ])
    );
}

#[test]
fn ask_without_a_terminal_fails_closed() {
    let (code, doc) = result_without_terminal(&["--ask", "fail"], TRY_FAIL_AND_SLEEP);
    assert_eq!(code, Some(0));
    assert_eq!(
        doc["result"],
        json!([
            "fail: tool \"fail\" requires approval, but no approval channel is available",
            {"slept": 1}
        ])
    );
}

#[test]
fn policy_flags_naming_unknown_tools_and_a_zero_parallel_cap_are_usage_errors() {
    let out = run_with_stdin(&["run", "--deny", "fial"], "return 1");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("unknown tool \"fial\"; known tools: echo, sleep, fail, read_file, list_dir"),
        "{stderr}"
    );
    let out = run_with_stdin(&["run", "--max-parallel", "0"], "return 1");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn max_parallel_bounds_overlapping_calls() {
    let program = "const t = Date.now(); await Promise.all(Array.from({ length: 4 }, () => tools.sleep({ ms: 150 }))); return Date.now() - t;";
    let (_, wide) = result_without_terminal(&["--max-parallel", "4"], program);
    let (_, narrow) = result_without_terminal(&["--max-parallel", "1"], program);
    let (wide, narrow) = (
        wide["result"].as_f64().unwrap(),
        narrow["result"].as_f64().unwrap(),
    );
    // Four 150 ms sleeps: all at once, or one after another (at least 600 ms).
    assert!(narrow >= 600.0, "serial: {narrow}");
    assert!(wide < narrow, "overlapping {wide} vs serial {narrow}");
}

#[test]
fn events_are_written_as_jsonl_with_a_type_per_line() {
    let dir = temp_dir("cli-events");
    let path = dir.join("events.jsonl");
    let (code, _) = result_without_terminal(
        &["--events", path.to_str().unwrap()],
        "await tools.echo({ a: 1 }); try { await tools.fail({ message: 'no' }); } catch {} return 1;",
    );
    assert_eq!(code, Some(0));
    let text = std::fs::read_to_string(&path).unwrap();
    let kinds: Vec<String> = text
        .lines()
        .map(|line| {
            let mut event: Value = serde_json::from_str(line).unwrap();
            name_run_ids_run(&mut event);
            let id = event["subCallId"]
                .as_str()
                .or(event["callId"].as_str())
                .unwrap()
                .to_owned();
            format!("{} {id}", event["type"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "tool/call run",
            "tool/code-dispatch-start run:code:1",
            "tool/code-dispatch run:code:1",
            "tool/code-dispatch-start run:code:2",
            "tool/code-dispatch run:code:2",
            "tool/result run",
        ]
    );
    let events: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // Settling records say how long the call took; `fail` answers at once, the run took longer.
    for settled in [&events[2], &events[4], &events[5]] {
        assert!(settled["durationMs"].is_u64(), "{settled}");
    }
    let settle = &events[4];
    assert_eq!(settle["isError"], true);
    assert_eq!(
        settle["content"],
        json!([{"type": "text", "text": "Error: no"}])
    );
    // Another process's run has another id.
    let (code, _) = result_without_terminal(&["--events", path.to_str().unwrap()], "return 2;");
    assert_eq!(code, Some(0));
    let text = std::fs::read_to_string(&path).unwrap();
    let roots: std::collections::BTreeSet<String> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["callId"].clone())
        .filter_map(|id| id.as_str().map(str::to_owned))
        .collect();
    assert_eq!(roots.len(), 2, "{roots:?}");
    assert!(roots.iter().all(|id| is_run_id(id)), "{roots:?}");
}

#[test]
fn sdk_declares_only_what_the_policy_lets_a_program_call() {
    let out = Command::new(binary())
        .args(["sdk", "--deny", "fail", "--deny", "echo"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  sleep: "), "{text}");
    assert!(
        !text.contains("  fail: ") && !text.contains("  echo: "),
        "{text}"
    );
    let out = Command::new(binary())
        .args(["sdk", "--allow", "read_file"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("  read_file: ") && !text.contains("  sleep: "),
        "{text}"
    );
}

#[test]
fn a_first_run_says_it_is_preparing_the_sandbox() {
    let dir = temp_dir("cli-first-run");
    let cache = dir.join("cache");
    let first = Command::new(binary())
        .args([
            "run",
            "--json",
            fixtures().join("programs/hello.ts").to_str().unwrap(),
        ])
        .env("CODEMODE_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains("preparing the sandbox for first use"),
        "{stderr}"
    );
    let second = Command::new(binary())
        .args([
            "run",
            "--json",
            fixtures().join("programs/hello.ts").to_str().unwrap(),
        ])
        .env("CODEMODE_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&second.stderr),
        "",
        "cached: nothing to say"
    );
}

#[test]
fn the_embedding_example_runs_a_program_through_run_code() {
    let exe = binary()
        .parent()
        .unwrap()
        .join("examples")
        .join(format!("embed{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.exists(),
        "{} is built by `cargo build --all-targets`",
        exe.display()
    );
    let out = Command::new(exe).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "delete_file refused: deleting files is not allowed here\n{\n  \"sum\": 5\n}\nadd resolved\ndelete_file rejected\n"
    );
}

/// `codemode run --json --ask echo` on a real terminal (`script`), with `typed` typed into it:
/// the terminal's text (prompts and the JSON).
fn on_a_terminal(program: &std::path::Path, typed: &str) -> String {
    use std::io::Write;
    let command = format!(
        "{} run --json --ask echo {}",
        binary().display(),
        program.display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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
}

#[test]
fn one_key_on_the_terminal_approves_or_declines_the_rest_of_a_loop() {
    let dir = temp_dir("cli-ask-scope");
    let program = dir.join("program.ts");
    std::fs::write(
        &program,
        "const out = [];\nfor (let i = 0; i < 4; i++) {\n  try { out.push((await tools.echo({ i })).i); } catch (e) { out.push(e.message); }\n}\nreturn out;",
    )
    .unwrap();
    let prompts = |text: &str| text.matches("allow tool \"echo\"").count();
    // `r`: every call of the tool for the rest of the run, asked once.
    let run = on_a_terminal(&program, "r\n");
    assert_eq!(prompts(&run), 1, "{run}");
    assert!(run.contains("\"result\":[0,1,2,3]"), "{run}");
    // `d`: this call and the rest of the run's are refused, asked once.
    let declined = on_a_terminal(&program, "d\n");
    assert_eq!(prompts(&declined), 1, "{declined}");
    assert_eq!(
        declined
            .matches("the user rejected tool \\\"echo\\\" for the rest of this run")
            .count(),
        4,
        "{declined}"
    );
    // `y` then `n`: each answer for its own call, so every call asks.
    let each = on_a_terminal(&program, "y\nn\ny\ns\n");
    assert_eq!(prompts(&each), 4, "{each}");
    assert!(
        each.contains("\"result\":[0,\"the user rejected tool \\\"echo\\\"\",2,3]"),
        "{each}"
    );
}

#[test]
fn ask_prompts_on_the_terminal_and_the_answer_decides() {
    let dir = temp_dir("cli-ask");
    let program = dir.join("program.ts");
    std::fs::write(
        &program,
        "try { return await tools.fail({ message: 'ran' }); } catch (e) { return e.message; }",
    )
    .unwrap();
    let answer = |reply: &str| {
        use std::io::Write;
        // `script` gives the CLI a real terminal; what we write is typed into it.
        let command = format!(
            "{} run --json --ask fail {}",
            binary().display(),
            program.display()
        );
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("script(1) from util-linux");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{reply}\n").as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let yes = answer("y");
    assert!(
        yes.contains("allow tool \"fail\" with {\"message\":\"ran\"}?"),
        "{yes}"
    );
    assert!(yes.contains("[y/r/s/N/d/D]"), "{yes}");
    assert!(yes.contains("\"result\":\"ran\""), "{yes}");
    let no = answer("n");
    assert!(
        no.contains("\"result\":\"the user rejected tool \\\"fail\\\"\""),
        "{no}"
    );
}

/// The peers of `codemode bench` run `fixtures/workloads/idiomatic.js`, the TypeScript
/// workload with its types erased: it must be what codemode's eraser makes of it
/// (`CODEMODE_BLESS=1` writes it).
#[test]
fn the_idiomatic_workloads_javascript_twin_is_its_typescript_erased() {
    let dir = codemode_e2e::manifest_dir().join("../fixtures/workloads");
    let typescript = std::fs::read_to_string(dir.join("idiomatic.ts")).expect("read the workload");
    let erased = codemode_typescript::strip::strip_types(&typescript).expect("the eraser takes it");
    let twin = dir.join("idiomatic.js");
    if std::env::var_os("CODEMODE_BLESS").is_some() {
        std::fs::write(&twin, &erased).expect("write the twin");
    }
    let kept = std::fs::read_to_string(&twin).unwrap_or_default();
    assert!(
        kept == erased,
        "fixtures/workloads/idiomatic.js is not idiomatic.ts erased: run this test with CODEMODE_BLESS=1"
    );
}

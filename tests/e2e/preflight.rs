//! Preflight: every program in `fixtures/preflight/faulty/` is refused with each of its
//! problems at its line and column, and nothing in `fixtures/preflight/valid/` (nor the SDK
//! fixtures' passing programs) is, over the schemas of the real servers captured in
//! `fixtures/`. The built-in tools' faulty programs also go through `codemode run`, where
//! nothing may run; then `--no-preflight`, the completion value, and run-time argument errors
//! placed at their call.

use std::process::Command;

use codemode_e2e::*;
use codemode_host::preflight::{self, Namespace};
use codemode_runtime::tools::Schema;
use serde_json::Value;

/// The `tools` namespace a program's `// tools:` line names.
fn namespace_for(program: &str) -> Namespace {
    let header = program.lines().next().unwrap_or_default();
    let set = header
        .strip_prefix("// tools: ")
        .or_else(|| header.strip_prefix("# tools: "))
        .unwrap_or_else(|| panic!("no `// tools:` line: {header}"))
        .trim();
    let tools: Vec<(String, Schema)> = if set == "builtin" {
        codemode_host::builtins::definitions(".")
            .iter()
            .map(|d| (d.name().to_owned(), d.parameters().clone()))
            .collect()
    } else {
        let text = std::fs::read_to_string(fixtures().join(set)).expect(set);
        codemode_sdk_gen::parse_tool_list(&text, "")
            .expect("a tool list")
            .into_iter()
            .map(|t| {
                let schema = Schema::foreign(t.parameters).expect("a schema");
                (t.name, schema)
            })
            .collect()
    };
    let mut members: Vec<String> = tools.iter().map(|(n, _)| n.clone()).collect();
    members.sort();
    Namespace {
        global: "tools".into(),
        members,
        schemas: tools.into_iter().collect(),
        ..Namespace::default()
    }
}

fn expected(program: &str) -> Vec<(u32, u32)> {
    program
        .lines()
        .filter_map(|l| {
            l.strip_prefix("// expect: ")
                .or_else(|| l.strip_prefix("# expect: "))
        })
        .map(|at| {
            let (line, column) = at.trim().split_once(':').expect("L:C");
            (line.parse().expect("line"), column.parse().expect("column"))
        })
        .collect()
}

#[test]
fn every_faulty_program_is_refused_with_each_problem_placed() {
    let corpus = typescript_fixtures("preflight/faulty");
    assert!(corpus.len() >= 40, "{} faulty programs", corpus.len());
    let mut wrong = Vec::new();
    for (name, program) in &corpus {
        let problems = preflight::check(program, &[namespace_for(program)]);
        let found: Vec<(u32, u32)> = problems.iter().map(|p| (p.line, p.column)).collect();
        let want = expected(program);
        assert!(!want.is_empty(), "{name} expects nothing");
        if found != want {
            wrong.push(format!("{name}: expected {want:?}, found {problems:#?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_valid_program_is_refused() {
    let mut corpus = typescript_fixtures("preflight/valid");
    assert!(corpus.len() >= 60, "{} valid programs", corpus.len());
    corpus.extend(typescript_fixtures("sdk/programs/typescript/pass"));
    let mut refused = Vec::new();
    for (name, program) in &corpus {
        let problems = preflight::check(program, &[namespace_for(program)]);
        if !problems.is_empty() {
            refused.push(format!("{name}: {problems:#?}"));
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}

#[test]
fn python_programs_are_checked_the_same_way() {
    let corpus = python_fixtures("preflight/python/faulty");
    assert!(corpus.len() >= 8, "{} faulty programs", corpus.len());
    let mut wrong = Vec::new();
    for (name, program) in &corpus {
        let problems = preflight::check_python(program, &[namespace_for(program)]);
        let found: Vec<(u32, u32)> = problems.iter().map(|p| (p.line, p.column)).collect();
        let want = expected(program);
        assert!(!want.is_empty(), "{name} expects nothing");
        if found != want {
            wrong.push(format!("{name}: expected {want:?}, found {problems:#?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    let mut valid = python_fixtures("preflight/python/valid");
    valid.extend(python_fixtures("sdk/programs/python/pass"));
    let mut refused = Vec::new();
    for (name, program) in &valid {
        let problems = preflight::check_python(program, &[namespace_for(program)]);
        if !problems.is_empty() {
            refused.push(format!("{name}: {problems:#?}"));
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n"));

    // The SDK fixtures' failing programs that a literal decides are refused too.
    for (name, program) in python_fixtures("sdk/programs/python/fail") {
        let problems = preflight::check_python(&program, &[namespace_for(&program)]);
        let decided = name != "output_used_as_wrong_type";
        assert_eq!(!problems.is_empty(), decided, "{name}: {problems:#?}");
    }
}

#[test]
fn a_refused_python_program_runs_nothing_through_the_cli() {
    let dir = temp_dir("preflight-python");
    for (name, program) in python_fixtures("preflight/python/faulty") {
        let program = format!("print('started')\n{program}");
        let file = dir.path().join(format!("{name}.py"));
        std::fs::write(&file, &program).expect("write");
        let output = Command::new(codemode_binary())
            .args(["run", "--json", "--root"])
            .arg(dir.path())
            .arg(&file)
            .output()
            .expect("codemode runs");
        let out: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
        let error = &out["error"];
        assert_eq!(error["cause"], "preflight", "{name}: {out}");
        assert_eq!(out["logs"], json!([]), "{name}: nothing runs: {out}");
        assert_eq!(out["calls"], json!([]), "{name}: nothing runs: {out}");
        let want = expected(&program)[0];
        assert_eq!(
            (error["line"].as_u64(), error["column"].as_u64()),
            (Some(u64::from(want.0 + 1)), Some(u64::from(want.1))),
            "{name}: {out}"
        );
        // Without preflight the same program runs, and fails where it fails.
        let output = Command::new(codemode_binary())
            .args(["run", "--json", "--no-preflight", "--root"])
            .arg(dir.path())
            .arg(&file)
            .output()
            .expect("codemode runs");
        let out: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
        assert_eq!(out["logs"][0], "started", "{name}: {out}");
    }
}

fn run_json(program: &str, extra: &[&str]) -> Value {
    let dir = temp_dir("preflight");
    let file = dir.path().join("program.ts");
    std::fs::write(&file, program).expect("write");
    let output = Command::new(codemode_binary())
        .arg("run")
        .arg("--json")
        .args(extra)
        .arg("--root")
        .arg(dir.path())
        .arg(&file)
        .output()
        .expect("codemode runs");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn a_refused_program_runs_nothing_and_reports_every_problem_through_the_cli() {
    let corpus = typescript_fixtures("preflight/faulty");
    let builtin: Vec<_> = corpus
        .iter()
        .filter(|(_, p)| p.starts_with("// tools: builtin"))
        .collect();
    assert!(
        builtin.len() >= 10,
        "{} built-in faulty programs",
        builtin.len()
    );
    for (name, program) in builtin {
        // A log line first: it must not be printed either.
        let program = format!("console.log('started');\n{program}");
        let out = run_json(&program, &[]);
        let error = &out["error"];
        assert_eq!(error["kind"], "exception", "{name}: {out}");
        assert_eq!(error["cause"], "preflight", "{name}: {out}");
        assert_eq!(out["calls"], json!([]), "{name}: nothing runs: {out}");
        assert_eq!(out["logs"], json!([]), "{name}: nothing runs: {out}");
        let want: Vec<(u32, u32)> = expected(&program)
            .into_iter()
            .map(|(l, c)| (l + 1, c))
            .collect();
        assert_eq!(
            (error["line"].as_u64(), error["column"].as_u64()),
            (Some(u64::from(want[0].0)), Some(u64::from(want[0].1))),
            "{name}: placed at the first problem: {out}"
        );
        let message = error["message"].as_str().unwrap_or_default();
        for (line, column) in &want {
            assert!(
                message.contains(&format!("\n  {line}:{column}  ")),
                "{name}: every problem is listed: {message}"
            );
        }
    }
}

#[test]
fn the_first_call_of_a_refused_program_is_never_made_and_no_preflight_makes_it() {
    let program = "await tools.echo({ step: 1 });\nawait tools.sleep({ ms: \"10\" });\n";
    let out = run_json(program, &[]);
    assert_eq!(out["error"]["cause"], "preflight", "{out}");
    assert_eq!(
        out["error"]["message"],
        "preflight: these tool calls cannot succeed, so nothing ran (1 problem):\n  2:25  sleep: invalid arguments: \"ms\" must be a number",
    );
    assert_eq!(out["calls"], json!([]));

    // Without preflight the same mistake is found when the call is made, after `echo` ran,
    // and the run-time error is placed at the call too.
    let out = run_json(program, &["--no-preflight"]);
    let error = &out["error"];
    assert_eq!(error.get("cause"), None, "{out}");
    assert_eq!(
        error["message"],
        "ToolCallError: invalid arguments: \"ms\" must be a number"
    );
    assert_eq!(
        (error["line"].clone(), error["column"].clone()),
        (json!(2), json!(18))
    );
    let tools: Vec<&str> = out["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| c["tool"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(tools, ["echo", "sleep"]);
}

#[test]
fn a_rejected_call_is_placed_at_the_call_wherever_it_is_awaited() {
    // The argument's type is known only at run time, so preflight lets it through.
    let program = "const ms: any = \"10\";\nasync function nap(n: any) {\n  return tools.sleep({ ms: n });\n}\nconst pending = nap(ms);\nawait pending;\n";
    let out = run_json(program, &[]);
    let error = &out["error"];
    assert_eq!(
        error["message"], "ToolCallError: invalid arguments: \"ms\" must be a number",
        "{out}"
    );
    assert_eq!(
        (error["line"].clone(), error["column"].clone()),
        (json!(3), json!(21)),
        "{out}"
    );

    let program = "try {\n  await tools.fail({ message: \"no\" });\n} catch (e) {\n  throw e;\n}\n";
    let out = run_json(program, &[]);
    assert_eq!(
        (out["error"]["line"].clone(), out["error"]["column"].clone()),
        (json!(2), json!(19)),
        "{out}"
    );
}

#[test]
fn the_last_expression_is_the_result() {
    let cases: &[(&str, Value)] = &[
        ("1 + 1", json!(2)),
        (
            "const a = [1, 2, 3];\na.map((x) => x * 2)",
            json!([2, 4, 6]),
        ),
        ("await tools.echo({ a: 1 })", json!({"a": 1})),
        // A promise is awaited, as a returned one is.
        ("tools.echo({ b: 2 })", json!({"b": 2})),
        (
            "const o = { n: 1 };\n({ ...o, m: 2 })",
            json!({"n": 1, "m": 2}),
        ),
        // An explicit return still decides.
        ("if (true) { return 'early' }\n'late'", json!("early")),
        ("let x = 1;\nx = 5", json!(5)),
        ("// a comment\n  `text`  // after", json!("text")),
    ];
    for (program, want) in cases {
        let out = run_json(program, &[]);
        assert_eq!(&out["result"], want, "{program}: {out}");
    }
    for program in [
        "'use strict'",
        "const x = 1",
        "console.log('hi')",
        "for (const x of [1]) { x }",
    ] {
        let out = run_json(program, &[]);
        assert!(out.get("result").is_none(), "{program}: {out}");
        assert!(out.get("error").is_none(), "{program}: {out}");
    }
}

#[test]
fn an_error_in_the_last_expression_is_placed_as_written() {
    // `return ` is written before the expression: positions after it on that line move back.
    let program = "const o: any = {};\n  o.a.b";
    let out = run_json(program, &[]);
    let error = &out["error"];
    assert_eq!(
        error["message"],
        "TypeError: Cannot read properties of undefined (reading 'b'): o.a is undefined",
        "{out}"
    );
    assert_eq!(
        (error["line"].clone(), error["column"].clone()),
        (json!(2), json!(7)),
        "{out}"
    );
}

#[test]
fn a_program_ending_in_a_declaration_gets_a_hint() {
    let dir = temp_dir("preflight-hint");
    let file = dir.path().join("program.ts");
    std::fs::write(&file, "const items = [1, 2];\nconst total = items.length").expect("write");
    let output = Command::new(codemode_binary())
        .arg("run")
        .arg(&file)
        .output()
        .expect("codemode runs");
    let stdout = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("its last statement (line 2) declares `total`: end with `return total` (or just `total`) to return it"),
        "{stdout}"
    );
}

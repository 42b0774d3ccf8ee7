//! Errors a model can act on: every program in `fixtures/errors/` (mistakes models make) runs in
//! Node and in codemode on the same text, and codemode's message must name every identifier
//! and property Node's names, with a line. Programs whose first line is `// gap: <why>` are the
//! known misses; they must still miss (so that a fix is noticed and the header removed).

use std::io::Write;
use std::process::{Command, Stdio};

use codemode_e2e::*;
use codemode_host::strip::strip_types;
use codemode_runtime::code::{binding, BindingFn};
use serde_json::Value;

/// The same tools `errors/run-node.mjs` gives Node.
fn error_tools() -> Vec<(&'static str, BindingFn)> {
    let fixed = |value: Value| {
        binding(move |_, _| {
            let value = value.clone();
            async move { Ok(value) }
        })
    };
    vec![
        (
            "search",
            fixed(
                json!({"results": [{"title": "a", "score": 1}, {"title": "b", "score": 2}], "total": 2}),
            ),
        ),
        (
            "get_user",
            binding(|args, _| async move {
                let id = args
                    .get(0)
                    .and_then(|a| a.get("id"))
                    .cloned()
                    .unwrap_or(Value::Null);
                Ok(json!({"id": id, "name": "Ada"}))
            }),
        ),
        (
            "list_users",
            fixed(json!([{"name": "a", "profile": {"active": true}}, {"name": "b"}])),
        ),
        ("read_file", fixed(json!("{bad json"))),
        ("fail_always", failing("failed on purpose")),
    ]
}

fn node_messages(programs: &[(String, String)]) -> Vec<Option<String>> {
    let input: Vec<Value> = programs
        .iter()
        .map(|(name, ts)| {
            let js = strip_types(ts).unwrap_or_else(|e| panic!("{name}: {}", e.message));
            json!({"name": name, "js": js})
        })
        .collect();
    let script = codemode_e2e::manifest_dir().join("e2e/errors/run-node.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node must be on PATH (.ci/run installs it with the test toolchain)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(Value::Array(input).to_string().as_bytes())
        .expect("write programs");
    let out = child.wait_with_output().expect("node runs");
    assert!(out.status.success(), "node failed");
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).expect("node's JSON");
    results
        .into_iter()
        .map(|r| r["message"].as_str().map(str::to_owned))
        .collect()
}

const NOT_NAMES: &[&str] = &["in", "intermediate", "value", "object", "Object"];

fn identifier(word: &str) -> bool {
    let mut chars = word.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .filter(|w| !w.is_empty())
}

/// The identifiers and properties a V8 message names: single-quoted identifiers (`'c'`), and
/// the subject of `X is not defined / a function / iterable / a constructor`.
fn names_in(node: &str) -> Vec<String> {
    let body = node.split_once(": ").map_or(node, |(_, m)| m);
    let mut names = Vec::new();
    let mut quoted = body.split('\'');
    quoted.next();
    while let (Some(inside), _) = (quoted.next(), quoted.next()) {
        if identifier(inside) {
            names.push(inside.to_owned());
        }
    }
    for verb in [
        " is not defined",
        " is not a function",
        " is not iterable",
        " is not a constructor",
    ] {
        if let Some((subject, _)) = body.split_once(verb) {
            names.extend(words(subject).filter(|w| identifier(w)).map(str::to_owned));
        }
    }
    names.retain(|n| !NOT_NAMES.contains(&n.as_str()));
    names.dedup();
    names
}

fn names_all(message: &str, names: &[String]) -> bool {
    names.iter().all(|n| words(message).any(|w| w == n))
}

#[tokio::test]
async fn codemode_names_what_node_names_with_a_line() {
    let programs = typescript_fixtures("errors");
    assert!(
        programs.len() >= 40,
        "the corpus has {} programs",
        programs.len()
    );
    let node = node_messages(&programs);
    let rt = runtime();
    let mut matched = 0;
    let mut surprises = Vec::new();
    for ((name, ts), node) in programs.iter().zip(node) {
        let node = node.unwrap_or_else(|| panic!("{name}: Node ran it without an error"));
        let r = run_on(&rt, ts, vec![tools(error_tools())], None).await;
        let error = r
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: codemode ran it without an error: {r:?}"));
        let names = names_in(&node);
        let ok = names_all(&error.message, &names) && error.line.is_some_and(|l| l > 0);
        let gap = ts.starts_with("// gap:");
        eprintln!(
            "{} {name}\n    node:     {node}\n    codemode: {} (line {:?})",
            if ok { "match" } else { "MISS " },
            error.message,
            error.line
        );
        if ok {
            matched += 1;
        }
        if ok == gap {
            surprises.push(if ok {
                format!("{name} now matches: remove its `// gap:` line")
            } else {
                format!("{name} misses: Node names {names:?} in {node:?}; codemode said {:?} at line {:?}", error.message, error.line)
            });
        }
    }
    eprintln!("{matched} of {} match", programs.len());
    assert!(surprises.is_empty(), "{}", surprises.join("\n"));
}

#[test]
fn names_are_read_from_v8_messages() {
    assert_eq!(
        names_in("TypeError: Cannot read properties of undefined (reading 'c')"),
        vec!["c"]
    );
    assert_eq!(
        names_in("TypeError: tools.serach is not a function"),
        vec!["tools", "serach"]
    );
    assert_eq!(
        names_in("ReferenceError: totl is not defined"),
        vec!["totl"]
    );
    assert_eq!(
        names_in("TypeError: Cannot use 'in' operator to search for 'a' in undefined"),
        vec!["a"]
    );
    assert!(names_in("TypeError: Assignment to constant variable.").is_empty());
    assert!(names_all("x is y (reading 'c')", &["c".into()]));
    assert!(!names_all("cannot convert", &["c".into()]));
}

#[tokio::test]
async fn run_code_shows_the_failing_line_under_a_caret_and_the_tool_vocabulary() {
    let program = "const q = 'rust';\nconst hits = await tools.serach({ q });\nreturn hits;";
    // Preflight finds the name before the run; without it the engine's error is explained.
    let checked = {
        let mut cm = harness::CodeMode::new();
        cm.add(harness::tool("search", |_, _| async { Ok(json!([])) }));
        cm.add(harness::tool("searchDocs", |_, _| async { Ok(json!([])) }));
        cm.run(program).await
    };
    assert_eq!(checked.error_code(), Some("CODE_RUN_FAILED"));
    assert_eq!(
        checked.text(),
        "Error: code run failed (exception): preflight: these tool calls cannot succeed, so nothing ran (1 problem):\n  2:26  unknown tool \"serach\"; did you mean \"search\"? Known: search, searchDocs.\n    2 | const hits = await tools.serach({ q });\n      |                          ^"
    );
    let mut cm = harness::CodeMode::with(
        codemode_runtime::run_code::RunCodeConfig::default().preflight(false),
        codemode_host::Budgets::default(),
    );
    cm.add(harness::tool("search", |_, _| async { Ok(json!([])) }));
    cm.add(harness::tool("searchDocs", |_, _| async { Ok(json!([])) }));
    let result = cm.run(program).await;
    assert_eq!(result.error_code(), Some("CODE_RUN_FAILED"));
    assert_eq!(
        result.text(),
        "Error: code run failed (exception): TypeError: tools.serach is not a function: unknown tool \"serach\"; did you mean \"search\"? Known: search, searchDocs.\n    2 | const hits = await tools.serach({ q });\n      |                                ^"
    );
}

#[tokio::test]
async fn a_program_ending_in_an_expression_returns_it_and_one_ending_in_a_declaration_gets_a_hint()
{
    let mut cm = harness::CodeMode::new();
    cm.add(harness::tool("search", |_, _| async {
        Ok(json!([1, 2, 3]))
    }));
    let last = cm
        .run("const rows = await tools.search({});\nrows.filter((r: number) => r > 1)")
        .await;
    assert_eq!(last.value(), Some(&json!({"logs": [], "result": [2, 3]})));
    let declared = cm
        .run("const rows = await tools.search({});\nconst big = rows.filter((r: number) => r > 1);")
        .await;
    assert!(!declared.is_error());
    let hint = "hint: the program returned nothing; its last statement (line 2) declares `big`: end with `return big` (or just `big`) to return it";
    assert_eq!(declared.value(), Some(&json!({"logs": [], "hint": hint})));
    assert_eq!(
        declared.text(),
        format!("{}\n{hint}", codemode_runtime::run_code::NO_OUTPUT)
    );
    // Statements kept for their effect get no hint, nor does a program that returns.
    for quiet in [
        "console.log('done')",
        "const x = 1;\nlet y = 0;\nif (x) { y = x + 1 }",
        "let total;\ntotal = 1;\nfor (const r of [1]) total += r;",
        "await tools.search({});\nreturn;",
        "return (await tools.search({})).length",
    ] {
        let r = cm.run(quiet).await;
        assert!(
            r.value().is_some_and(|v| v.get("hint").is_none()),
            "{quiet}: {:?}",
            r.value()
        );
    }
}

#[tokio::test]
async fn a_better_message_that_would_not_fit_the_output_cap_is_not_used() {
    let rt = runtime_with(codemode_host::Budgets {
        max_output_bytes: 80,
        ..codemode_host::Budgets::default()
    });
    let r = run_on(
        &rt,
        "const r: any = {};\nreturn r.some_long_property_name.another_long_property_name;",
        vec![tools(vec![])],
        None,
    )
    .await;
    let message = failure(&r, codemode_runtime::code::FailureKind::Exception);
    assert_eq!(message, "TypeError: cannot convert 'undefined' to object");
}

/// A failure inside a call's arguments or a native function's own throw must not be blamed on
/// the enclosing call or statement.
#[tokio::test]
async fn a_failure_reported_at_an_enclosing_node_is_not_blamed_on_it() {
    let rt = runtime();
    for (program, wrong) in [
        ("const res: any = {};\nreturn Object.keys(res.meta);", "'keys'"),
        ("const res: any = {};\nreturn JSON.stringify(res.items.map((x: any) => x));", "'stringify'"),
        ("const out: any = {}; const data: any = {};\nout.items = data.items.map((x: any) => x);", "'items'"),
        ("const res: any = {};\nreturn res.items.map((x: any) => x).length;", "'length'"),
        ("const x: any = { y: {} };\nconsole.log(x?.y.z());", "console.log"),
        ("const f: any = 1;\nconsole.log(`${f`a`}`);", "console.log"),
    ] {
        let r = run_on(&rt, program, vec![tools(vec![])], None).await;
        let message = failure(&r, codemode_runtime::code::FailureKind::Exception);
        assert!(!message.contains(wrong), "{program}: {message}");
    }
}

/// With `guest/patches/boa_engine/` applied, each operation that can throw is placed at its
/// own node (not at the call or statement around it), and the message says which value it met.
#[tokio::test]
async fn each_failing_operation_is_placed_at_its_own_node() {
    let rt = runtime();
    for (program, line, column, expected) in [
        (
            "const r: any = {};\nreturn r.items.map((x: any) => x);",
            2,
            16,
            "TypeError: Cannot read properties of undefined (reading 'map'): r.items is undefined",
        ),
        (
            "const a: any = undefined;\nfor (const x of a) {}",
            2,
            17,
            "TypeError: a is not iterable (it is undefined)",
        ),
        (
            "const r: any = {};\nconst { data: { items } } = r;",
            2,
            15,
            "TypeError: Cannot destructure property 'items' of 'r.data' as it is undefined.",
        ),
        (
            "const o: any = null;\nreturn 'k' in o;",
            2,
            8,
            "TypeError: Cannot use 'in' operator to search for 'k' in o: it is null",
        ),
        (
            "const f: any = null;\nreturn f(1);",
            2,
            9,
            "TypeError: f is not a function (it is null)",
        ),
        (
            "const a = b;\nconst b = 1;\nreturn a;",
            1,
            11,
            "ReferenceError: Cannot access 'b' before initialization",
        ),
        (
            "const xs: any = 3;\nreturn [0, ...xs];",
            2,
            15,
            "TypeError: xs is not iterable (it is a number)",
        ),
        (
            "const o: any = { a: {} };\nreturn o?.a.b.c;",
            2,
            15,
            "TypeError: Cannot read properties of undefined (reading 'c'): o?.a.b is undefined",
        ),
        (
            "const o: any = { a: {} };\nreturn o?.a[\"k\"].c;",
            2,
            18,
            "TypeError: Cannot read properties of undefined (reading 'c'): o?.a[\"k\"] is undefined",
        ),
        (
            "const x: any = { y: {} };\nconsole.log(x?.y.z());",
            2,
            19,
            "TypeError: x?.y.z is not a function (it is undefined)",
        ),
        (
            "const f: any = { g: () => undefined };\nreturn f.g?.(1).h;",
            2,
            17,
            "TypeError: Cannot read properties of undefined (reading 'h'): f.g?.(1) is undefined",
        ),
        (
            "const tag: any = 1;\nreturn tag<string>`a${1}b`;",
            2,
            11,
            "TypeError: tag is not a function (it is a number)",
        ),
        (
            "const o: any = {};\nreturn o.fmt.x`a`;",
            2,
            14,
            "TypeError: Cannot read properties of undefined (reading 'x'): o.fmt is undefined",
        ),
    ] {
        let r = run_on(&rt, program, vec![tools(vec![])], None).await;
        let error = r
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("{program}: {r:?}"));
        assert_eq!(
            (error.message.as_str(), error.line, error.column),
            (expected, Some(line), Some(column)),
            "{program}"
        );
    }
}

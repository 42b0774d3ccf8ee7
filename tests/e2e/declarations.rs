//! A program's own declarations, beside Node: a name declared twice at the top of the program
//! (`let`, `const`, `class`, or one of those and `var` or a function) is the `SyntaxError`
//! Node raises before running anything, placed at the second declaration; what Node accepts
//! (`var` twice, function twice, shadowing in a block, `var` in a nested function) runs as in
//! Node.

use codemode_e2e::run;
use serde_json::Value;

/// Node's answer for `body` as the body of an async function: `Ok(value)` or the
/// `SyntaxError`'s text.
fn in_node(body: &str) -> Result<Value, String> {
    let script = format!(
        "let f;\ntry {{ f = new Function('return (async function () {{\\'use strict\\';\\n' + {body} + '\\n}})')(); }} catch (e) {{ process.stdout.write(JSON.stringify({{error: `${{e.name}}: ${{e.message}}`}})); process.exit(0); }}\nf().then((v) => process.stdout.write(JSON.stringify({{value: v === undefined ? null : v}})));",
        body = serde_json::to_string(body).unwrap_or_default()
    );
    let out = std::process::Command::new("node")
        .args(["-e", &script])
        .output()
        .expect("node must be on PATH (.ci/run installs it with the test toolchain)");
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    match answer.get("error") {
        Some(Value::String(error)) => Err(error.clone()),
        _ => Ok(answer["value"].clone()),
    }
}

#[tokio::test]
async fn redeclarations_at_the_top_of_a_program_are_syntax_errors_as_in_node() {
    let cases = [
        ("let x = 1;\nlet x = 2;\nreturn x;", Some((2, 5))),
        ("const x = 1;\nclass x {}\nreturn 1;", Some((2, 7))),
        ("var a = 1;\nlet a = 2;\nreturn a;", Some((2, 5))),
        ("function f() {}\nlet f = 1;\nreturn 1;", Some((2, 5))),
        ("let g = 1;\nfunction g() {}\nreturn 1;", Some((2, 10))),
        (
            "if (true) { var z = 1; }\nlet z = 2;\nreturn z;",
            Some((2, 5)),
        ),
        (
            "let [a, { b: [c] }] = [1, { b: [2] }];\nconst c = 3;\nreturn a;",
            Some((2, 7)),
        ),
        ("var a = 1;\nvar a = 2;\nreturn a;", None),
        (
            "function g() { return 1; }\nfunction g() { return 2; }\nreturn g();",
            None,
        ),
        ("let u = 1;\n{ let u = 2; }\nreturn u;", None),
        (
            "function h() { var q = 1; return q; }\nlet q = 2;\nreturn q + h();",
            None,
        ),
        ("for (var i = 0; i < 2; i++) {}\nreturn i;", None),
    ];
    for (program, refused_at) in cases {
        let node = in_node(program);
        let ours = run(program).await;
        match (&node, refused_at) {
            (Err(message), Some((line, column))) => {
                let error = ours.error.unwrap_or_else(|| panic!("{program}: ran"));
                assert_eq!(&error.message, message, "{program}");
                assert_eq!(
                    (error.line, error.column),
                    (Some(line), Some(column)),
                    "{program}"
                );
            }
            (Ok(value), None) => {
                assert!(ours.error.is_none(), "{program}: {:?}", ours.error);
                assert_eq!(ours.value.as_ref(), Some(value), "{program}");
            }
            _ => panic!("{program}: Node says {node:?}"),
        }
    }
}

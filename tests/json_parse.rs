//! `JSON.parse` in the sandbox (codemode's own parser in front of Boa's) agrees with Node's on
//! the texts of `fixtures/json/parse.js`: generated documents with repeated, index-like and
//! duplicate keys, `__proto__`, escapes, every width of string and every form of number;
//! objects changed after parsing, rows that share a shape, more keys than a shared shape takes,
//! deep nesting, revivers, texts that are not JSON, and the same kinds of values arriving as a
//! tool's reply.

use std::path::PathBuf;
use std::process::Command;

use codemode_e2e::run;
use serde_json::Value;

fn program() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/json/parse.js");
    std::fs::read_to_string(path).expect("the fixture")
}

fn node(body: &str) -> Value {
    let script = format!(
        "(async function () {{'use strict';\n{body}\n}})().then((v) => process.stdout.write(JSON.stringify(v)), (e) => {{ console.error(e); process.exit(1); }});"
    );
    let out = Command::new("node")
        .args(["-e", &script])
        .output()
        .expect("node must be on PATH (.ci/run installs it with the test toolchain)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("node's JSON")
}

#[tokio::test]
async fn json_parse_agrees_with_node() {
    let body = program();
    let expected = node(&body);
    let result = run(&body).await;
    assert!(result.error.is_none(), "{:?}", result.error);
    let got = result.value.expect("a value");
    let (Value::Array(expected), Value::Array(got)) = (expected, got) else {
        panic!("both return arrays");
    };
    assert!(expected.len() > 500, "the fixture makes its cases");
    assert_eq!(got.len(), expected.len());
    let short = |v: &Value| v.to_string().chars().take(2_000).collect::<String>();
    for (i, (node, ours)) in expected.iter().zip(&got).enumerate() {
        assert!(
            ours == node,
            "case {i}:\n node:     {}\n codemode: {}",
            short(node),
            short(ours)
        );
    }
}

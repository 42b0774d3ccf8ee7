//! `JSON.stringify` in the sandbox agrees with Node's on the values of
//! `fixtures/json/stringify.js`: generated values of every kind (escapes, lone surrogates,
//! `-0`, huge and tiny numbers, boxed primitives, dates), `space` of every form, replacer
//! functions and arrays, `toJSON`, cycles and BigInt throwing, proxies, and deep nesting.

use std::path::PathBuf;
use std::process::Command;

use codemode_e2e::run;
use serde_json::Value;

fn program() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/json/stringify.js");
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
async fn json_stringify_agrees_with_node() {
    let body = program();
    let expected = node(&body);
    let result = run(&body).await;
    assert!(result.error.is_none(), "{:?}", result.error);
    let got = result.value.expect("a value");
    let (Value::Array(expected), Value::Array(got)) = (expected, got) else {
        panic!("both return arrays");
    };
    assert!(expected.len() > 400, "the fixture makes its cases");
    assert_eq!(got.len(), expected.len());
    let decode = |v: &Value| match v {
        Value::Array(codes) => codes
            .iter()
            .map(|c| {
                let c = c.as_u64().unwrap_or(0) as u32;
                char::from_u32(c).map_or_else(|| format!("\\u{{{c:x}}}"), String::from)
            })
            .collect::<String>(),
        other => other.to_string(),
    };
    for (i, (node, ours)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(
            ours,
            node,
            "case {i}:\n node:     {}\n codemode: {}",
            decode(node),
            decode(ours)
        );
    }
}

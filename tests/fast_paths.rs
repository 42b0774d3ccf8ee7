//! The shortcuts the sandbox's Boa takes for data-heavy programs (object literals adding keys,
//! `JSON.stringify` reading plain objects by shape, array iterators stepped without result
//! objects; `guest/patches/`) agree with Node on `fixtures/fast-paths.js`: each shortcut beside
//! the cases that must leave it (repeated and index keys, accessors, objects changed while they
//! are serialised, replaced iterator methods, proxies, typed arrays, generators).

use std::path::PathBuf;
use std::process::Command;

use codemode_e2e::run;
use serde_json::Value;

fn program() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/fast-paths.js");
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
async fn the_fast_paths_agree_with_node() {
    let body = program();
    let expected = node(&body);
    let result = run(&body).await;
    assert!(result.error.is_none(), "{:?}", result.error);
    let got = result.value.expect("a value");
    let (Value::Array(expected), Value::Array(got)) = (expected, got) else {
        panic!("both return arrays");
    };
    assert!(expected.len() > 40, "the fixture makes its cases");
    assert_eq!(got.len(), expected.len());
    for (node, ours) in expected.iter().zip(&got) {
        assert_eq!(ours, node, "case {}", node[0]);
    }
}

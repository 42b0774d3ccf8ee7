//! `JSON.stringify` in the sandbox agrees with Node's on the values of
//! `fixtures/json/stringify.js`: generated values of every kind (escapes, lone surrogates,
//! `-0`, huge and tiny numbers, boxed primitives, dates), `space` of every form, replacer
//! functions and arrays, `toJSON`, cycles and BigInt throwing, proxies, and deep nesting.

use codemode_e2e::fixture_cases_beside_node;
use serde_json::Value;

#[tokio::test]
async fn json_stringify_agrees_with_node() {
    let (node, ours) = fixture_cases_beside_node("json/stringify.js", 400).await;
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
    for (i, (node, ours)) in node.iter().zip(&ours).enumerate() {
        assert_eq!(
            ours,
            node,
            "case {i}:\n node:     {}\n codemode: {}",
            decode(node),
            decode(ours)
        );
    }
}

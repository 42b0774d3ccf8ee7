//! `JSON.parse` in the sandbox (codemode's own parser in front of Boa's) agrees with Node's on
//! the texts of `fixtures/json/parse.js`: generated documents with repeated, index-like and
//! duplicate keys, `__proto__`, escapes, every width of string and every form of number;
//! objects changed after parsing, rows that share a shape, more keys than a shared shape takes,
//! deep nesting, revivers, texts that are not JSON, and the same kinds of values arriving as a
//! tool's reply.

use codemode_e2e::fixture_cases_beside_node;
use serde_json::Value;

#[tokio::test]
async fn json_parse_agrees_with_node() {
    let (node, ours) = fixture_cases_beside_node("json/parse.js", 500).await;
    let short = |v: &Value| v.to_string().chars().take(2_000).collect::<String>();
    for (i, (node, ours)) in node.iter().zip(&ours).enumerate() {
        assert!(
            ours == node,
            "case {i}:\n node:     {}\n codemode: {}",
            short(node),
            short(ours)
        );
    }
}

//! The SDK is a function of the set of tools: shuffling the tools and reordering the keys of every
//! JSON object (and the entries of `required`, which is a set) changes no byte. Also: rendering
//! arbitrary schema-like values never panics.

mod common;

use codemode_sdk_gen::{render_sdk, Language, ToolSchema};
use common::{golden_cases, load_tools};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Every tool of every fixture, made unique by a per-file prefix.
fn all_fixture_tools() -> Vec<ToolSchema> {
    let mut tools = Vec::new();
    for (case, path) in golden_cases() {
        for mut tool in load_tools(&path) {
            tool.name = format!("{case}__{}", tool.name);
            tools.push(tool);
        }
    }
    tools
}

/// Re-serialises `value` with object keys and `required` entries in an order drawn from `seed`,
/// then parses it again, so the perturbation survives even a map that keeps insertion order.
fn perturb(value: &Value, seed: &mut u64) -> Value {
    let mut text = String::new();
    write_perturbed(value, seed, &mut text, false);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("re-parse failed: {e}\n{text}"))
}

fn next(seed: &mut u64) -> u64 {
    // xorshift64: a small deterministic stream, enough to pick permutations.
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn shuffle<T>(items: &mut [T], seed: &mut u64) {
    for i in (1..items.len()).rev() {
        let j = (next(seed) % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

fn write_perturbed(value: &Value, seed: &mut u64, out: &mut String, is_required: bool) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            shuffle(&mut entries, seed);
            out.push('{');
            for (i, (key, child)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_perturbed(child, seed, out, key == "required");
            }
            out.push('}');
        }
        Value::Array(items) => {
            let mut items: Vec<&Value> = items.iter().collect();
            if is_required {
                shuffle(&mut items, seed);
            }
            out.push('[');
            for (i, child) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_perturbed(child, seed, out, false);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn perturbed_tools(tools: &[ToolSchema], seed: u64) -> Vec<ToolSchema> {
    let mut seed = seed | 1;
    let mut copy: Vec<ToolSchema> = tools
        .iter()
        .map(|tool| ToolSchema {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: perturb(&tool.parameters, &mut seed),
            output: tool.output.as_ref().map(|o| perturb(o, &mut seed)),
        })
        .collect();
    shuffle(&mut copy, &mut seed);
    copy
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn shuffled_tools_and_perturbed_keys_give_identical_bytes(seed in any::<u64>()) {
        let tools = all_fixture_tools();
        let shuffled = perturbed_tools(&tools, seed);
        for language in [Language::TypeScript, Language::Python] {
            prop_assert_eq!(render_sdk(&tools, language), render_sdk(&shuffled, language));
        }
    }

    #[test]
    fn arbitrary_schemas_render_deterministically_and_never_panic(
        schemas in proptest::collection::vec(schema_strategy(), 1..4),
        seed in any::<u64>(),
    ) {
        let tools: Vec<ToolSchema> = schemas
            .into_iter()
            .enumerate()
            .map(|(i, schema)| ToolSchema {
                name: format!("tool-{i}"),
                description: Some("A tool.".into()),
                parameters: schema.clone(),
                output: Some(schema),
            })
            .collect();
        let shuffled = perturbed_tools(&tools, seed);
        for language in [Language::TypeScript, Language::Python] {
            prop_assert_eq!(render_sdk(&tools, language), render_sdk(&shuffled, language));
        }
    }
}

#[test]
fn repeated_rendering_is_byte_identical() {
    let tools = all_fixture_tools();
    for language in [Language::TypeScript, Language::Python] {
        assert_eq!(render_sdk(&tools, language), render_sdk(&tools, language));
    }
}

#[test]
fn the_perturbation_really_reorders_keys() {
    // Guards the property above against a perturbation that silently does nothing.
    let value: Value = serde_json::from_str(r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut text = String::new();
    let mut seed = 7;
    write_perturbed(&value, &mut seed, &mut text, false);
    assert_ne!(text, r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}"#);
    assert_eq!(perturb(&value, &mut 7), value);
}

/// Schema-like JSON: real keywords (some misused), names that need quoting, `$ref`s that may or
/// may not resolve, nested a few levels.
fn schema_strategy() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("a".to_owned()),
        Just("b-c".to_owned()),
        Just("class".to_owned()),
        Just("ﬁ".to_owned()),
        Just("_x".to_owned()),
        Just("\u{1F600}".to_owned()),
    ];
    let leaf = prop_oneof![
        Just(serde_json::json!({"type": "string"})),
        Just(serde_json::json!({"type": ["integer", "null"], "minimum": 0})),
        Just(serde_json::json!({"enum": ["x", 1, null, 2.5]})),
        Just(serde_json::json!({"const": true})),
        Just(serde_json::json!({"$ref": "#/$defs/d"})),
        Just(serde_json::json!({"$ref": "#"})),
        Just(serde_json::json!({"$ref": "http://x/y"})),
        Just(serde_json::json!({"not": {}})),
        Just(serde_json::json!({})),
        Just(serde_json::json!(false)),
        Just(serde_json::json!(3)),
    ];
    leaf.prop_recursive(4, 24, 4, move |inner| {
        prop_oneof![
            proptest::collection::btree_map(key.clone(), inner.clone(), 0..4).prop_map(|props| {
                let required: Vec<Value> = props
                    .keys()
                    .take(2)
                    .map(|k| Value::String(k.clone()))
                    .collect();
                let mut map = Map::new();
                map.insert("type".into(), "object".into());
                map.insert(
                    "properties".into(),
                    Value::Object(props.into_iter().collect()),
                );
                map.insert("required".into(), Value::Array(required));
                Value::Object(map)
            }),
            inner
                .clone()
                .prop_map(|items| serde_json::json!({"type": "array", "items": items})),
            proptest::collection::vec(inner.clone(), 0..3)
                .prop_map(|v| serde_json::json!({"anyOf": v})),
            proptest::collection::vec(inner.clone(), 1..3)
                .prop_map(|v| serde_json::json!({"allOf": v})),
            inner.prop_map(|d| serde_json::json!({"$defs": {"d": d}, "$ref": "#/$defs/d"})),
        ]
    })
}

//! Rendering never exhausts the stack: 5,000-deep schemas of every nesting keyword render on a
//! thread with a deliberately small stack (an unbounded recursion over 5,000 levels would need
//! far more). The deep values themselves are built and dropped on a roomy thread, because
//! `serde_json::Value`'s own destructor recurses.

use codemode_sdk_gen::{render_sdk, Language, ToolSchema, MAX_DEPTH};
use serde_json::{json, Map, Value};

const DEPTH: usize = 5_000;
/// Small enough that a recursion over 5,000 schema levels would overflow it (a few hundred bytes
/// a level is already more than 1 MiB), roomy enough for the bounded depth of the renderers.
const RENDER_STACK: usize = 1024 * 1024;
const BUILD_STACK: usize = 256 * 1024 * 1024;

/// An object from `pairs`, taking the values by move. (`json!` serialises interpolated values
/// again, which would make building a deep value quadratic.)
fn object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<Map<_, _>>(),
    )
}

/// Builds a schema with `wrap` applied `DEPTH` times around `leaf`, renders it in both languages
/// on a small stack, and returns the two texts.
fn render_deep(leaf: Value, wrap: fn(Value) -> Value) -> (String, String) {
    let builder = std::thread::Builder::new().stack_size(BUILD_STACK);
    let handle = builder.spawn(move || {
        let mut schema = leaf;
        for _ in 0..DEPTH {
            schema = wrap(schema);
        }
        let tools = vec![ToolSchema {
            name: "deep".into(),
            description: None,
            parameters: object(vec![
                ("type", json!("object")),
                ("properties", object(vec![("x", schema.clone())])),
            ]),
            output: Some(schema),
        }];
        let rendered = std::thread::scope(|scope| {
            let small = std::thread::Builder::new().stack_size(RENDER_STACK);
            let renderer = small
                .spawn_scoped(scope, || {
                    (
                        render_sdk(&tools, Language::TypeScript),
                        render_sdk(&tools, Language::Python),
                    )
                })
                .unwrap_or_else(|e| panic!("cannot start the render thread: {e}"));
            renderer.join()
        });
        drop(tools);
        rendered
    });
    match handle.map(|h| h.join()) {
        Ok(Ok(Ok(texts))) => texts,
        _ => panic!("rendering a {DEPTH}-deep schema failed or overflowed its stack"),
    }
}

#[test]
fn a_5000_deep_one_of_chain_is_one_flat_union() {
    let (ts, py) = render_deep(json!({"type": "null"}), |inner| {
        object(vec![(
            "oneOf",
            Value::Array(vec![json!({"type": "string"}), inner]),
        )])
    });
    let expected = format!(
        "  deep: string{};\n",
        " | string".repeat(DEPTH - 1) + " | null"
    );
    assert!(ts.contains(&expected), "{}", &ts[..ts.len().min(2000)]);
    assert!(
        py.contains("-> str | None:"),
        "{}",
        &py[..py.len().min(2000)]
    );
}

#[test]
fn a_5000_deep_any_of_chain_where_null_repeats_renders_every_member() {
    let (ts, _) = render_deep(json!({"type": "string"}), |inner| {
        object(vec![(
            "anyOf",
            Value::Array(vec![inner, json!({"type": "null"})]),
        )])
    });
    let expected = format!("  deep: string{};\n", " | null".repeat(DEPTH));
    assert!(ts.contains(&expected), "{}", &ts[..ts.len().min(2000)]);
}

#[test]
fn deeply_nested_objects_stop_at_the_depth_limit_with_unknown() {
    let (ts, py) = render_deep(json!({"type": "string"}), |inner| {
        object(vec![
            ("type", json!("object")),
            ("additionalProperties", json!(false)),
            ("properties", object(vec![("a", inner)])),
            ("required", json!(["a"])),
        ])
    });
    assert!(
        ts.contains(": unknown;"),
        "no cut-off in the TypeScript text"
    );
    assert!(
        !ts.contains(": string;"),
        "the leaf below the limit was printed"
    );
    // One line per level down to the limit, not 5,000.
    let levels = ts.matches("a: {").count();
    assert!(
        levels <= 2 * (MAX_DEPTH + 1),
        "{levels} object levels printed"
    );
    assert!(py.contains("    a: Any"), "no cut-off in the Python text");
}

#[test]
fn deeply_nested_arrays_and_intersections_render() {
    let (ts, py) = render_deep(json!({"type": "boolean"}), |inner| {
        object(vec![("type", json!("array")), ("items", inner)])
    });
    assert!(ts.contains("unknown[][]"), "{}", &ts[..ts.len().min(2000)]);
    assert!(py.contains("list[list["), "{}", &py[..py.len().min(2000)]);

    let (ts, _) = render_deep(json!({"type": "boolean"}), |inner| {
        object(vec![("allOf", Value::Array(vec![inner]))])
    });
    assert!(
        ts.contains("  deep: unknown;\n"),
        "{}",
        &ts[..ts.len().min(2000)]
    );
}

#[test]
fn a_5000_long_chain_of_shared_definitions_renders_each_once() {
    let builder = std::thread::Builder::new().stack_size(RENDER_STACK);
    let handle = builder.spawn(|| {
        // d0 refers to d1 twice, d1 to d2 twice, …: inlining would print 2^5000 copies.
        let mut defs = serde_json::Map::new();
        for i in 0..DEPTH {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({"type": "object", "properties": {"l": {"$ref": next}, "r": {"$ref": next}}}),
            );
        }
        defs.insert(format!("d{DEPTH}"), json!({"type": "string"}));
        let schema = object(vec![
            ("$ref", json!("#/$defs/d0")),
            ("$defs", Value::Object(defs)),
        ]);
        let tools = [ToolSchema {
            name: "chain".into(),
            description: None,
            parameters: json!({}),
            output: Some(schema),
        }];
        (
            render_sdk(&tools, Language::TypeScript),
            render_sdk(&tools, Language::Python),
        )
    });
    let (ts, py) = match handle.map(|h| h.join()) {
        Ok(Ok(texts)) => texts,
        _ => panic!("rendering a long definition chain failed or overflowed its stack"),
    };
    assert!(ts.contains("type ChainD4999 = {\n  l?: string;\n  r?: string;\n}\n"));
    assert!(ts.len() < 1_000_000, "{} bytes", ts.len());
    assert!(py.contains("class ChainD4999(TypedDict):"));
    assert!(py.len() < 2_000_000, "{} bytes", py.len());
}

#[test]
fn pointers_into_inline_schemas_cannot_double_the_output_at_every_level() {
    // Level k holds level k+1 inline and refers to it once more: inlining both would print
    // 2^16 copies of the leaf, megabytes of text.
    let levels = 16;
    let mut schema = json!({"type": "string"});
    for k in (0..levels).rev() {
        let path: String = (0..=k).map(|_| "/properties/n").collect();
        schema = object(vec![
            ("type", json!("object")),
            (
                "properties",
                object(vec![
                    ("n", schema),
                    ("again", json!({"$ref": format!("#{path}")})),
                ]),
            ),
        ]);
    }
    let tools = [ToolSchema {
        name: "twice".into(),
        description: None,
        parameters: json!({}),
        output: Some(schema),
    }];
    let ts = render_sdk(&tools, Language::TypeScript);
    let py = render_sdk(&tools, Language::Python);
    assert!(ts.len() < 100_000, "{} bytes", ts.len());
    assert!(py.len() < 100_000, "{} bytes", py.len());
}

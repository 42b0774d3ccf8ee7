//! The TypeScript text, rule by rule, with exact expected strings.

mod common;

use codemode_sdk_gen::{render_sdk, Language, ToolSchema};
use common::{fenced_code, tool};
use serde_json::{json, Value};

fn ts(tools: &[ToolSchema]) -> String {
    render_sdk(tools, Language::TypeScript)
}

/// The TypeScript type an output schema maps to (output types have no implicit root and no doc).
fn output_type(schema: Value) -> String {
    let sdk = ts(&[tool("t", None, json!({}), Some(schema))]);
    let start = sdk
        .find("interface ToolOutputMap {\n  t: ")
        .map(|i| i + "interface ToolOutputMap {\n  t: ".len())
        .unwrap_or_else(|| panic!("no output member in:\n{sdk}"));
    let end = sdk[start..]
        .find(";\n}\n\ntype ToolName")
        .unwrap_or_else(|| panic!("no end of ToolOutputMap in:\n{sdk}"));
    sdk[start..start + end].to_owned()
}

/// The `ToolArgsMap` member (doc line included) of a single tool.
fn args_member(name: &str, description: Option<&str>, parameters: Value) -> String {
    let sdk = ts(&[tool(name, description, parameters, None)]);
    let start = sdk
        .find("interface ToolArgsMap {\n")
        .map(|i| i + "interface ToolArgsMap {\n".len())
        .unwrap_or_else(|| panic!("no ToolArgsMap in:\n{sdk}"));
    let end = sdk[start..]
        .find("\n}\n\ninterface ToolOutputMap")
        .unwrap_or_else(|| panic!("no end of ToolArgsMap in:\n{sdk}"));
    sdk[start..start + end].to_owned()
}

#[test]
fn json_object_is_declared_once_and_only_when_a_schema_is_open() {
    const DECLARATION: &str = "type JsonObject = Record<string, JsonValue>\n";
    let closed = json!({"type": "object", "properties": {"p": {"type": "string"}}});
    let sdk = ts(&[tool("a", None, closed.clone(), None)]);
    assert!(!sdk.contains("JsonObject"), "{sdk}");
    let open = json!({"type": "object", "properties": {"p": {"type": "string"}}, "additionalProperties": true});
    let sdk = ts(&[
        tool("a", None, closed, None),
        tool("b", None, open.clone(), Some(json!({"type": "object"}))),
        tool("c", None, open, None),
    ]);
    assert_eq!(sdk.matches(DECLARATION).count(), 1, "{sdk}");
    assert_eq!(sdk.matches("JsonObject").count(), 4, "{sdk}");
    assert!(
        sdk.contains("{ [key: string]: JsonValue }\n\ntype JsonObject"),
        "{sdk}"
    );
}

#[test]
fn scalars_map_to_their_typescript_names_and_integer_is_number() {
    assert_eq!(output_type(json!({"type": "string"})), "string");
    assert_eq!(output_type(json!({"type": "number"})), "number");
    assert_eq!(output_type(json!({"type": "integer"})), "number");
    assert_eq!(output_type(json!({"type": "boolean"})), "boolean");
    assert_eq!(output_type(json!({"type": "null"})), "null");
}

#[test]
fn enum_is_a_literal_union_and_const_wins_over_enum() {
    assert_eq!(
        output_type(json!({"type": "string", "enum": ["a", "b"]})),
        r#""a" | "b""#
    );
    assert_eq!(
        output_type(json!({"enum": [1, true, null, "x\"y"]})),
        r#"1 | true | null | "x\"y""#
    );
    assert_eq!(output_type(json!({"const": "x", "enum": ["a"]})), r#""x""#);
}

#[test]
fn one_of_is_a_flat_union() {
    let schema =
        json!({"oneOf": [{"type": "string"}, {"oneOf": [{"type": "null"}, {"type": "number"}]}]});
    assert_eq!(output_type(schema), "string | null | number");
}

#[test]
fn arrays_parenthesise_item_types_containing_a_union_or_intersection() {
    assert_eq!(
        output_type(json!({"type": "array", "items": {"type": "string"}})),
        "string[]"
    );
    assert_eq!(
        output_type(json!({"type": "array", "items": {"enum": ["x", "y"]}})),
        r#"("x" | "y")[]"#
    );
    assert_eq!(output_type(json!({"type": "array"})), "JsonValue[]");
    let object_with_union_field = json!({"type": "array", "items": {
        "type": "object", "additionalProperties": false,
        "properties": {"s": {"enum": ["a", "b"]}}, "required": ["s"]
    }});
    assert_eq!(
        output_type(object_with_union_field),
        "({\n    s: \"a\" | \"b\";\n  })[]"
    );
    let unstated = json!({"type": "array", "items": {"type": "object", "properties": {"n": {"type": "number"}}}});
    assert_eq!(output_type(unstated), "{\n    n?: number;\n  }[]");
    let open_object = json!({"type": "array", "items": {"type": "object", "properties": {"n": {"type": "number"}}, "additionalProperties": true}});
    assert_eq!(
        output_type(open_object),
        "({\n    n?: number;\n  } & JsonObject)[]"
    );
}

#[test]
fn objects_without_properties_are_records_open_or_closed() {
    assert_eq!(output_type(json!({"type": "object"})), "JsonObject");
    assert_eq!(
        output_type(json!({"type": "object", "additionalProperties": true})),
        "JsonObject"
    );
    assert_eq!(
        output_type(json!({"type": "object", "additionalProperties": {"type": "number"}})),
        "Record<string, number>"
    );
    assert_eq!(
        output_type(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        "Record<string, never>"
    );
}

#[test]
fn objects_list_properties_with_docs_and_optional_marks_and_only_those_unless_open() {
    let schema = json!({
        "type": "object",
        "properties": {
            "b": {"type": "string", "description": "The  b\nvalue."},
            "a": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "additionalProperties": false}
        },
        "required": ["b"]
    });
    let declared =
        "{\n    a?: {\n      x: number;\n    };\n    /** The b value. */\n    b: string;\n  }";
    assert_eq!(output_type(schema.clone()), declared);
    for rest in [json!(true), json!({}), json!({"type": "string"})] {
        let mut open = schema.clone();
        open["additionalProperties"] = rest.clone();
        assert_eq!(
            output_type(open),
            format!("{declared} & JsonObject"),
            "for {rest}"
        );
    }
    let mut patterned = schema;
    patterned["patternProperties"] = json!({"^x-": {"type": "string"}});
    assert_eq!(output_type(patterned), format!("{declared} & JsonObject"));
}

#[test]
fn an_annotation_only_schema_is_any_json_value() {
    assert_eq!(output_type(json!({"description": "anything"})), "JsonValue");
    assert_eq!(output_type(json!({})), "JsonValue");
    assert_eq!(output_type(json!(true)), "JsonValue");
}

#[test]
fn what_cannot_be_expressed_is_unknown_and_never_an_error() {
    for schema in [
        json!({"oneOf": []}),
        json!({"$ref": "https://example.com/schema.json"}),
        json!({"$ref": "#/$defs/missing"}),
        json!({"type": "string", "enum": [1]}),
        json!({"type": "wat"}),
        json!({"not": {"type": "string"}}),
        json!({"type": "string", "if": {}, "then": {}}),
        json!({"type": "object", "properties": []}),
        json!({"type": "object", "required": [1]}),
        json!({"enum": [[1]]}),
        json!(42),
    ] {
        assert_eq!(output_type(schema.clone()), "unknown", "for {schema}");
    }
}

#[test]
fn parameter_roots_are_implicit_objects() {
    assert_eq!(args_member("t", None, json!({})), "  t: JsonObject;");
    assert_eq!(args_member("t", None, json!(true)), "  t: JsonObject;");
    assert_eq!(
        args_member(
            "t",
            None,
            json!({"properties": {"p": {"type": "string"}}, "required": ["p"]})
        ),
        "  t: {\n    p: string;\n  };"
    );
    assert_eq!(
        args_member(
            "t",
            None,
            json!({"type": "object", "properties": {"p": {"type": "string"}}, "additionalProperties": false})
        ),
        "  t: {\n    p?: string;\n  };"
    );
}

#[test]
fn identifiers_are_bare_keys_and_other_names_are_json_quoted() {
    assert_eq!(
        args_member(
            "mcp__server__get-file",
            None,
            json!({"type": "object", "properties": {"my-mcp.tool": {"type": "array", "items": {"type": "string"}}, "$ok": {"type": "null"}}, "required": ["my-mcp.tool"]})
        ),
        "  \"mcp__server__get-file\": {\n    $ok?: null;\n    \"my-mcp.tool\": string[];\n  };"
    );
    assert_eq!(
        args_member("mcp__x__y", None, json!({})),
        "  mcp__x__y: JsonObject;"
    );
}

#[test]
fn tool_docs_collapse_to_one_line_and_cannot_close_the_comment() {
    assert_eq!(
        args_member("t", Some("  Reads */ files.\n\n  Fast. "), json!({})),
        "  /** Reads *\\/ files. Fast. */\n  t: JsonObject;"
    );
    assert_eq!(
        args_member("t", Some(" \n "), json!({})),
        "  t: JsonObject;"
    );
    assert_eq!(args_member("t", None, json!({})), "  t: JsonObject;");
}

#[test]
fn tools_are_ordered_by_utf16_code_units_not_by_locale() {
    let names = ["b", "a-b", "A", "_x", "\u{E000}", "\u{1F600}", "a"];
    let tools: Vec<_> = names
        .iter()
        .map(|n| tool(n, None, json!({}), None))
        .collect();
    let sdk = ts(&tools);
    let code = fenced_code(&sdk);
    let output_map = &code[code.find("interface ToolOutputMap").unwrap_or(0)..];
    let order: Vec<&str> = output_map
        .lines()
        .skip(1)
        .take(names.len())
        .map(|line| line.trim().trim_end_matches(": JsonValue;"))
        .collect();
    assert_eq!(
        order,
        [
            "A",
            "_x",
            "a",
            "\"a-b\"",
            "b",
            "\"\u{1F600}\"",
            "\"\u{E000}\""
        ]
    );
}

#[test]
fn tools_without_output_schema_return_json_values() {
    let sdk = ts(&[tool("t", None, json!({}), None)]);
    assert!(sdk.contains("interface ToolOutputMap {\n  t: JsonValue;\n}"));
}

#[test]
fn the_empty_set_renders_the_complete_exact_shape() {
    let sdk = ts(&[]);
    let expected_code = "type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }

interface ToolArgsMap {}

interface ToolOutputMap {}

type ToolName = keyof ToolOutputMap

declare class ToolCallError extends Error {
  readonly name: \"ToolCallError\";
  readonly toolName: ToolName;
}

declare const tools: {
  [K in ToolName]: (args: ToolArgsMap[K]) => Promise<ToolOutputMap[K]>;
}";
    assert_eq!(fenced_code(&sdk), expected_code);
    assert_eq!(
        sdk,
        format!(
            "{}\n\n```ts\n{expected_code}\n```",
            codemode_sdk_gen::TYPESCRIPT_INSTRUCTIONS
        )
    );
}

#[test]
fn the_instructions_name_both_arguments_and_the_calling_rules() {
    let text = codemode_sdk_gen::TYPESCRIPT_INSTRUCTIONS;
    assert!(text.starts_with("## Writing code for run_code\n\n"));
    assert!(text.ends_with("\n\nThe available tools:"));
    assert!(text.contains("`code`") && text.contains("`description`"));
    assert_eq!(text.lines().filter(|l| l.starts_with("- ")).count(), 4);
    for needle in [
        "tools[\"my-tool\"]",
        "ToolCallError",
        "toolName",
        "Promise.all",
        "console.log",
    ] {
        assert!(text.contains(needle), "missing {needle}");
    }
}

// Beyond the reference: the rest of JSON Schema that real servers use.

#[test]
fn any_of_is_a_union_and_type_arrays_are_unions() {
    assert_eq!(
        output_type(
            json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]})
        ),
        "string | number[]"
    );
    assert_eq!(
        output_type(json!({"type": ["string", "null"]})),
        "string | null"
    );
    assert_eq!(
        output_type(json!({"type": "string", "nullable": true})),
        "string | null"
    );
}

#[test]
fn all_of_is_an_intersection_with_unions_parenthesised() {
    let schema = json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
        {"anyOf": [{"type": "object", "properties": {"b": {"type": "number"}}, "additionalProperties": false}, {"type": "null"}]}
    ]});
    assert_eq!(
        output_type(schema),
        "{\n    a: string;\n  } & ({\n    b?: number;\n  } | null)"
    );
}

#[test]
fn single_use_references_are_inlined_and_reused_ones_named() {
    let once = json!({"type": "object", "additionalProperties": false,
        "properties": {"p": {"$ref": "#/$defs/point"}}, "required": ["p"],
        "$defs": {"point": {"type": "array", "items": {"type": "number"}, "description": "A point."}}});
    assert_eq!(
        output_type(once),
        "{\n    /** A point. */\n    p: number[];\n  }"
    );

    let twice = json!({"type": "object", "additionalProperties": false,
        "properties": {"from": {"$ref": "#/definitions/point"}, "to": {"$ref": "#/definitions/point"}},
        "definitions": {"point": {"type": "array", "items": {"type": "number"}}}});
    let sdk = ts(&[tool("draw_line", None, json!({}), Some(twice))]);
    assert!(
        sdk.contains("\ntype DrawLinePoint = number[]\n\ninterface ToolArgsMap"),
        "{sdk}"
    );
    assert!(
        sdk.contains("  draw_line: {\n    from?: DrawLinePoint;\n    to?: DrawLinePoint;\n  };"),
        "{sdk}"
    );

    // A reused leaf is cheaper repeated than named.
    let leaf = json!({"type": "object", "additionalProperties": false,
        "properties": {"a": {"$ref": "#/$defs/day"}, "b": {"$ref": "#/$defs/day"}},
        "$defs": {"day": {"type": "string", "format": "date"}}});
    assert_eq!(
        output_type(leaf),
        "{\n    /** (format: date) */\n    a?: string;\n    /** (format: date) */\n    b?: string;\n  }"
    );
}

#[test]
fn recursive_definitions_terminate_through_a_named_alias() {
    let schema = json!({"$ref": "#/$defs/tree", "$defs": {"tree": {
        "type": "object", "additionalProperties": false, "required": ["name"],
        "properties": {"name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}
    }}});
    let sdk = ts(&[tool("walk", None, json!({}), Some(schema))]);
    assert!(
        sdk.contains("type WalkTree = {\n  kids?: WalkTree[];\n  name: string;\n}\n\n"),
        "{sdk}"
    );
    assert!(
        sdk.contains("interface ToolOutputMap {\n  walk: WalkTree;\n}"),
        "{sdk}"
    );

    let root_recursion = json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
    let sdk = ts(&[tool("list", None, root_recursion, None)]);
    assert!(
        sdk.contains("type ListArgs = {\n  next?: ListArgs;\n}\n\n"),
        "{sdk}"
    );
    assert!(sdk.contains("  list: ListArgs;\n"), "{sdk}");
}

#[test]
fn alias_names_never_collide_with_each_other_or_the_sdk() {
    let schema = |def: &str| {
        json!({"type": "object", "properties": {"a": {"$ref": format!("#/$defs/{def}")}, "b": {"$ref": format!("#/$defs/{def}")}},
               "$defs": {def: {"type": "array", "items": {"type": "string"}}}})
    };
    let sdk = ts(&[
        tool("tool", None, schema("name"), Some(schema("name"))),
        tool("t", None, schema("oolName"), None),
    ]);
    assert!(sdk.contains("type ToolName2 = string[]"), "{sdk}");
    assert!(sdk.contains("type ToolName3 = string[]"), "{sdk}");
    assert!(sdk.contains("type TOolName = string[]"), "{sdk}");
}

#[test]
fn typed_additional_properties_become_a_typed_record() {
    assert_eq!(
        output_type(json!({"type": "object", "additionalProperties": {"type": "number"}})),
        "Record<string, number>"
    );
    assert_eq!(
        output_type(
            json!({"type": "object", "propertyNames": {"pattern": "^a"}, "additionalProperties": {"type": "string"}})
        ),
        "Record<string, string>"
    );
}

#[test]
fn annotations_join_the_property_doc() {
    let schema = json!({"type": "object", "additionalProperties": false, "properties": {
        "n": {"type": "integer", "description": "Count.", "minimum": 0, "maximum": 9, "default": 3},
        "u": {"type": "string", "format": "uri", "pattern": "^https?:"}
    }});
    assert_eq!(
        output_type(schema),
        "{\n    /** Count. (minimum: 0, maximum: 9, default: 3) */\n    n?: number;\n    /** (format: uri, pattern: \"^https?:\") */\n    u?: string;\n  }"
    );
}

#[test]
fn a_required_key_without_a_schema_is_required_with_any_value() {
    assert_eq!(
        output_type(json!({"type": "object", "required": ["id"], "additionalProperties": false})),
        "{\n    id: JsonValue;\n  }"
    );
}

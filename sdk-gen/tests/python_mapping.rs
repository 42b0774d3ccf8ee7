//! The Python text, rule by rule, with exact expected strings.

mod common;

use codemode_sdk_gen::{render_sdk, Language, ToolSchema};
use common::{fenced_code, tool};
use serde_json::json;

fn py(tools: &[ToolSchema]) -> String {
    fenced_code(&render_sdk(tools, Language::Python)).to_owned()
}

#[test]
fn the_block_has_the_reference_layout() {
    let code = py(&[tool(
        "read_file",
        Some("Read a file."),
        json!({"type": "object", "properties": {"path": {"type": "string"}, "head": {"type": "integer"}}, "required": ["path"]}),
        Some(json!({"type": "string"})),
    )]);
    assert_eq!(
        code,
        "from typing import NotRequired, Protocol, TypedDict

class ToolCallError(Exception):
    tool_name: str

class ReadFileArgs(TypedDict):
    head: NotRequired[int]
    path: str

class Tools(Protocol):
    async def read_file(self, args: ReadFileArgs) -> str:
        \"\"\"Read a file.\"\"\"

tools: Tools"
    );
}

#[test]
fn the_empty_set_has_a_protocol_with_pass() {
    assert_eq!(
        py(&[]),
        "from typing import Protocol\n\nclass ToolCallError(Exception):\n    tool_name: str\n\nclass Tools(Protocol):\n    pass\n\ntools: Tools"
    );
}

#[test]
fn names_that_cannot_be_methods_become_comments() {
    let tools = [
        tool("read-file", Some("Dashed."), json!({}), None),
        tool("class", None, json!({}), None),
        tool("_private", None, json!({}), None),
        tool("ok", None, json!({}), None),
    ];
    let code = py(&tools);
    assert!(
        code.contains(
            "class Tools(Protocol):
    async def ok(self, args: dict[str, Any]) -> Any: ...
    # tools[\"_private\"](args: dict[str, Any]) -> Any
    # tools[\"class\"](args: dict[str, Any]) -> Any
    # tools[\"read-file\"](args: dict[str, Any]) -> Any
    #   Dashed.
"
        ),
        "{code}"
    );
    let only_comments = py(&[tool("a-b", None, json!({}), None)]);
    assert!(
        only_comments.contains("class Tools(Protocol):\n    pass\n    # tools[\"a-b\"]"),
        "{only_comments}"
    );
}

#[test]
fn classes_are_named_from_tool_field_and_branch_and_collisions_are_suffixed() {
    let code = py(&[
        tool(
            "3d_render",
            None,
            json!({"type": "object", "additionalProperties": false, "properties": {
                "camera_pos": {"type": "object", "additionalProperties": false, "properties": {"x": {"type": "number"}}},
                "light": {"oneOf": [
                    {"type": "object", "additionalProperties": false, "properties": {"on": {"type": "boolean"}}},
                    {"type": "object", "additionalProperties": false, "properties": {"lux": {"type": "number"}}}
                ]}
            }}),
            None,
        ),
        tool(
            "tool_3d_render",
            None,
            json!({"type": "object", "properties": {"a": {"type": "null"}}}),
            None,
        ),
    ]);
    for class in [
        "class Tool3dRenderArgsCameraPos(TypedDict):",
        "class Tool3dRenderArgsLight1(TypedDict):",
        "class Tool3dRenderArgsLight2(TypedDict):",
        "class Tool3dRenderArgs(TypedDict):",
        "class Tool3dRenderArgs2(TypedDict):",
        "    light: NotRequired[Tool3dRenderArgsLight1 | Tool3dRenderArgsLight2]",
    ] {
        assert!(code.contains(class), "missing {class} in:\n{code}");
    }
    // Dependencies first.
    let nested = code
        .find("class Tool3dRenderArgsCameraPos(")
        .unwrap_or(usize::MAX);
    let parent = code.find("class Tool3dRenderArgs(").unwrap_or(0);
    assert!(nested < parent, "{code}");
}

#[test]
fn class_name_stems_are_capped_at_120_characters() {
    let name = "a".repeat(300);
    let code = py(&[tool(
        &name,
        None,
        json!({"properties": {"x": {"type": "string"}}}),
        None,
    )]);
    let expected = format!("class A{}(TypedDict):", "a".repeat(119));
    assert!(code.contains(&expected), "{code}");
}

#[test]
fn literals_use_python_spellings_and_floats_widen() {
    let code = py(&[tool(
        "t",
        None,
        json!({"type": "object", "additionalProperties": false, "required": ["a", "b", "c"], "properties": {
            "a": {"enum": [true, false, null, "x", 9007199254740993_u64]},
            "b": {"enum": [1.5, "y"]},
            "c": {"type": "array", "items": {"type": "array"}}
        }}),
        None,
    )]);
    assert!(
        code.contains("    a: Literal[True, False, None, \"x\", 9007199254740993]\n"),
        "{code}"
    );
    assert!(code.contains("    b: Literal[\"y\"] | float\n"), "{code}");
    assert!(code.contains("    c: list[list[Any]]\n"), "{code}");
    assert!(
        code.starts_with("from typing import Any, Literal, Protocol, TypedDict\n"),
        "{code}"
    );
}

#[test]
fn objects_whose_keys_cannot_be_fields_degrade_to_dicts() {
    for key in ["a-b", "class", "__debug__", "__private", "ﬁle", "1x"] {
        let code = py(&[tool(
            "t",
            None,
            json!({"properties": {key: {"type": "string"}}}),
            None,
        )]);
        assert!(
            code.contains("async def t(self, args: dict[str, Any]) -> Any"),
            "{key}: {code}"
        );
    }
    let dunder = py(&[tool(
        "t",
        None,
        json!({"properties": {"__init__": {"type": "string"}}}),
        None,
    )]);
    assert!(
        dunder.contains("    __init__: NotRequired[str]"),
        "{dunder}"
    );
}

#[test]
fn empty_objects_are_open_dicts_or_closed_classes_with_pass() {
    let open = py(&[tool("t", None, json!({}), None)]);
    assert!(
        open.contains("async def t(self, args: dict[str, Any]) -> Any: ..."),
        "{open}"
    );
    let closed = py(&[tool(
        "t",
        None,
        json!({"type": "object", "additionalProperties": false}),
        None,
    )]);
    assert!(
        closed.contains("class TArgs(TypedDict):\n    pass\n"),
        "{closed}"
    );
    let typed = py(&[tool(
        "t",
        None,
        json!({"type": "object", "additionalProperties": {"type": "integer"}}),
        None,
    )]);
    assert!(typed.contains("args: dict[str, int]"), "{typed}");
}

#[test]
fn descriptions_are_escaped_for_docstrings_and_comments() {
    let code = py(&[
        tool("m", Some("Say \"hi\" \\ now\u{1}."), json!({}), None),
        tool(
            "x-y",
            Some("Say \"hi\"\u{7f}."),
            json!({"properties": {"f": {"type": "string", "description": "A \"field\"\u{0}."}}}),
            None,
        ),
    ]);
    assert!(
        code.contains("        \"\"\"Say \\\"hi\\\" \\\\ now\\x01.\"\"\""),
        "{code}"
    );
    assert!(code.contains("    #   Say \"hi\"\\x7f."), "{code}");
    assert!(
        code.contains("    # A \"field\"\\x00.\n    f: NotRequired[str]"),
        "{code}"
    );
}

#[test]
fn shared_definitions_are_printed_once_and_recursion_is_quoted() {
    let code = py(&[tool(
        "walk",
        None,
        json!({"type": "object", "required": ["root"], "properties": {"root": {"$ref": "#/$defs/node"}, "alt": {"$ref": "#/$defs/pair"}, "alt2": {"$ref": "#/$defs/pair"}},
        "$defs": {
            "node": {"type": "object", "additionalProperties": false, "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}},
            "pair": {"type": "array", "items": {"type": "number"}}
        }}),
        None,
    )]);
    assert!(
        code.contains("WalkPair: TypeAlias = list[float]\n"),
        "{code}"
    );
    assert!(
        code.contains("class WalkNode(TypedDict):\n    kids: NotRequired[list[\"WalkNode\"]]\n"),
        "{code}"
    );
    assert!(
        code.contains(
            "    alt: NotRequired[WalkPair]\n    alt2: NotRequired[WalkPair]\n    root: WalkNode\n"
        ),
        "{code}"
    );
    assert!(
        code.starts_with("from typing import Any, NotRequired, Protocol, TypeAlias, TypedDict\n"),
        "{code}"
    );
}

#[test]
fn all_of_objects_inherit_and_other_intersections_are_any() {
    let code = py(&[tool(
        "t",
        None,
        json!({"type": "object", "additionalProperties": false, "properties": {
            "both": {"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}}]},
            "odd": {"allOf": [{"type": "string"}, {"minLength": 1, "type": "object", "properties": {"c": {"type": "null"}}}]}
        }}),
        None,
    )]);
    assert!(
        code.contains("class TArgsBoth(TArgsBoth1, TArgsBoth2):\n    pass\n"),
        "{code}"
    );
    assert!(code.contains("    odd: NotRequired[Any]\n"), "{code}");
}

#[test]
fn the_instructions_say_what_is_bound_at_run_time() {
    let text = codemode_sdk_gen::PYTHON_INSTRUCTIONS;
    assert!(text.starts_with("## Writing code for run_code\n\n"));
    assert!(text.ends_with("\n\nThe available tools:"));
    for needle in [
        "`code`",
        "`description`",
        "NameError",
        "asyncio.gather",
        "print(...)",
        "`return",
        "tools[\"my-tool\"]",
    ] {
        assert!(text.contains(needle), "missing {needle}");
    }
}

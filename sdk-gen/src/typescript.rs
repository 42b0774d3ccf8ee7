//! The TypeScript `tools:sdk` text: the `run_code` instructions, then one fenced block declaring
//! `JsonValue`, the aliases, `ToolArgsMap`, `ToolOutputMap`, `ToolName`, `ToolCallError` and
//! `tools`, in the reference's exact shape.
//!
//! It prints shapes and never looks at JSON Schema. Recursion here follows shape nesting, which
//! lowering bounds (see `shape::MAX_DEPTH`), so it cannot exhaust the stack.

use crate::instructions::TYPESCRIPT_INSTRUCTIONS;
use crate::sdk::LoweredTool;
use crate::shape::{Arena, Object, Rest, Shape, ShapeId};
use crate::text::{is_ts_identifier, json_quote};

const JSON_VALUE_LINE: &str =
    "type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }";

const TAIL: &str = "type ToolName = keyof ToolOutputMap

declare class ToolCallError extends Error {
  readonly name: \"ToolCallError\";
  readonly toolName: ToolName;
}

declare const tools: {
  [K in ToolName]: (args: ToolArgsMap[K]) => Promise<ToolOutputMap[K]>;
}";

/// The whole section for `tools`, which are already sorted and unique.
pub fn render(arena: &Arena, tools: &[LoweredTool<'_>]) -> String {
    let mut out = String::new();
    out.push_str(TYPESCRIPT_INSTRUCTIONS);
    out.push_str("\n\n```ts\n");
    out.push_str(JSON_VALUE_LINE);
    out.push_str("\n\n");

    let mut aliases: Vec<_> = arena.aliases.iter().collect();
    aliases.sort_by(|a, b| crate::text::cmp_utf16(&a.name, &b.name));
    for alias in aliases {
        out.push_str("type ");
        out.push_str(&alias.name);
        out.push_str(" = ");
        write_type(arena, alias.body, 0, &mut out);
        out.push_str("\n\n");
    }

    write_map(
        "ToolArgsMap",
        tools
            .iter()
            .map(|t| (t.name, t.description.as_deref(), Some(t.args))),
        arena,
        &mut out,
    );
    out.push_str("\n\n");
    write_map(
        "ToolOutputMap",
        tools.iter().map(|t| (t.name, None, t.output)),
        arena,
        &mut out,
    );
    out.push_str("\n\n");
    out.push_str(TAIL);
    out.push_str("\n```");
    out
}

/// `interface <name> { … }` with one member per tool, or `interface <name> {}` when empty.
fn write_map<'a>(
    name: &str,
    members: impl ExactSizeIterator<Item = (&'a str, Option<&'a str>, Option<ShapeId>)>,
    arena: &Arena,
    out: &mut String,
) {
    out.push_str("interface ");
    out.push_str(name);
    if members.len() == 0 {
        out.push_str(" {}");
        return;
    }
    out.push_str(" {\n");
    for (key, doc, shape) in members {
        write_doc(doc, "  ", out);
        out.push_str("  ");
        write_key(key, out);
        out.push_str(": ");
        match shape {
            Some(shape) => write_type(arena, shape, 1, out),
            None => out.push_str("JsonValue"),
        }
        out.push_str(";\n");
    }
    out.push('}');
}

/// A one-line JSDoc: the text is already one line; `*/` must not end the comment early.
fn write_doc(doc: Option<&str>, pad: &str, out: &mut String) {
    let Some(doc) = doc.filter(|d| !d.is_empty()) else {
        return;
    };
    out.push_str(pad);
    out.push_str("/** ");
    out.push_str(&doc.replace("*/", "*\\/"));
    out.push_str(" */\n");
}

/// Bare when it is an identifier, JSON-quoted otherwise (`"mcp__fs__read-file"`).
fn write_key(key: &str, out: &mut String) {
    if is_ts_identifier(key) {
        out.push_str(key);
    } else {
        out.push_str(&json_quote(key));
    }
}

/// The type of `id`, for a position `indent` levels deep (two spaces a level).
pub fn write_type(arena: &Arena, id: ShapeId, indent: usize, out: &mut String) {
    match arena.get(id) {
        Shape::Unknown => out.push_str("unknown"),
        Shape::Json => out.push_str("JsonValue"),
        Shape::Never => out.push_str("never"),
        Shape::String => out.push_str("string"),
        Shape::Number | Shape::Integer => out.push_str("number"),
        Shape::Boolean => out.push_str("boolean"),
        Shape::Null => out.push_str("null"),
        Shape::Literals(values) => {
            for (i, value) in values.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                // Written as a program would see the value (`1` for `1.0`, `1e+21`).
                codemode_json::write(value, out);
            }
        }
        Shape::Array(None) => out.push_str("JsonValue[]"),
        Shape::Array(Some(item)) => {
            let mut text = String::new();
            write_type(arena, *item, indent, &mut text);
            if text.contains('|') || text.contains('&') {
                out.push('(');
                out.push_str(&text);
                out.push(')');
            } else {
                out.push_str(&text);
            }
            out.push_str("[]");
        }
        Shape::Object(object) => write_object(arena, object, indent, out),
        Shape::Union(members) => {
            for (i, member) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                write_type(arena, *member, indent, out);
            }
        }
        Shape::Intersection(members) => {
            for (i, member) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(" & ");
                }
                // `&` binds tighter than `|`: a union member needs parentheses.
                let parens = match arena.get(*member) {
                    Shape::Union(_) => true,
                    Shape::Literals(values) => values.len() > 1,
                    _ => false,
                };
                if parens {
                    out.push('(');
                }
                write_type(arena, *member, indent, out);
                if parens {
                    out.push(')');
                }
            }
        }
        Shape::Alias(alias) => match arena.aliases.get(*alias) {
            Some(alias) => out.push_str(&alias.name),
            None => out.push_str("unknown"),
        },
    }
}

fn write_object(arena: &Arena, object: &Object, indent: usize, out: &mut String) {
    if object.properties.is_empty() {
        match &object.rest {
            Rest::Closed => out.push_str("Record<string, never>"),
            Rest::Open => out.push_str("Record<string, JsonValue>"),
            Rest::Typed(value) => {
                out.push_str("Record<string, ");
                write_type(arena, *value, indent, out);
                out.push('>');
            }
        }
        return;
    }
    let pad = "  ".repeat(indent + 1);
    out.push_str("{\n");
    for property in &object.properties {
        write_doc(property.doc.as_deref(), &pad, out);
        out.push_str(&pad);
        write_key(&property.key, out);
        if !property.required {
            out.push('?');
        }
        out.push_str(": ");
        write_type(arena, property.shape, indent + 1, out);
        out.push_str(";\n");
    }
    out.push_str(&"  ".repeat(indent));
    out.push('}');
    if object.rest != Rest::Closed {
        // Declared properties may have types a typed rest does not admit; `JsonValue` admits all.
        out.push_str(" & Record<string, JsonValue>");
    }
}

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

/// Declared only when some schema really admits keys of any name: written once here instead of
/// as `Record<string, JsonValue>` at every such object.
const JSON_OBJECT_LINE: &str = "type JsonObject = Record<string, JsonValue>";
const JSON_OBJECT: &str = "JsonObject";

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
    let mut body = Printer::new(arena);
    let mut aliases: Vec<_> = arena.aliases.iter().collect();
    aliases.sort_by(|a, b| crate::text::cmp_utf16(&a.name, &b.name));
    for alias in aliases {
        body.out.push_str("type ");
        body.out.push_str(&alias.name);
        body.out.push_str(" = ");
        body.write_type(alias.body, 0);
        body.out.push_str("\n\n");
    }
    body.write_map(
        "ToolArgsMap",
        tools
            .iter()
            .map(|t| (t.name, t.description.as_deref(), Some(t.args))),
    );
    body.out.push_str("\n\n");
    body.write_map(
        "ToolOutputMap",
        tools.iter().map(|t| (t.name, None, t.output)),
    );

    let mut out = String::new();
    out.push_str(TYPESCRIPT_INSTRUCTIONS);
    out.push_str("\n\n```ts\n");
    out.push_str(JSON_VALUE_LINE);
    out.push_str("\n\n");
    if body.json_object {
        out.push_str(JSON_OBJECT_LINE);
        out.push_str("\n\n");
    }
    out.push_str(&body.out);
    out.push_str("\n\n");
    out.push_str(TAIL);
    out.push_str("\n```");
    out
}

/// Writes declarations, noting whether they name [`JSON_OBJECT`] so it is declared only then.
struct Printer<'a> {
    arena: &'a Arena,
    out: String,
    json_object: bool,
}

impl<'a> Printer<'a> {
    fn new(arena: &'a Arena) -> Self {
        Printer {
            arena,
            out: String::new(),
            json_object: false,
        }
    }

    /// `interface <name> { … }` with one member per tool, or `interface <name> {}` when empty.
    fn write_map<'t>(
        &mut self,
        name: &str,
        members: impl ExactSizeIterator<Item = (&'t str, Option<&'t str>, Option<ShapeId>)>,
    ) {
        self.out.push_str("interface ");
        self.out.push_str(name);
        if members.len() == 0 {
            self.out.push_str(" {}");
            return;
        }
        self.out.push_str(" {\n");
        for (key, doc, shape) in members {
            write_doc(doc, "  ", &mut self.out);
            self.out.push_str("  ");
            write_key(key, &mut self.out);
            self.out.push_str(": ");
            match shape {
                Some(shape) => self.write_type(shape, 1),
                None => self.out.push_str("JsonValue"),
            }
            self.out.push_str(";\n");
        }
        self.out.push('}');
    }

    /// The type of `id`, for a position `indent` levels deep (two spaces a level).
    fn write_type(&mut self, id: ShapeId, indent: usize) {
        let arena = self.arena;
        match arena.get(id) {
            Shape::Unknown => self.out.push_str("unknown"),
            Shape::Json => self.out.push_str("JsonValue"),
            Shape::Never => self.out.push_str("never"),
            Shape::String => self.out.push_str("string"),
            Shape::Number | Shape::Integer => self.out.push_str("number"),
            Shape::Boolean => self.out.push_str("boolean"),
            Shape::Null => self.out.push_str("null"),
            Shape::Literals(values) => {
                for (i, value) in values.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(" | ");
                    }
                    // Written as a program would see the value (`1` for `1.0`, `1e+21`).
                    codemode_json::write(value, &mut self.out);
                }
            }
            Shape::Array(None) => self.out.push_str("JsonValue[]"),
            Shape::Array(Some(item)) => {
                let start = self.out.len();
                self.write_type(*item, indent);
                let text = &self.out[start..];
                if text.contains('|') || text.contains('&') {
                    self.out.insert(start, '(');
                    self.out.push(')');
                }
                self.out.push_str("[]");
            }
            Shape::Object(object) => self.write_object(object, indent),
            Shape::Union(members) => {
                for (i, member) in members.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(" | ");
                    }
                    self.write_type(*member, indent);
                }
            }
            Shape::Intersection(members) => {
                for (i, member) in members.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(" & ");
                    }
                    // `&` binds tighter than `|`: a union member needs parentheses.
                    let parens = match arena.get(*member) {
                        Shape::Union(_) => true,
                        Shape::Literals(values) => values.len() > 1,
                        _ => false,
                    };
                    if parens {
                        self.out.push('(');
                    }
                    self.write_type(*member, indent);
                    if parens {
                        self.out.push(')');
                    }
                }
            }
            Shape::Alias(alias) => match arena.aliases.get(*alias) {
                Some(alias) => self.out.push_str(&alias.name),
                None => self.out.push_str("unknown"),
            },
        }
    }

    fn write_object(&mut self, object: &Object, indent: usize) {
        if object.properties.is_empty() {
            match &object.rest {
                Rest::Closed => self.out.push_str("Record<string, never>"),
                Rest::Open | Rest::Unstated => self.write_json_object(),
                Rest::Typed(value) => {
                    self.out.push_str("Record<string, ");
                    self.write_type(*value, indent);
                    self.out.push('>');
                }
            }
            return;
        }
        let pad = "  ".repeat(indent + 1);
        self.out.push_str("{\n");
        for property in &object.properties {
            write_doc(property.doc.as_deref(), &pad, &mut self.out);
            self.out.push_str(&pad);
            write_key(&property.key, &mut self.out);
            if !property.required {
                self.out.push('?');
            }
            self.out.push_str(": ");
            self.write_type(property.shape, indent + 1);
            self.out.push_str(";\n");
        }
        self.out.push_str(&"  ".repeat(indent));
        self.out.push('}');
        if matches!(object.rest, Rest::Open | Rest::Typed(_)) {
            // Declared properties may have types a typed rest does not admit; `JsonValue` admits all.
            self.out.push_str(" & ");
            self.write_json_object();
        }
    }

    fn write_json_object(&mut self) {
        self.json_object = true;
        self.out.push_str(JSON_OBJECT);
    }
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

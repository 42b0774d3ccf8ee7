//! The entry point from tool schemas to SDK text: puts the tools in their canonical order, lowers
//! their schemas to shapes, and hands them to the renderer of the requested language.

use crate::shape::{Arena, Role, ShapeId};
use crate::text::cmp_utf16;
use crate::{python, typescript};
use serde_json::Value;
use std::cmp::Ordering;

/// One tool as the model sees it: JSON Schema values for its parameters and (optional) output.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSchema {
    /// The name the program calls the tool by.
    pub name: String,
    /// The tool's description, printed as its doc comment.
    pub description: Option<String>,
    /// The argument schema.
    pub parameters: Value,
    /// `None` types the result as any JSON value.
    pub output: Option<Value>,
}

/// The language programs are written in, which decides the SDK's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// TypeScript programs, with a TypeScript declaration of the tools.
    TypeScript,
    /// Python programs, with a Python declaration of the tools.
    Python,
}

impl Language {
    /// The names the runtime uses for its languages.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "typescript" => Some(Self::TypeScript),
            "python" => Some(Self::Python),
            _ => None,
        }
    }

    /// The runtime's name for the language, the inverse of [`Language::from_name`].
    pub fn name(self) -> &'static str {
        match self {
            Self::TypeScript => "typescript",
            Self::Python => "python",
        }
    }
}

/// A tool after lowering, in the order it is printed.
pub(crate) struct LoweredTool<'a> {
    pub name: &'a str,
    /// Collapsed to one line; `None` when missing or empty.
    pub description: Option<String>,
    pub args: ShapeId,
    pub output: Option<ShapeId>,
}

/// The `tools:sdk` text for `tools` (which must not include `run_code`).
///
/// The result depends only on the set of tools: they are ordered by name in UTF-16 code-unit
/// order and every object's keys are sorted, so any input order or key order gives the same
/// bytes. Names should be unique; if one repeats, a single tool of that name is printed,
/// chosen by content, so the output is still independent of the order.
pub fn render_sdk(tools: &[ToolSchema], language: Language) -> String {
    let mut ordered: Vec<&ToolSchema> = tools.iter().collect();
    // The content key is only built for tools whose names tie.
    ordered.sort_by(|a, b| match cmp_utf16(&a.name, &b.name) {
        Ordering::Equal => canonical_content(a).cmp(&canonical_content(b)),
        other => other,
    });
    ordered.dedup_by(|a, b| a.name == b.name);

    let mut arena = Arena::new();
    let lowered: Vec<LoweredTool<'_>> = ordered
        .iter()
        .map(|tool| LoweredTool {
            name: &tool.name,
            description: tool
                .description
                .as_deref()
                .map(crate::text::collapse_whitespace)
                .filter(|d| !d.is_empty()),
            args: arena.lower_document(&tool.parameters, &tool.name, Role::Args),
            output: tool
                .output
                .as_ref()
                .map(|schema| arena.lower_document(schema, &tool.name, Role::Output)),
        })
        .collect();

    match language {
        Language::TypeScript => typescript::render(&arena, &lowered),
        Language::Python => python::render(&arena, &lowered),
    }
}

/// A content key that breaks ties between tools of the same name. Only compared, never shown;
/// deep values fall back to the description alone (their serialisation would recurse).
fn canonical_content(tool: &ToolSchema) -> String {
    let description = tool.description.as_deref().unwrap_or("");
    match (
        shallow_enough(&tool.parameters),
        tool.output.as_ref().is_none_or(shallow_enough),
    ) {
        (true, true) => format!(
            "{description}\u{0}{}\u{0}{}",
            tool.parameters,
            tool.output
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default()
        ),
        _ => description.to_owned(),
    }
}

/// Whether `value` nests at most 100 levels (checked without recursion).
fn shallow_enough(value: &Value) -> bool {
    let mut stack = vec![(value, 0usize)];
    while let Some((node, depth)) = stack.pop() {
        if depth > 100 {
            return false;
        }
        match node {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    true
}

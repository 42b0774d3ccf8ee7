//! The entry point from tool schemas to SDK text: puts the tools in their canonical order, lowers
//! their schemas to shapes, and hands them to the renderer of the requested language.

use crate::shape::{Arena, Role, ShapeId};
use crate::text::cmp_utf16;
use crate::{python, typescript};
use serde_json::Value;
use std::cmp::Ordering;

/// One tool as the model sees it: JSON Schema values for its parameters and (optional) output.
///
/// This is codemode's one model-facing projection of a tool. Serialised, it is the wire form a
/// registry lists (`{name, description, parameters}`, plus `output` when it is set).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolSchema {
    /// The name the program calls the tool by.
    pub name: String,
    /// The tool's description, printed as its doc comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The argument schema.
    pub parameters: Value,
    /// `None` types the result as any JSON value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// The language programs are written in, which decides the SDK's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Language {
    /// TypeScript programs, with a TypeScript declaration of the tools.
    #[cfg_attr(feature = "cli", value(name = "typescript"))]
    TypeScript,
    /// Python programs, with a Python declaration of the tools.
    #[cfg_attr(feature = "cli", value(name = "python"))]
    Python,
}

impl Language {
    /// Every language, in the order they are listed to users.
    pub const ALL: [Language; 2] = [Language::TypeScript, Language::Python];

    /// The language a runtime names (`typescript`, `python`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|language| language.name() == name)
    }

    /// The name runtimes and the command line use, the inverse of [`Language::from_name`].
    pub fn name(self) -> &'static str {
        match self {
            Self::TypeScript => "typescript",
            Self::Python => "python",
        }
    }

    /// The name people write (`TypeScript`, `Python`).
    pub fn title(self) -> &'static str {
        match self {
            Self::TypeScript => "TypeScript",
            Self::Python => "Python",
        }
    }

    /// The instructions that open this language's SDK text, before its declarations.
    pub fn instructions(self) -> &'static str {
        match self {
            Self::TypeScript => crate::instructions::TYPESCRIPT_INSTRUCTIONS,
            Self::Python => crate::instructions::PYTHON_INSTRUCTIONS,
        }
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
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
    codemode_json::walk(value, |_, depth| depth <= 100)
}

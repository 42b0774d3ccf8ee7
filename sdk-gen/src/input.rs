//! Reads tool lists in the two shapes the CLI accepts: a JSON array of
//! `{name, description?, parameters, output?}`, or an MCP `tools/list` result
//! `{"tools": [{name, description?, inputSchema, outputSchema?}]}`.
//!
//! Every error names the JSON path and, once known, the tool, so a user can find it in a large
//! file. Schemas themselves are not judged here: rendering is total.

use crate::sdk::ToolSchema;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// Why a tool list was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputError {
    /// The text is not JSON (or nests too deeply for the parser).
    Json {
        /// The parser's message.
        message: String,
    },
    /// The JSON is not one of the two accepted shapes.
    Shape {
        /// Where in the document, e.g. `$.tools[3].inputSchema`.
        path: String,
        /// The tool's name, when the entry has one.
        tool: Option<String>,
        /// What is wrong there.
        message: String,
    },
    /// Two tools have the same name (after any prefix).
    DuplicateName {
        /// The repeated name, prefix included.
        name: String,
        /// Where the first tool of that name is, e.g. `$[0]`.
        first: String,
        /// Where the repeat is.
        second: String,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Json { message } => write!(f, "invalid JSON: {message}"),
            Self::Shape {
                path,
                tool: Some(tool),
                message,
            } => write!(f, "{path} (tool {tool:?}): {message}"),
            Self::Shape {
                path,
                tool: None,
                message,
            } => write!(f, "{path}: {message}"),
            Self::DuplicateName {
                name,
                first,
                second,
            } => write!(
                f,
                "{second}: duplicate tool name {name:?} (first at {first})"
            ),
        }
    }
}

impl std::error::Error for InputError {}

/// Parses a tool list from JSON text and prepends `prefix` to every name.
pub fn parse_tool_list(text: &str, prefix: &str) -> Result<Vec<ToolSchema>, InputError> {
    let value: Value = serde_json::from_str(text).map_err(|e| InputError::Json {
        message: e.to_string(),
    })?;
    tool_list_from_value(&value, prefix)
}

/// Reads a tool list from an already parsed JSON value and prepends `prefix` to every name.
pub fn tool_list_from_value(value: &Value, prefix: &str) -> Result<Vec<ToolSchema>, InputError> {
    let (entries, root, mcp) =
        match value {
            Value::Array(entries) => (entries, "$", false),
            Value::Object(map) => match map.get("tools") {
                Some(Value::Array(entries)) => (entries, "$.tools", true),
                Some(_) => return Err(shape_error("$.tools", None, "expected an array of tools")),
                None => return Err(shape_error(
                    "$",
                    None,
                    "expected a JSON array of tools or an MCP tools/list result {\"tools\": [...]}",
                )),
            },
            _ => {
                return Err(shape_error(
                    "$",
                    None,
                    "expected a JSON array of tools or an MCP tools/list result {\"tools\": [...]}",
                ))
            }
        };
    let (parameters_key, output_key) = if mcp {
        ("inputSchema", "outputSchema")
    } else {
        ("parameters", "output")
    };

    let mut tools = Vec::with_capacity(entries.len());
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (index, entry) in entries.iter().enumerate() {
        let path = format!("{root}[{index}]");
        let Value::Object(entry) = entry else {
            return Err(shape_error(&path, None, "expected a tool object"));
        };
        let name = match entry.get("name") {
            Some(Value::String(name)) if !name.is_empty() => name.clone(),
            Some(Value::String(_)) => {
                return Err(shape_error(
                    &format!("{path}.name"),
                    None,
                    "must not be empty",
                ))
            }
            Some(_) => {
                return Err(shape_error(
                    &format!("{path}.name"),
                    None,
                    "expected a string",
                ))
            }
            None => return Err(shape_error(&format!("{path}.name"), None, "is missing")),
        };
        let tool = Some(name.as_str());
        let description = match entry.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(_) => {
                return Err(shape_error(
                    &format!("{path}.description"),
                    tool,
                    "expected a string",
                ))
            }
        };
        let parameters = schema(entry, parameters_key, &path, tool)?
            .ok_or_else(|| shape_error(&format!("{path}.{parameters_key}"), tool, "is missing"))?;
        let output = schema(entry, output_key, &path, tool)?;

        let full_name = format!("{prefix}{name}");
        if let Some(first) = seen.get(&full_name) {
            return Err(InputError::DuplicateName {
                name: full_name,
                first: first.clone(),
                second: path,
            });
        }
        seen.insert(full_name.clone(), path);
        tools.push(ToolSchema {
            name: full_name,
            description,
            parameters,
            output,
        });
    }
    Ok(tools)
}

/// A schema-valued member: a JSON Schema is an object or a boolean.
fn schema(
    entry: &Map<String, Value>,
    key: &str,
    path: &str,
    tool: Option<&str>,
) -> Result<Option<Value>, InputError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value @ (Value::Object(_) | Value::Bool(_))) => Ok(Some(value.clone())),
        Some(_) => Err(shape_error(
            &format!("{path}.{key}"),
            tool,
            "expected a JSON Schema (an object or a boolean)",
        )),
    }
}

fn shape_error(path: &str, tool: Option<&str>, message: &str) -> InputError {
    InputError::Shape {
        path: path.to_owned(),
        tool: tool.map(str::to_owned),
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_plain_array_and_an_mcp_result_alike() {
        let plain = r#"[{"name":"a","description":"A.","parameters":{"type":"object"},"output":{"type":"string"}}]"#;
        let mcp = r#"{"tools":[{"name":"a","description":"A.","inputSchema":{"type":"object"},"outputSchema":{"type":"string"}}]}"#;
        assert_eq!(parse_tool_list(plain, ""), parse_tool_list(mcp, ""));
        let tools = parse_tool_list(mcp, "mcp__x__").unwrap_or_default();
        assert_eq!(tools.first().map(|t| t.name.as_str()), Some("mcp__x__a"));
    }

    #[test]
    fn errors_name_the_path_and_the_tool() {
        let text = r#"{"tools":[{"name":"ok","inputSchema":{}},{"name":"bad","inputSchema":3}]}"#;
        let error = parse_tool_list(text, "").err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("$.tools[1].inputSchema (tool \"bad\"): expected a JSON Schema (an object or a boolean)")
        );
        let missing = parse_tool_list(r#"[{"name":"x"}]"#, "")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            missing.as_deref(),
            Some("$[0].parameters (tool \"x\"): is missing")
        );
    }

    #[test]
    fn duplicate_names_are_refused_with_both_places() {
        let text = r#"[{"name":"a","parameters":{}},{"name":"a","parameters":{}}]"#;
        let error = parse_tool_list(text, "p_").err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("$[1]: duplicate tool name \"p_a\" (first at $[0])")
        );
    }

    #[test]
    fn bad_json_is_reported_with_its_position() {
        let error = parse_tool_list("[{", "").err().map(|e| e.to_string());
        assert!(error.is_some_and(|e| e.starts_with("invalid JSON: ") && e.contains("line 1")));
    }
}

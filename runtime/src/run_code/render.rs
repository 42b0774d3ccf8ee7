//! How a program's output reads for the model: the logs, then the returned value (a string as
//! it is, anything else as pretty JSON), or a fixed line when there is neither.
//!
//! Pretty JSON indents by two spaces, but total indentation stops at ten characters: deeper
//! subtrees are written compactly, so the text stays linear in the size of the value. The
//! walk is iterative, so any depth renders without recursion.

use serde_json::Value;

use crate::json;

/// The text of a run that printed and returned nothing.
pub const NO_OUTPUT: &str = "(run_code completed with no output)";

const INDENT: &str = "  ";
/// ECMAScript caps `JSON.stringify`'s `space` at ten characters; total indentation stops there.
const MAX_INDENT_CHARS: usize = 10;

/// The content text of a successful run: non-empty parts joined with newlines.
pub fn output_text(logs: &[String], result: Option<&Value>) -> String {
    let logs = logs.join("\n");
    let rendered = result.map(render_value).unwrap_or_default();
    let parts: Vec<&str> = [logs.as_str(), rendered.as_str()]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect();
    if parts.is_empty() {
        NO_OUTPUT.to_owned()
    } else {
        parts.join("\n")
    }
}

/// The program's line `line` (1-based) under a gutter, with a caret under column `column`
/// (1-based, in characters; 0 for none): where a failure happened, as the model reads it.
/// `None` when the program has no such line.
pub fn excerpt(program: &str, line: u32, column: u32) -> Option<String> {
    let text = program.lines().nth(line.checked_sub(1)? as usize)?;
    let gutter = format!("{line:>5} | ");
    let mut out = format!("{gutter}{text}");
    if column > 0 {
        let pad: String = text
            .chars()
            .take(column as usize - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        out.push_str(&format!("\n{:>5} | {pad}^", ""));
    }
    Some(out)
}

/// A returned value as the model reads it: strings raw, everything else pretty JSON.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => pretty_json(other),
    }
}

enum Task<'a> {
    Text(String),
    Value {
        value: &'a Value,
        depth: usize,
        compact: bool,
    },
}

/// `JSON.stringify(value, null, 2)` for shallow values; compact below the indentation cap.
pub fn pretty_json(value: &Value) -> String {
    let mut out = String::new();
    let mut tasks = vec![Task::Value {
        value,
        depth: 0,
        compact: false,
    }];
    while let Some(task) = tasks.pop() {
        let (value, depth, compact) = match task {
            Task::Text(text) => {
                out.push_str(&text);
                continue;
            }
            Task::Value {
                value,
                depth,
                compact,
            } => (value, depth, compact),
        };
        let compact = compact || (depth + 1) * INDENT.len() > MAX_INDENT_CHARS;
        let child = depth + 1;
        match value {
            Value::Array(items) if !items.is_empty() => {
                out.push('[');
                tasks.push(Task::Text(closing(']', depth, compact)));
                for (index, item) in items.iter().enumerate().rev() {
                    tasks.push(Task::Value {
                        value: item,
                        depth: child,
                        compact,
                    });
                    tasks.push(Task::Text(separator(index, child, compact)));
                }
            }
            Value::Object(map) if !map.is_empty() => {
                out.push('{');
                tasks.push(Task::Text(closing('}', depth, compact)));
                for (index, (key, item)) in map.iter().enumerate().rev() {
                    tasks.push(Task::Value {
                        value: item,
                        depth: child,
                        compact,
                    });
                    let mut text = separator(index, child, compact);
                    json::write_string(key, &mut text);
                    text.push_str(if compact { ":" } else { ": " });
                    tasks.push(Task::Text(text));
                }
            }
            scalar_or_empty => json::write(scalar_or_empty, &mut out),
        }
    }
    out
}

fn separator(index: usize, depth: usize, compact: bool) -> String {
    match (compact, index) {
        (true, 0) => String::new(),
        (true, _) => ",".to_owned(),
        (false, 0) => format!("\n{}", INDENT.repeat(depth)),
        (false, _) => format!(",\n{}", INDENT.repeat(depth)),
    }
}

fn closing(bracket: char, depth: usize, compact: bool) -> String {
    if compact {
        bracket.to_string()
    } else {
        format!("\n{}{bracket}", INDENT.repeat(depth))
    }
}

/// The line the model reads under a paused run's output: what it waits on and its id.
pub fn paused_text(paused: &Value) -> String {
    let run_id = paused.get("runId").and_then(Value::as_str).unwrap_or("?");
    let waits: Vec<String> = paused
        .get("pending")
        .and_then(Value::as_array)
        .map(|pending| {
            pending
                .iter()
                .map(|call| {
                    let tool = call.get("tool").and_then(Value::as_str).unwrap_or("?");
                    let id = call.get("callId").and_then(Value::as_str).unwrap_or("?");
                    format!("{tool} (call {id})")
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "[paused: run {run_id} waits for {}; it continues when they are answered]",
        waits.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shallow_values_render_as_json_stringify_with_two_spaces() {
        assert_eq!(render_value(&json!("raw\ntext")), "raw\ntext");
        assert_eq!(render_value(&json!(null)), "null");
        assert_eq!(render_value(&json!(1.5)), "1.5");
        assert_eq!(render_value(&json!({})), "{}");
        assert_eq!(render_value(&json!([])), "[]");
        assert_eq!(
            render_value(&json!({"a": [1, "x"], "b": {}})),
            "{\n  \"a\": [\n    1,\n    \"x\"\n  ],\n  \"b\": {}\n}"
        );
    }

    #[test]
    fn indentation_stops_at_ten_characters() {
        let value = json!({"a": {"b": {"c": {"d": {"e": {"f": [1, {"g": 2}]}}}}}});
        assert_eq!(
            render_value(&value),
            "{\n  \"a\": {\n    \"b\": {\n      \"c\": {\n        \"d\": {\n          \"e\": {\"f\":[1,{\"g\":2}]}\n        }\n      }\n    }\n  }\n}"
        );
    }

    #[test]
    fn deep_values_render_without_recursion_in_linear_size() {
        let mut value = json!(0);
        for _ in 0..5_000 {
            value = Value::Array(vec![value]);
        }
        let text = render_value(&value);
        assert!(text.len() < 11_000, "{}", text.len());
        crate::json::drop_deep(value);
    }

    #[test]
    fn content_joins_the_parts_that_are_present() {
        let logs = vec!["saw echo:one".to_owned()];
        assert_eq!(
            output_text(&logs, Some(&json!("echo:two"))),
            "saw echo:one\necho:two"
        );
        assert_eq!(output_text(&logs, None), "saw echo:one");
        assert_eq!(output_text(&[], Some(&json!({"n": 1}))), "{\n  \"n\": 1\n}");
        assert_eq!(output_text(&[], None), NO_OUTPUT);
        assert_eq!(output_text(&[], Some(&json!(""))), NO_OUTPUT);
    }

    #[test]
    fn excerpts_point_at_the_column() {
        let program = "const a = 1;\n\tfoo.bar();\n";
        assert_eq!(
            excerpt(program, 2, 6).as_deref(),
            Some("    2 | \tfoo.bar();\n      | \t    ^")
        );
        assert_eq!(
            excerpt(program, 1, 0).as_deref(),
            Some("    1 | const a = 1;")
        );
        assert_eq!(excerpt(program, 9, 1), None);
        assert_eq!(excerpt(program, 0, 1), None);
    }
}

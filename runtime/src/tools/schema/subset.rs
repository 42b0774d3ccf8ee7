//! The enforced raw subset: which JSON Schema keywords the registry can enforce itself, checked
//! with path-qualified messages. Walks the schema with an explicit task stack.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::SchemaError;
use crate::json::{is_lossless, is_lossless_number, scalar_eq};

const CONSTRAINT_KEYWORDS: [&str; 8] = [
    "type",
    "oneOf",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
];
const ANNOTATION_KEYWORDS: [&str; 4] = ["description", "title", "default", "examples"];
const SCHEMA_TYPES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];
/// Keywords that may not sit beside `oneOf` (and need a `type` or `oneOf` to mean anything):
/// every constraint keyword after `type` and `oneOf`.
const ONE_OF_SIBLING_KEYWORDS: &[&str] = CONSTRAINT_KEYWORDS.split_at(2).1;
/// Which types each type-specific keyword belongs to, in the order violations are reported.
const ALLOWED_FOR: [(&str, &[&str]); 6] = [
    ("properties", &["object"]),
    ("required", &["object"]),
    ("additionalProperties", &["object"]),
    ("items", &["array"]),
    ("enum", &["string", "number", "integer", "boolean", "null"]),
    ("const", &["string", "number", "integer", "boolean", "null"]),
];

#[derive(Clone, Copy)]
enum Segment<'a> {
    Root,
    Keyword(&'static str),
    Property(&'a str),
    OneOf(usize),
}

enum Task<'a> {
    Enter {
        node: &'a Value,
        depth: usize,
        segment: Segment<'a>,
    },
    OneOfTail {
        node: &'a Map<String, Value>,
        depth: usize,
    },
    ObjectTail {
        node: &'a Map<String, Value>,
        depth: usize,
    },
}

/// Rendered only when a violation needs it, so deep schemas cost no quadratic path strings.
fn render(segments: &[Segment<'_>]) -> String {
    let mut path = String::new();
    for segment in segments {
        match segment {
            Segment::Root => path.push_str("schema"),
            Segment::Keyword(k) => {
                path.push('.');
                path.push_str(k);
            }
            Segment::Property(p) => {
                path.push_str(".properties.");
                path.push_str(p);
            }
            Segment::OneOf(i) => {
                let _ = write!(path, ".oneOf[{i}]");
            }
        }
    }
    path
}

pub(crate) fn scalar_matches(type_name: &str, value: &Value) -> bool {
    match type_name {
        "string" => value.is_string(),
        "number" => matches!(value, Value::Number(n) if is_lossless_number(n)),
        "integer" => matches!(value, Value::Number(n) if is_integer(n)),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

pub(crate) fn is_integer(n: &serde_json::Number) -> bool {
    if n.is_i64() || n.is_u64() {
        return true;
    }
    is_lossless_number(n) && n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// Checks that `schema` uses only the enforced subset; the error lists every violation in walk
/// order, e.g. `schema.properties.a.pattern is not a supported keyword (subset: ...)`.
pub fn assert_supported_schema(schema: &Value) -> Result<(), SchemaError> {
    let mut violations = Vec::new();
    let mut segments: Vec<Segment<'_>> = Vec::new();
    let mut tasks = vec![Task::Enter {
        node: schema,
        depth: 0,
        segment: Segment::Root,
    }];
    while let Some(task) = tasks.pop() {
        match task {
            Task::OneOfTail { node, depth } => {
                segments.truncate(depth + 1);
                for &key in ONE_OF_SIBLING_KEYWORDS {
                    if node.contains_key(key) {
                        violations.push(format!(
                            "{}.{key} is not supported beside oneOf",
                            render(&segments)
                        ));
                    }
                }
            }
            Task::ObjectTail { node, depth } => {
                segments.truncate(depth + 1);
                check_object_tail(node, &render(&segments), &mut violations);
            }
            Task::Enter {
                node,
                depth,
                segment,
            } => {
                segments.truncate(depth);
                segments.push(segment);
                enter(node, depth, &segments, &mut tasks, &mut violations);
            }
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(SchemaError::new(violations))
    }
}

fn enter<'a>(
    node: &'a Value,
    depth: usize,
    segments: &[Segment<'a>],
    tasks: &mut Vec<Task<'a>>,
    violations: &mut Vec<String>,
) {
    let path = || render(segments);
    let Value::Object(node) = node else {
        violations.push(format!("{} must be a schema object", path()));
        return;
    };
    for (key, value) in node {
        if CONSTRAINT_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        if ANNOTATION_KEYWORDS.contains(&key.as_str()) {
            if !is_lossless(value) {
                violations.push(format!(
                    "{}.{key} annotation must be lossless JSON data",
                    path()
                ));
            }
            continue;
        }
        violations.push(format!(
            "{}.{key} is not a supported keyword (subset: type/oneOf/properties/required/additionalProperties/items/enum/const + annotations)",
            path()
        ));
    }
    for key in ["description", "title"] {
        if node.get(key).is_some_and(|v| !v.is_string()) {
            violations.push(format!("{}.{key} must be a string", path()));
        }
    }
    let has_type = node.contains_key("type");
    let has_one_of = node.contains_key("oneOf");
    if has_type && has_one_of {
        violations.push(format!("{} cannot declare both type and oneOf", path()));
        return;
    }
    if !has_type && !has_one_of {
        for &key in ONE_OF_SIBLING_KEYWORDS {
            if node.contains_key(key) {
                violations.push(format!("{}.{key} requires type or oneOf", path()));
            }
        }
        return;
    }
    if has_one_of {
        tasks.push(Task::OneOfTail { node, depth });
        match node.get("oneOf") {
            Some(Value::Array(branches)) if branches.len() >= 2 => {
                for (index, branch) in branches.iter().enumerate().rev() {
                    tasks.push(Task::Enter {
                        node: branch,
                        depth: depth + 1,
                        segment: Segment::OneOf(index),
                    });
                }
            }
            _ => violations.push(format!(
                "{}.oneOf must be an array of at least two schemas",
                path()
            )),
        }
        return;
    }
    let type_name = match node.get("type") {
        Some(Value::String(t)) if SCHEMA_TYPES.contains(&t.as_str()) => t.as_str(),
        Some(Value::Array(_)) => {
            violations.push(format!(
                "{}.type must be a single type string (type arrays are not supported)",
                path()
            ));
            return;
        }
        _ => {
            violations.push(format!(
                "{}.type must be one of {}",
                path(),
                SCHEMA_TYPES.join("/")
            ));
            return;
        }
    };
    for (key, types) in ALLOWED_FOR {
        if node.contains_key(key) && !types.contains(&type_name) {
            violations.push(format!(
                "{}.{key} is not supported on type \"{type_name}\"",
                path()
            ));
        }
    }
    match type_name {
        "object" => {
            tasks.push(Task::ObjectTail { node, depth });
            match node.get("properties") {
                None => {}
                Some(Value::Object(properties)) => {
                    let entries: Vec<_> = properties.iter().collect();
                    for (name, child) in entries.into_iter().rev() {
                        tasks.push(Task::Enter {
                            node: child,
                            depth: depth + 1,
                            segment: Segment::Property(name),
                        });
                    }
                }
                Some(_) => violations.push(format!(
                    "{}.properties must be an object of schemas",
                    path()
                )),
            }
        }
        "array" => {
            if let Some(items) = node.get("items") {
                tasks.push(Task::Enter {
                    node: items,
                    depth: depth + 1,
                    segment: Segment::Keyword("items"),
                });
            }
        }
        scalar => check_literals(node, scalar, &path, violations),
    }
}

fn check_literals(
    node: &Map<String, Value>,
    type_name: &str,
    path: &dyn Fn() -> String,
    violations: &mut Vec<String>,
) {
    let allowed = node.get("enum");
    let enum_valid = matches!(allowed, Some(Value::Array(entries))
        if !entries.is_empty() && entries.iter().all(|e| scalar_matches(type_name, e)));
    if allowed.is_some() && !enum_valid {
        violations.push(format!(
            "{}.enum must be a non-empty array of {type_name} values",
            path()
        ));
    }
    if let Some(constant) = node.get("const") {
        if !scalar_matches(type_name, constant) {
            violations.push(format!("{}.const must be a {type_name} value", path()));
        } else if let (true, Some(Value::Array(entries))) = (enum_valid, allowed) {
            if !entries.iter().any(|e| scalar_eq(e, constant)) {
                let p = path();
                violations.push(format!(
                    "{p}.const must be one of {p}.enum when both are declared"
                ));
            }
        }
    }
}

fn check_object_tail(node: &Map<String, Value>, path: &str, violations: &mut Vec<String>) {
    if let Some(required) = node.get("required") {
        match required {
            Value::Array(names) if names.iter().all(Value::is_string) => {
                let declared = node.get("properties").and_then(Value::as_object);
                for name in names.iter().filter_map(Value::as_str) {
                    if !declared.is_some_and(|d| d.contains_key(name)) {
                        violations.push(format!(
                            "{path}.required names \"{name}\" which is not in properties"
                        ));
                    }
                }
            }
            _ => violations.push(format!("{path}.required must be an array of strings")),
        }
    }
    if node
        .get("additionalProperties")
        .is_some_and(|v| !v.is_boolean())
    {
        violations.push(format!("{path}.additionalProperties must be a boolean"));
    }
}

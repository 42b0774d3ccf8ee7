//! Foreign schemas: full JSON Schema documents (MCP tools publish `anyOf`, `$ref`, `format`,
//! ranges, ...) checked by the `jsonschema` crate, with violations rephrased in the subset
//! validator's path-qualified style.
//!
//! That validator recurses along the schema, and along the instance for equality keywords, so
//! both depths are capped before it runs; the caps are far beyond any published tool schema.

use std::fmt::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::JsonType;
use serde_json::Value;

use super::{diagnostic_path, push_property, SchemaError};

/// Deepest foreign schema (in nested JSON containers) that registration accepts.
pub const FOREIGN_SCHEMA_DEPTH_LIMIT: usize = 64;
/// Deepest instance a foreign schema validates; deeper arguments are a violation.
pub const FOREIGN_INSTANCE_DEPTH_LIMIT: usize = 256;

pub(super) struct ForeignSchema {
    json: Value,
    validator: jsonschema::Validator,
}

/// Whether a container sits at depth `limit` or deeper (the root is at 0): the value nests more
/// than `limit` levels. Iterative, stopping at the first such container.
fn depth_exceeds(value: &Value, limit: usize) -> bool {
    !crate::json::walk(value, |node, depth| {
        !(node.is_array() || node.is_object()) || depth < limit
    })
}

impl ForeignSchema {
    pub(super) fn compile(json: Value) -> Result<Self, SchemaError> {
        if depth_exceeds(&json, FOREIGN_SCHEMA_DEPTH_LIMIT) {
            return Err(SchemaError::new(vec![format!(
                "schema is nested deeper than {FOREIGN_SCHEMA_DEPTH_LIMIT} levels"
            )]));
        }
        // The validator is third-party code: a panic while compiling is a refusal, not a crash.
        let compiled = catch_unwind(AssertUnwindSafe(|| jsonschema::validator_for(&json)));
        match compiled {
            Ok(Ok(validator)) => Ok(Self { json, validator }),
            Ok(Err(error)) => Err(SchemaError::new(vec![format!("schema: {error}")])),
            Err(_) => Err(SchemaError::new(vec![
                "schema: the validator could not compile it".to_owned(),
            ])),
        }
    }

    pub(super) fn json(&self) -> &Value {
        &self.json
    }

    pub(super) fn validate(&self, value: &Value, root: &str) -> Vec<String> {
        if depth_exceeds(value, FOREIGN_INSTANCE_DEPTH_LIMIT) {
            return vec![format!(
                "\"{}\" is nested deeper than {FOREIGN_INSTANCE_DEPTH_LIMIT} levels",
                diagnostic_path(root)
            )];
        }
        match catch_unwind(AssertUnwindSafe(|| self.violations(value, root))) {
            Ok(violations) => violations,
            Err(_) => vec![format!(
                "\"{}\" could not be validated",
                diagnostic_path(root)
            )],
        }
    }

    fn violations(&self, value: &Value, root: &str) -> Vec<String> {
        let mut violations = Vec::new();
        for error in self.validator.iter_errors(value) {
            let path = instance_path(root, value, error.instance_path().iter());
            match error.kind() {
                ValidationErrorKind::Required { property } => {
                    let mut full = path;
                    push_property(&mut full, property.as_str().unwrap_or_default());
                    violations.push(format!("missing required property \"{full}\""));
                }
                ValidationErrorKind::AdditionalProperties { unexpected } => {
                    for key in unexpected {
                        let mut full = path.clone();
                        push_property(&mut full, key);
                        violations.push(format!(
                            "\"{full}\" is not a declared property (additionalProperties: false)"
                        ));
                    }
                }
                ValidationErrorKind::Type {
                    kind: TypeKind::Single(expected),
                } => violations.push(format!(
                    "\"{}\" must be {}",
                    diagnostic_path(&path),
                    type_phrase(*expected)
                )),
                _ => violations.push(format!("\"{}\" {error}", diagnostic_path(&path))),
            }
        }
        violations
    }
}

fn type_phrase(expected: JsonType) -> &'static str {
    match expected {
        JsonType::Array => "an array",
        JsonType::Boolean => "a boolean",
        JsonType::Integer => "an integer",
        JsonType::Null => "null",
        JsonType::Number => "a number",
        JsonType::Object => "an object",
        JsonType::String => "a string",
    }
}

/// Spells a JSON-pointer location as `a.b[0]`, following the instance to tell indexes from keys.
fn instance_path<'a>(
    root: &str,
    instance: &Value,
    segments: impl Iterator<Item = LocationSegment<'a>>,
) -> String {
    let mut path = root.to_owned();
    let mut current = Some(instance);
    for segment in segments {
        match (segment, current) {
            (LocationSegment::Index(index), Some(Value::Array(items))) => {
                let _ = write!(path, "[{index}]");
                current = items.get(index);
            }
            (LocationSegment::Index(index), node) => {
                push_property(&mut path, &index.to_string());
                current = node.and_then(|n| n.get(index.to_string()));
            }
            (LocationSegment::Property(key), Some(Value::Array(items))) => {
                let _ = write!(path, "[{key}]");
                current = key.parse::<usize>().ok().and_then(|i| items.get(i));
            }
            (LocationSegment::Property(key), node) => {
                push_property(&mut path, &key);
                current = node.and_then(|n| n.get(key.as_ref()));
            }
        }
    }
    path
}

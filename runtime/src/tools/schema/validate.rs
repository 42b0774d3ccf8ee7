//! Validation of a value against a schema in the enforced subset, with the reference's
//! path-qualified messages. An explicit frame stack replaces recursion; paths are rendered only
//! when a violation is reported.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::subset::is_integer;
use super::{diagnostic_path, push_property};
use crate::json::{is_lossless, is_lossless_number, scalar_eq, to_string};

#[derive(Clone, Copy)]
enum Segment<'a> {
    /// A `oneOf` branch: same value, same path.
    Same,
    Key(&'a str),
    Index(usize),
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Object,
    Array,
    OneOf,
}

struct Child<'a> {
    node: &'a Value,
    value: &'a Value,
    segment: Segment<'a>,
}

struct Frame<'a> {
    segment: Segment<'a>,
    value: &'a Value,
    kind: Kind,
    children: Vec<Child<'a>>,
    next_child: usize,
    violations: Vec<String>,
    tail: Vec<String>,
    matches: usize,
}

struct Walk<'a> {
    root: &'a str,
    frames: Vec<Frame<'a>>,
    /// Whether the whole value is lossless; then per-container lossless checks are skipped.
    lossless: bool,
}

impl<'a> Walk<'a> {
    /// The path of the frame on top of the stack, with `extra` appended.
    fn path_with(&self, extra: Segment<'_>) -> String {
        let mut path = self.root.to_owned();
        let segments = self
            .frames
            .iter()
            .map(|f| f.segment)
            .chain(std::iter::once(extra));
        for segment in segments {
            match segment {
                Segment::Same => {}
                Segment::Key(key) => push_property(&mut path, key),
                Segment::Index(index) => {
                    let _ = write!(path, "[{index}]");
                }
            }
        }
        path
    }

    fn quoted(&self, extra: Segment<'_>, message: &str) -> String {
        let path = self.path_with(extra);
        format!("\"{}\" {message}", diagnostic_path(&path))
    }
}

/// Validates `value` against an asserted subset `schema`; returns all violations in walk order
/// (empty means valid). `root` labels the root: `""` renders as `arguments` and joins child keys
/// without a leading dot. Total: any schema/value pair yields a list, never a panic.
pub fn validate_value(schema: &Value, value: &Value, root: &str) -> Vec<String> {
    validate_walk(schema, value, root, is_lossless(value))
}

/// [`validate_value`] for a value the caller already knows is lossless JSON (the pipeline
/// checks arguments and outputs first), so it is not walked again for that.
pub(crate) fn validate_lossless_value(schema: &Value, value: &Value, root: &str) -> Vec<String> {
    validate_walk(schema, value, root, true)
}

fn validate_walk(schema: &Value, value: &Value, root: &str, lossless: bool) -> Vec<String> {
    let mut walk = Walk {
        root,
        frames: Vec::new(),
        lossless,
    };
    // The result of the frame (or leaf) just finished, handed to its parent.
    let mut pending = start(&mut walk, schema, value, Segment::Same);
    loop {
        if let Some(result) = pending.take() {
            match walk.frames.last_mut() {
                None => return result,
                Some(parent) if parent.kind == Kind::OneOf => {
                    if result.is_empty() {
                        parent.matches += 1;
                    }
                }
                Some(parent) => parent.violations.extend(result),
            }
        }
        let Some(frame) = walk.frames.last_mut() else {
            return Vec::new();
        };
        if frame.next_child < frame.children.len() {
            let child = &frame.children[frame.next_child];
            let (node, child_value, segment) = (child.node, child.value, child.segment);
            frame.next_child += 1;
            pending = start(&mut walk, node, child_value, segment);
            continue;
        }
        pending = Some(finish_top(&mut walk));
    }
}

/// Pops the finished top frame and computes its result.
fn finish_top(walk: &mut Walk<'_>) -> Vec<String> {
    let Some(frame) = walk.frames.last_mut() else {
        return Vec::new();
    };
    let result = match frame.kind {
        Kind::OneOf => {
            if frame.matches == 1 {
                Vec::new()
            } else {
                let message = format!(
                    "must match exactly one oneOf branch (matched {})",
                    frame.matches
                );
                vec![walk.quoted(Segment::Same, &message)]
            }
        }
        Kind::Object | Kind::Array => {
            let mut violations = std::mem::take(&mut frame.violations);
            violations.append(&mut frame.tail);
            let kind = frame.kind;
            let value = frame.value;
            if !violations.is_empty() || walk.lossless || is_lossless(value) {
                violations
            } else if kind == Kind::Object {
                vec![walk.quoted(Segment::Same, "must be a lossless JSON object")]
            } else {
                vec![walk.quoted(Segment::Same, "must be a dense lossless JSON array")]
            }
        }
    };
    walk.frames.pop();
    result
}

/// Starts evaluating `node` against `value`: either finishes at once (leaf) or pushes a frame.
fn start<'a>(
    walk: &mut Walk<'a>,
    node: &'a Value,
    value: &'a Value,
    segment: Segment<'a>,
) -> Option<Vec<String>> {
    let Value::Object(node) = node else {
        // Not reachable for asserted schemas; an unconstrained reading keeps validation total.
        return Some(Vec::new());
    };
    if let Some(Value::Array(branches)) = node.get("oneOf") {
        let children = branches
            .iter()
            .map(|branch| Child {
                node: branch,
                value,
                segment: Segment::Same,
            })
            .collect();
        walk.frames
            .push(frame(segment, value, Kind::OneOf, children));
        return None;
    }
    let Some(type_name) = node.get("type").and_then(Value::as_str) else {
        return Some(if walk.lossless || is_lossless(value) {
            Vec::new()
        } else {
            vec![walk.quoted(segment, "must be a lossless JSON value")]
        });
    };
    match type_name {
        "object" => {
            let Value::Object(map) = value else {
                return leaf(walk, segment, "must be an object");
            };
            let (children, violations, tail) = object_parts(walk, node, map, segment);
            let mut f = frame(segment, value, Kind::Object, children);
            f.violations = violations;
            f.tail = tail;
            walk.frames.push(f);
            None
        }
        "array" => {
            let Value::Array(items) = value else {
                return leaf(walk, segment, "must be an array");
            };
            let children = match node.get("items") {
                Some(item_schema) => items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| Child {
                        node: item_schema,
                        value: item,
                        segment: Segment::Index(index),
                    })
                    .collect(),
                None => Vec::new(),
            };
            walk.frames
                .push(frame(segment, value, Kind::Array, children));
            None
        }
        "string" if !value.is_string() => leaf(walk, segment, "must be a string"),
        "number" => match value {
            Value::Number(n) if is_lossless_number(n) => {
                Some(check_literals(walk, node, value, segment))
            }
            Value::Number(_) => leaf(walk, segment, "must be a finite JSON number"),
            _ => leaf(walk, segment, "must be a number"),
        },
        "integer" => match value {
            Value::Number(n) if is_integer(n) => Some(check_literals(walk, node, value, segment)),
            _ => leaf(walk, segment, "must be an integer"),
        },
        "boolean" if !value.is_boolean() => leaf(walk, segment, "must be a boolean"),
        "null" if !value.is_null() => leaf(walk, segment, "must be null"),
        "string" | "boolean" | "null" => Some(check_literals(walk, node, value, segment)),
        // Unknown type names do not pass the subset assertion; treat them as unconstrained.
        _ => Some(Vec::new()),
    }
}

fn leaf(walk: &Walk<'_>, segment: Segment<'_>, message: &str) -> Option<Vec<String>> {
    Some(vec![walk.quoted(segment, message)])
}

fn frame<'a>(
    segment: Segment<'a>,
    value: &'a Value,
    kind: Kind,
    children: Vec<Child<'a>>,
) -> Frame<'a> {
    Frame {
        segment,
        value,
        kind,
        children,
        next_child: 0,
        violations: Vec::new(),
        tail: Vec::new(),
        matches: 0,
    }
}

type ObjectParts<'a> = (Vec<Child<'a>>, Vec<String>, Vec<String>);

fn object_parts<'a>(
    walk: &Walk<'a>,
    node: &'a Map<String, Value>,
    map: &'a Map<String, Value>,
    segment: Segment<'a>,
) -> ObjectParts<'a> {
    let properties = node.get("properties").and_then(Value::as_object);
    let mut violations = Vec::new();
    if let Some(Value::Array(required)) = node.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                let mut path = walk.path_with(segment);
                push_property(&mut path, key);
                violations.push(format!("missing required property \"{path}\""));
            }
        }
    }
    let mut children = Vec::new();
    if let Some(properties) = properties {
        for (key, child) in properties {
            if let Some(child_value) = map.get(key) {
                children.push(Child {
                    node: child,
                    value: child_value,
                    segment: Segment::Key(key),
                });
            }
        }
    }
    let mut tail = Vec::new();
    if node.get("additionalProperties") == Some(&Value::Bool(false)) {
        for key in map.keys() {
            if !properties.is_some_and(|p| p.contains_key(key)) {
                let mut path = walk.path_with(segment);
                push_property(&mut path, key);
                tail.push(format!(
                    "\"{path}\" is not a declared property (additionalProperties: false)"
                ));
            }
        }
    }
    (children, violations, tail)
}

fn check_literals(
    walk: &Walk<'_>,
    node: &Map<String, Value>,
    value: &Value,
    segment: Segment<'_>,
) -> Vec<String> {
    if let Some(list @ Value::Array(allowed)) = node.get("enum") {
        if !allowed.iter().any(|entry| scalar_eq(entry, value)) {
            let message = format!("must be one of {}", to_string(list));
            return vec![walk.quoted(segment, &message)];
        }
    }
    if let Some(constant) = node.get("const") {
        if !scalar_eq(constant, value) {
            return vec![walk.quoted(segment, &format!("must be {}", to_string(constant)))];
        }
    }
    Vec::new()
}

//! Local `$ref` resolution inside one schema document, and the plan of which referenced
//! subschemas become named type aliases.
//!
//! A target referenced once and not part of a cycle is inlined at its single use; every other
//! target (reused, or recursive) gets a name, which is what makes recursive schemas terminate and
//! keeps reused definitions from being printed twice. Remote references never resolve here.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Above this many distinct targets the cycle search is skipped and every target is named:
/// always correct, only less compact.
const MAX_ANALYSED_TARGETS: usize = 1_000;

/// Keywords whose value is one subschema.
const SINGLE_SUBSCHEMA: [&str; 9] = [
    "additionalProperties",
    "items",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
];
/// Keywords whose value is an array of subschemas.
const SUBSCHEMA_LISTS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to subschemas (definitions are reached through `$ref` only).
const SUBSCHEMA_MAPS: [&str; 3] = ["properties", "patternProperties", "dependentSchemas"];

/// Resolves a `$ref` value against `doc`. Returns the normalised pointer (the key aliases are
/// planned by) and the target, or `None` for remote, anchor-style or dangling references.
pub fn resolve<'a>(doc: &'a Value, reference: &str) -> Option<(String, &'a Value)> {
    let fragment = reference.strip_prefix('#')?;
    let pointer = percent_decode(fragment)?;
    if !(pointer.is_empty() || pointer.starts_with('/')) {
        return None;
    }
    let target = doc.pointer(&pointer)?;
    Some((pointer, target))
}

/// Decodes `%XX` escapes of a URI fragment; `None` if an escape is malformed or the bytes are
/// not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The pointers (as returned by [`resolve`]) of the targets that may need a name.
#[derive(Debug, Default)]
pub struct RefPlan {
    /// Referenced more than once: named unless the target is a simple leaf, cheap to repeat.
    pub reused: BTreeSet<String>,
    /// Part of a reference cycle (or, past the analysis limit, possibly so): named, or expansion
    /// would never end.
    pub cyclic: BTreeSet<String>,
}

impl RefPlan {
    /// Whether the target at `pointer` is printed once under a name rather than inline.
    pub fn names(&self, pointer: &str, target: &Value) -> bool {
        // A leaf refers to nothing, so it is never really part of a cycle.
        (self.cyclic.contains(pointer) || self.reused.contains(pointer)) && !is_leaf(target)
    }
}

/// A schema without subschemas or references (a scalar type, an enum, annotations): repeating
/// it costs less than naming it, and it cannot make the output grow exponentially.
fn is_leaf(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            let mut children = Vec::new();
            push_subschemas(map, &mut children);
            children.is_empty() && !map.contains_key("$ref")
        }
        _ => true,
    }
}

/// Walks the part of `doc` reachable from its root, counting reference sites per target and
/// recording which target's subtree refers to which, then names the reused and cyclic targets.
pub fn plan(doc: &Value) -> RefPlan {
    let mut uses: BTreeMap<String, usize> = BTreeMap::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // The root is used once by the tool itself.
    uses.insert(String::new(), 1);
    let mut pending: Vec<(String, &Value)> = vec![(String::new(), doc)];
    let mut walked: BTreeSet<String> = BTreeSet::new();

    while let Some((owner, subtree)) = pending.pop() {
        if !walked.insert(owner.clone()) {
            continue;
        }
        let mut referenced = BTreeSet::new();
        for reference in references_in(subtree) {
            if let Some((pointer, target)) = resolve(doc, reference) {
                let count = uses.entry(pointer.clone()).or_insert(0);
                if *count == 0 && !is_definition(&pointer) {
                    // The target also sits inline inside another schema and is printed there
                    // too: that is a second use, or nested pointers could double at every level.
                    *count += 1;
                }
                *count += 1;
                if !walked.contains(&pointer) {
                    pending.push((pointer.clone(), target));
                }
                referenced.insert(pointer);
            }
        }
        edges.insert(owner, referenced);
    }

    let reused: BTreeSet<String> = uses
        .iter()
        .filter(|(_, count)| **count > 1)
        .map(|(pointer, _)| pointer.clone())
        .collect();
    let cyclic = if edges.len() > MAX_ANALYSED_TARGETS {
        edges
            .keys()
            .filter(|pointer| !pointer.is_empty())
            .cloned()
            .collect()
    } else {
        edges
            .keys()
            .filter(|start| reaches_itself(&edges, start))
            .cloned()
            .collect()
    };
    RefPlan { reused, cyclic }
}

/// Whether `pointer` names an entry of `$defs` / `definitions` (or the root): a schema that is
/// printed only where it is referenced, never inline where it is written.
fn is_definition(pointer: &str) -> bool {
    let mut segments = pointer.split('/').skip(1);
    matches!(
        (segments.next(), segments.next(), segments.next()),
        (None, _, _) | (Some("$defs" | "definitions"), Some(_), None)
    )
}

/// Whether `start` can reach itself through the reference edges.
fn reaches_itself(edges: &BTreeMap<String, BTreeSet<String>>, start: &str) -> bool {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut stack: Vec<&str> = match edges.get(start) {
        Some(targets) => targets.iter().map(String::as_str).collect(),
        None => return false,
    };
    while let Some(node) = stack.pop() {
        if node == start {
            return true;
        }
        if seen.insert(node) {
            if let Some(targets) = edges.get(node) {
                stack.extend(targets.iter().map(String::as_str));
            }
        }
    }
    false
}

/// Every `$ref` string in `schema`'s own subschemas, stopping at each reference (its target is
/// walked as a subtree of its own). Iterative, so depth does not matter.
fn references_in(schema: &Value) -> Vec<&str> {
    let mut found = Vec::new();
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        let Value::Object(map) = node else { continue };
        if let Some(Value::String(reference)) = map.get("$ref") {
            found.push(reference.as_str());
        }
        push_subschemas(map, &mut stack);
    }
    found
}

/// Pushes the subschemas of one schema object (not its definitions).
fn push_subschemas<'a>(map: &'a Map<String, Value>, stack: &mut Vec<&'a Value>) {
    for key in SINGLE_SUBSCHEMA {
        match map.get(key) {
            // `items` may also be a list of subschemas (the tuple form of older drafts).
            Some(Value::Array(list)) => stack.extend(list.iter()),
            Some(value) => stack.push(value),
            None => {}
        }
    }
    for key in SUBSCHEMA_LISTS {
        if let Some(Value::Array(list)) = map.get(key) {
            stack.extend(list.iter());
        }
    }
    for key in SUBSCHEMA_MAPS {
        if let Some(Value::Object(children)) = map.get(key) {
            stack.extend(children.values());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolves_defs_definitions_root_and_escaped_pointers() {
        let doc =
            json!({"$defs": {"a/b": {"type": "string"}}, "definitions": {"x y": {"type": "null"}}});
        assert_eq!(
            resolve(&doc, "#/$defs/a~1b").map(|r| r.0),
            Some("/$defs/a~1b".into())
        );
        assert_eq!(
            resolve(&doc, "#/definitions/x%20y").map(|r| r.1),
            Some(&json!({"type": "null"}))
        );
        assert_eq!(resolve(&doc, "#").map(|r| r.0), Some(String::new()));
        assert!(resolve(&doc, "other.json#/a").is_none());
        assert!(resolve(&doc, "#anchor").is_none());
        assert!(resolve(&doc, "#/$defs/missing").is_none());
        assert!(resolve(&doc, "#/%zz").is_none());
    }

    #[test]
    fn names_reused_and_recursive_targets_but_not_single_uses() {
        let doc = json!({
            "properties": {
                "a": {"$ref": "#/$defs/once"},
                "b": {"$ref": "#/$defs/twice"},
                "c": {"$ref": "#/$defs/twice"},
                "d": {"$ref": "#/$defs/node"}
            },
            "$defs": {
                "once": {"type": "string"},
                "twice": {"type": "number"},
                "node": {"properties": {"next": {"$ref": "#/$defs/node"}}},
                "unused": {"$ref": "#/$defs/unused"}
            }
        });
        let plan = plan(&doc);
        let named: Vec<&str> = [
            "/$defs/once",
            "/$defs/twice",
            "/$defs/node",
            "/$defs/unused",
        ]
        .into_iter()
        .filter(|p| plan.names(p, &json!({"type": "array", "items": {"type": "string"}})))
        .collect();
        assert_eq!(named, vec!["/$defs/twice", "/$defs/node"]);
        // A reused leaf is cheaper inline.
        assert!(!plan.names("/$defs/twice", &json!({"type": "number"})));
    }

    #[test]
    fn a_target_written_inline_elsewhere_counts_as_reused() {
        let doc = json!({"properties": {
            "a": {"type": "array", "items": {"type": "string"}},
            "b": {"$ref": "#/properties/a"}
        }});
        let plan = plan(&doc);
        assert!(plan.names("/properties/a", &json!({"items": {}})));
        assert!(is_definition("/$defs/x") && is_definition("/definitions/x") && is_definition(""));
        assert!(!is_definition("/$defs/x/properties/y") && !is_definition("/properties/a"));
    }

    #[test]
    fn a_root_that_refers_to_itself_is_named() {
        let doc = json!({"properties": {"child": {"$ref": "#"}}});
        assert!(plan(&doc).cyclic.contains(""));
    }
}

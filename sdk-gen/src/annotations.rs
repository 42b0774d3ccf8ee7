//! The one-line documentation of a property: its description, then the annotations a model
//! needs to call the tool well (`format`, ranges, lengths, `pattern`, `default`) in parentheses.
//!
//! The text is collapsed to one line here but not escaped: each renderer escapes for its language.

use crate::refs;
use crate::text::{collapse_whitespace, json_quote};
use serde_json::{Map, Value};

/// A `default` longer than this (as compact JSON) is left out: it would crowd the line.
const MAX_DEFAULT_CHARS: usize = 60;

/// Annotation keywords, in the order they are printed.
const NUMERIC_BOUNDS: [&str; 10] = [
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "multipleOf",
    "uniqueItems",
];

/// The documentation line of a property schema, or `None` when it has neither a description nor
/// annotations. A bare local `$ref` borrows its target's documentation.
pub fn property_doc(schema: &Value, root: &Value) -> Option<String> {
    let Value::Object(map) = schema else {
        return None;
    };
    let own = doc_line(map);
    if own.is_some() {
        return own;
    }
    match map.get("$ref") {
        Some(Value::String(reference)) => match refs::resolve(root, reference) {
            Some((_, Value::Object(target))) => doc_line(target),
            _ => None,
        },
        _ => None,
    }
}

fn doc_line(map: &Map<String, Value>) -> Option<String> {
    let description = match map.get("description") {
        Some(Value::String(text)) => collapse_whitespace(text),
        _ => String::new(),
    };
    let mut notes: Vec<String> = Vec::new();
    if let Some(Value::String(format)) = map.get("format") {
        notes.push(format!("format: {}", collapse_whitespace(format)));
    }
    for key in NUMERIC_BOUNDS {
        if let Some(value @ (Value::Number(_) | Value::Bool(true))) = map.get(key) {
            if !is_safe_integer_bound(value) {
                notes.push(format!("{key}: {value}"));
            }
        }
    }
    if let Some(Value::String(pattern)) = map.get("pattern") {
        notes.push(format!("pattern: {}", json_quote(pattern)));
    }
    if let Some(default) = map.get("default").and_then(shallow_json) {
        if default.chars().count() <= MAX_DEFAULT_CHARS && !states_default(&description, &default) {
            notes.push(format!("default: {default}"));
        }
    }

    let notes = notes.join(", ");
    match (description.is_empty(), notes.is_empty()) {
        (true, true) => None,
        (false, true) => Some(description),
        (true, false) => Some(format!("({notes})")),
        (false, false) => Some(format!("{description} ({notes})")),
    }
}

/// Whether a description already gives the default (`Number of results (1-20, default 5)`), so
/// the note would only repeat it. The lead (`default`, `default:`, `default is`, `defaults to`,
/// `default=`) may be in any case; the value must be written exactly (a string with or without
/// its quotes) and end there.
fn states_default(description: &str, default: &str) -> bool {
    let bare = default.trim_matches('"');
    if bare.is_empty() {
        return false;
    }
    let lowered = description.to_ascii_lowercase();
    [
        "default ",
        "default: ",
        "default is ",
        "defaults to ",
        "default=",
    ]
    .iter()
    .flat_map(|lead| lowered.match_indices(lead))
    .any(|(at, lead)| {
        let starts_a_word = description[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let rest = &description[at + lead.len()..];
        starts_a_word
            && [default, bare].iter().any(|value| {
                rest.strip_prefix(value).is_some_and(|after| {
                    let mut next = after.chars();
                    match next.next() {
                        None => true,
                        Some('.' | ',') => !next.next().is_some_and(|c| c.is_ascii_digit()),
                        Some(c) => c.is_whitespace() || matches!(c, ')' | ',' | ';'),
                    }
                })
            })
    })
}

/// `±(2^53 - 1)`: a bound that only says "a safe integer" (schema generators add it to every
/// integer), which is noise to a reader.
fn is_safe_integer_bound(value: &Value) -> bool {
    const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;
    value
        .as_i64()
        .is_some_and(|n| n == MAX_SAFE_INTEGER || n == -MAX_SAFE_INTEGER)
}

/// Compact JSON of a scalar, or of an array/object whose members are all scalars. Deeper values
/// are left out: they would not fit on an annotation's line.
fn shallow_json(value: &Value) -> Option<String> {
    let is_scalar = |v: &Value| !matches!(v, Value::Array(_) | Value::Object(_));
    let shallow = match value {
        Value::Array(items) => items.iter().all(is_scalar),
        Value::Object(map) => map.values().all(is_scalar),
        _ => true,
    };
    if shallow {
        Some(codemode_json::to_string(value))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_default_the_description_states_is_not_repeated() {
        let line = |schema: Value| doc_line(schema.as_object().expect("an object"));
        assert_eq!(
            line(json!({"description": "Number of results (1-20, default 5)", "default": 5})),
            Some("Number of results (1-20, default 5)".into())
        );
        assert_eq!(
            line(json!({"description": "Mode, default is \"fast\"", "default": "fast"})),
            Some("Mode, default is \"fast\"".into())
        );
        assert_eq!(
            line(json!({"description": "Retries (default 10)", "default": 1})),
            Some("Retries (default 10) (default: 1)".into())
        );
        assert_eq!(
            line(json!({"description": "Limit", "default": 5})),
            Some("Limit (default: 5)".into())
        );
        for (description, default) in [
            ("Uses the default \"main\" branch", json!("")),
            ("(default: fast_mode)", json!("fast")),
            ("(default 1,000)", json!(1)),
            ("(default 1-5)", json!(1)),
            ("(default asc)", json!("ASC")),
            ("a nondefault 5", json!(5)),
        ] {
            let noted = line(json!({"description": description, "default": default}));
            assert!(
                noted.is_some_and(|l| l.contains("(default: ")),
                "{description}"
            );
        }
        assert_eq!(
            line(json!({"description": "Defaults to 30.", "default": 30})),
            Some("Defaults to 30.".into())
        );
    }

    #[test]
    fn description_comes_first_then_annotations_in_fixed_order() {
        let schema = json!({
            "type": "integer", "description": " How many\n lines. ", "default": 10,
            "maximum": 100, "minimum": 1, "format": "int32"
        });
        assert_eq!(
            property_doc(&schema, &json!({})).as_deref(),
            Some("How many lines. (format: int32, minimum: 1, maximum: 100, default: 10)")
        );
    }

    #[test]
    fn pattern_is_quoted_and_long_or_deep_defaults_are_left_out() {
        let schema = json!({"pattern": "^a\\d+$", "default": {"a": {"b": 1}}});
        assert_eq!(
            property_doc(&schema, &json!({})).as_deref(),
            Some("(pattern: \"^a\\\\d+$\")")
        );
        let long = json!({"default": "x".repeat(80)});
        assert_eq!(property_doc(&long, &json!({})), None);
    }

    #[test]
    fn a_bare_reference_borrows_the_target_description() {
        let root = json!({"$defs": {"p": {"description": "A path."}}});
        let schema = json!({"$ref": "#/$defs/p"});
        assert_eq!(property_doc(&schema, &root).as_deref(), Some("A path."));
    }

    #[test]
    fn safe_integer_bounds_are_noise_and_left_out() {
        let schema = json!({"type": "integer", "minimum": 1, "maximum": 9007199254740991_i64});
        assert_eq!(
            property_doc(&schema, &json!({})).as_deref(),
            Some("(minimum: 1)")
        );
        let negative = json!({"minimum": -9007199254740991_i64});
        assert_eq!(property_doc(&negative, &json!({})), None);
    }

    #[test]
    fn no_description_and_no_annotations_is_no_doc() {
        assert_eq!(property_doc(&json!({"type": "string"}), &json!({})), None);
        assert_eq!(property_doc(&json!({"description": 3}), &json!({})), None);
    }
}

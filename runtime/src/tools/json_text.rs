//! JSON helpers the pipeline needs with the reference's exact semantics: the lossless check
//! (no `-0`), JavaScript number spelling, and compact (optionally key-sorted) stringification.
//! Every walk here is iterative: values of any depth are handled without recursion.

use serde_json::{Number, Value};

/// Whether a number is lossless JSON: finite (always true for `serde_json`) and not `-0`.
pub(crate) fn is_lossless_number(number: &Number) -> bool {
    match number.as_f64() {
        Some(f) if number.is_f64() => f.is_finite() && !(f == 0.0 && f.is_sign_negative()),
        _ => true,
    }
}

/// Whether a whole value is lossless JSON (the only lossy scalar a `Value` can hold is `-0`).
pub(crate) fn is_lossless(value: &Value) -> bool {
    // `json::walk` keeps one iterator per open container, not a pointer per element.
    crate::json::walk(value, |node, _| match node {
        Value::Number(n) => is_lossless_number(n),
        _ => true,
    })
}

/// A number as JavaScript's `String(n)` spells it (`1` not `1.0`, `1e+21`, ...).
pub(crate) fn js_number(number: &Number) -> String {
    if let Some(i) = number.as_i64() {
        return i.to_string();
    }
    if let Some(u) = number.as_u64() {
        return u.to_string();
    }
    let f = number.as_f64().unwrap_or(0.0);
    ryu_js::Buffer::new().format(f).to_owned()
}

/// Scalar equality as JavaScript's `===` sees JSON scalars: numbers compare by value.
pub(crate) fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        _ => a == b,
    }
}

enum Step<'a> {
    Value(&'a Value),
    Key(&'a str),
    Raw(&'static str),
}

/// Compact JSON like `JSON.stringify(value)`; with `sort_keys`, object keys are sorted by code
/// unit order at every depth (the repeat reminder's canonical form).
pub(crate) fn stringify(value: &Value, sort_keys: bool) -> String {
    let mut out = String::new();
    let mut steps = vec![Step::Value(value)];
    while let Some(step) = steps.pop() {
        match step {
            Step::Raw(text) => out.push_str(text),
            Step::Key(key) => {
                crate::json::write_string(key, &mut out);
                out.push(':');
            }
            Step::Value(v) => match v {
                Value::Null => out.push_str("null"),
                Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                Value::Number(n) => out.push_str(&js_number(n)),
                Value::String(s) => crate::json::write_string(s, &mut out),
                Value::Array(items) => {
                    out.push('[');
                    steps.push(Step::Raw("]"));
                    for (index, item) in items.iter().enumerate().rev() {
                        steps.push(Step::Value(item));
                        if index > 0 {
                            steps.push(Step::Raw(","));
                        }
                    }
                }
                Value::Object(map) => {
                    out.push('{');
                    steps.push(Step::Raw("}"));
                    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                    if sort_keys {
                        entries.sort_by(|a, b| utf16_cmp(a.0, b.0));
                    }
                    for (index, (key, item)) in entries.into_iter().enumerate().rev() {
                        steps.push(Step::Value(item));
                        steps.push(Step::Key(key));
                        if index > 0 {
                            steps.push(Step::Raw(","));
                        }
                    }
                }
            },
        }
    }
    out
}

/// JavaScript's default sort order: UTF-16 code units.
fn utf16_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{clone_deep, drop_deep as dispose};
    use serde_json::json;

    #[test]
    fn negative_zero_is_the_only_lossy_value() {
        assert!(is_lossless(&json!({"a": [0.0, 1, -1.5, "x", null]})));
        assert!(!is_lossless(&json!({"a": [{"b": -0.0}]})));
    }

    #[test]
    fn numbers_are_spelled_like_javascript() {
        assert_eq!(
            stringify(&json!([1.0, 1.5, 1e21, -3]), false),
            "[1,1.5,1e+21,-3]"
        );
    }

    #[test]
    fn deep_copies_are_equal() {
        let v = json!({"a": [1, {"b": null, "c": [true, "x"]}], "d": {}});
        assert_eq!(clone_deep(&v), v);
        assert_eq!(clone_deep(&json!(3)), json!(3));
    }

    #[test]
    fn sorted_stringify_orders_keys_at_every_depth() {
        let v = json!({"b": {"d": 1, "c": 2}, "a": [{"z": 0, "y": 1}]});
        assert_eq!(
            stringify(&v, true),
            r#"{"a":[{"y":1,"z":0}],"b":{"c":2,"d":1}}"#
        );
    }

    #[test]
    fn deep_values_stringify_without_recursion() {
        let mut v = json!(1);
        for _ in 0..5000 {
            v = Value::Array(vec![v]);
        }
        assert_eq!(stringify(&v, true).len(), 10001);
        assert!(is_lossless(&v));
        let copy = clone_deep(&v);
        assert_eq!(stringify(&copy, false), stringify(&v, false));
        dispose(copy);
        dispose(v);
    }
}

//! Values to text, byte for byte as JavaScript's `JSON.stringify` writes them.

use serde_json::{Number, Value};

/// Appends `n` as JavaScript's `String(n)` writes it.
pub fn write_number(n: &Number, out: &mut String) {
    if let Some(i) = n.as_i64() {
        if i.unsigned_abs() <= 1 << 53 {
            out.push_str(&i.to_string());
            return;
        }
    } else if let Some(u) = n.as_u64() {
        if u <= 1 << 53 {
            out.push_str(&u.to_string());
            return;
        }
    }
    let f = n.as_f64().unwrap_or(0.0);
    let mut buffer = ryu_js::Buffer::new();
    out.push_str(buffer.format(f));
}

/// Appends `s` as a JSON string literal, escaped exactly as `JSON.stringify` does.
pub fn write_string(s: &str, out: &mut String) {
    out.push('"');
    let mut run_start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[run_start..i]);
        match escape {
            Some(e) => out.push_str(e),
            None => out.push_str(&format!("\\u{:04x}", b)),
        }
        run_start = i + 1;
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

enum Frame<'a> {
    Array(std::slice::Iter<'a, Value>, bool),
    Object(serde_json::map::Iter<'a>, bool),
}

/// Serialises `value` compactly, as `JSON.stringify(value)` would, with no recursion.
pub fn write(value: &Value, out: &mut String) {
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(v) = next.take() {
            match v {
                Value::Null => out.push_str("null"),
                Value::Bool(true) => out.push_str("true"),
                Value::Bool(false) => out.push_str("false"),
                Value::Number(n) => write_number(n, out),
                Value::String(s) => write_string(s, out),
                Value::Array(items) => {
                    out.push('[');
                    stack.push(Frame::Array(items.iter(), true));
                }
                Value::Object(map) => {
                    out.push('{');
                    stack.push(Frame::Object(map.iter(), true));
                }
            }
        }
        let Some(top) = stack.last_mut() else {
            return;
        };
        match top {
            Frame::Array(items, first) => match items.next() {
                Some(item) => {
                    if !std::mem::replace(first, false) {
                        out.push(',');
                    }
                    next = Some(item);
                }
                None => {
                    out.push(']');
                    stack.pop();
                }
            },
            Frame::Object(entries, first) => match entries.next() {
                Some((key, item)) => {
                    if !std::mem::replace(first, false) {
                        out.push(',');
                    }
                    write_string(key, out);
                    out.push(':');
                    next = Some(item);
                }
                None => {
                    out.push('}');
                    stack.pop();
                }
            },
        }
    }
}

/// `JSON.stringify(value)` as a `String`.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// `JSON.stringify(value)` with every object's keys sorted by UTF-16 code units (JavaScript's
/// default sort order) at every depth: the canonical form two equal arguments share.
pub fn to_string_sorted(value: &Value) -> String {
    enum Step<'a> {
        Value(&'a Value),
        Key(&'a str),
        Raw(&'static str),
    }
    let mut out = String::new();
    let mut steps = vec![Step::Value(value)];
    while let Some(step) = steps.pop() {
        match step {
            Step::Raw(text) => out.push_str(text),
            Step::Key(key) => {
                write_string(key, &mut out);
                out.push(':');
            }
            Step::Value(Value::Array(items)) => {
                out.push('[');
                steps.push(Step::Raw("]"));
                for (index, item) in items.iter().enumerate().rev() {
                    steps.push(Step::Value(item));
                    if index > 0 {
                        steps.push(Step::Raw(","));
                    }
                }
            }
            Step::Value(Value::Object(map)) => {
                out.push('{');
                steps.push(Step::Raw("}"));
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                for (index, (key, item)) in entries.into_iter().enumerate().rev() {
                    steps.push(Step::Value(item));
                    steps.push(Step::Key(key));
                    if index > 0 {
                        steps.push(Step::Raw(","));
                    }
                }
            }
            Step::Value(scalar) => write(scalar, &mut out),
        }
    }
    out
}

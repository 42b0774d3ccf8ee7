//! Values to text, byte for byte as JavaScript's `JSON.stringify` writes them.

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Number, Value};

/// Orders two strings by their UTF-16 code units, as JavaScript's `<` and default `sort` do
/// (Rust's `str` order is by UTF-8 bytes, which differs for characters above U+FFFF).
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Appends `n` as JavaScript's `String(n)` writes it.
pub fn write_number(n: &Number, out: &mut String) {
    // Writing to a `String` cannot fail.
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= 1 << 53) {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64().filter(|u| *u <= 1 << 53) {
        let _ = write!(out, "{u}");
    } else {
        let f = n.as_f64().unwrap_or(0.0);
        out.push_str(ryu_js::Buffer::new().format(f));
    }
}

/// How `JSON.stringify` writes byte `b` of a string: `None` when it stands for itself.
fn escape(b: u8) -> Option<Escape> {
    Some(match b {
        b'"' => Escape::Short("\\\""),
        b'\\' => Escape::Short("\\\\"),
        b'\n' => Escape::Short("\\n"),
        b'\r' => Escape::Short("\\r"),
        b'\t' => Escape::Short("\\t"),
        0x08 => Escape::Short("\\b"),
        0x0c => Escape::Short("\\f"),
        0..=0x1f => Escape::Unicode,
        _ => return None,
    })
}

enum Escape {
    Short(&'static str),
    /// `\u00XX`.
    Unicode,
}

impl Escape {
    fn len(&self) -> usize {
        match self {
            Escape::Short(text) => text.len(),
            Escape::Unicode => 6,
        }
    }
}

/// Bytes `c` takes inside a JSON string literal.
pub fn char_len(c: char) -> usize {
    u8::try_from(c)
        .ok()
        .and_then(escape)
        .map_or(c.len_utf8(), |escape| escape.len())
}

/// Bytes of `s` as a JSON string literal, quotes included, without writing it.
pub fn string_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| escape(b).map_or(1, |escape| escape.len()))
        .sum::<usize>()
}

/// Appends `s` as a JSON string literal, escaped exactly as `JSON.stringify` does.
pub fn write_string(s: &str, out: &mut String) {
    out.push('"');
    let mut run_start = 0;
    for (i, b) in s.bytes().enumerate() {
        let Some(escape) = escape(b) else {
            continue;
        };
        out.push_str(&s[run_start..i]);
        match escape {
            Escape::Short(text) => out.push_str(text),
            Escape::Unicode => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        run_start = i + 1;
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

/// An object's entries in the order they are written.
enum Entries<'a> {
    Own(serde_json::map::Iter<'a>),
    Sorted(std::vec::IntoIter<(&'a String, &'a Value)>),
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a String, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Entries::Own(entries) => entries.next(),
            Entries::Sorted(entries) => entries.next(),
        }
    }
}

enum Frame<'a> {
    Array(std::slice::Iter<'a, Value>, bool),
    Object(Entries<'a>, bool),
}

/// Serialises `value` compactly, as `JSON.stringify(value)` would, with no recursion.
pub fn write(value: &Value, out: &mut String) {
    write_in_order(value, false, out);
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
    let mut out = String::new();
    write_in_order(value, true, &mut out);
    out
}

/// The writer behind both orders: one frame per open container, not an entry per element.
fn write_in_order(value: &Value, sorted: bool, out: &mut String) {
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
                    let entries = if sorted {
                        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                        entries.sort_by(|a, b| cmp_utf16(a.0, b.0));
                        Entries::Sorted(entries.into_iter())
                    } else {
                        Entries::Own(map.iter())
                    };
                    stack.push(Frame::Object(entries, true));
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

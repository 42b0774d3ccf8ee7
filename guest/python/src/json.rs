//! Values across the bridge: Python values to JSON text (a tool's arguments, the program's
//! result) and JSON text to Python values (a tool's reply).
//!
//! The rules are the TypeScript guest's: only what JSON carries without loss leaves the
//! sandbox. `None` is `null`, `bool`, `int`, a finite `float`, `str`, `list` and `tuple` as
//! arrays, a `dict` with `str` keys as an object; anything else (a set, bytes, a date, a
//! function, a non-finite float, a key that is not a string) is refused, naming what it was.
//! The host checks every frame again; nothing here is trusted.

use std::fmt::Write as _;

use jiter::JsonValue;
use monty_types::{MontyObject, ObjectRef};
use num_bigint::BigInt;

/// The largest integer every JSON reader reads back exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Deeper values are refused rather than walked (the host's JSON depth limit is lower).
const MAX_DEPTH: usize = 512;

/// Longest path a message shows.
const MAX_PATH_SHOWN: usize = 120;

/// Why a value cannot leave the sandbox: the path to the part that cannot, and what it is.
pub struct NotJson {
    pub path: String,
    pub what: String,
}

impl NotJson {
    /// The reason as a model reads it: `value at ['items'][2] is a set`.
    pub fn describe(&self) -> String {
        if self.path.is_empty() {
            return format!("the value is {}", self.what);
        }
        // A deep path is shown by its start: enough to find the place.
        let mut path = self.path.as_str();
        let mut cut = "";
        if path.len() > MAX_PATH_SHOWN {
            let mut end = MAX_PATH_SHOWN;
            while !path.is_char_boundary(end) {
                end -= 1;
            }
            path = &path[..end];
            cut = "…";
        }
        format!("the value at {path}{cut} is {}", self.what)
    }
}

/// Writes `value` as compact JSON into `out`.
pub fn write(value: ObjectRef<'_>, out: &mut String) -> Result<(), NotJson> {
    let mut path = String::new();
    write_at(value, out, &mut path, 0)
}

fn refuse(path: &str, what: impl Into<String>) -> Result<(), NotJson> {
    Err(NotJson {
        path: path.to_owned(),
        what: what.into(),
    })
}

fn write_at(
    value: ObjectRef<'_>,
    out: &mut String,
    path: &mut String,
    depth: usize,
) -> Result<(), NotJson> {
    if depth > MAX_DEPTH {
        return refuse(path, format!("nested deeper than {MAX_DEPTH} levels"));
    }
    match value.type_name() {
        "NoneType" => out.push_str("null"),
        "bool" => out.push_str(if value.as_bool() == Some(true) {
            "true"
        } else {
            "false"
        }),
        "int" => match value.as_int() {
            Some(n) if n.unsigned_abs() <= MAX_SAFE_INTEGER => {
                let _ = write!(out, "{n}");
            }
            // JSON numbers are read as doubles by most of their readers (the host's rule for
            // TypeScript results too): an int beyond 2**53 would not come back the same.
            _ => {
                return refuse(
                    path,
                    format!(
                    "the int {}, larger than JSON numbers carry exactly (2**53 - 1); make it a str",
                    value.py_repr()
                ),
                )
            }
        },
        "float" => {
            let Some(f) = value.as_float() else {
                return refuse(path, "a float that cannot be read");
            };
            if !f.is_finite() {
                return refuse(path, format!("the float {}", value.py_repr()));
            }
            // As JavaScript writes numbers (`1.0` is `1`), which is what the host expects.
            out.push_str(ryu_js::Buffer::new().format(f));
        }
        "str" => {
            let Some(s) = value.as_str() else {
                return refuse(path, "a string that cannot be read");
            };
            quote(s, out);
        }
        "list" | "tuple" => {
            let items = value.items().unwrap_or_default();
            out.push('[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let len = path.len();
                let _ = write!(path, "[{i}]");
                write_at(item, out, path, depth + 1)?;
                path.truncate(len);
            }
            out.push(']');
        }
        "dict" => {
            let pairs = value.pairs().unwrap_or_default();
            out.push('{');
            for (i, (key, item)) in pairs.into_iter().enumerate() {
                let Some(key) = key.as_str().filter(|_| key.type_name() == "str") else {
                    return refuse(
                        path,
                        format!(
                            "a dict with the {} key {} (JSON object keys are strings)",
                            key.type_name(),
                            key.py_repr()
                        ),
                    );
                };
                if i > 0 {
                    out.push(',');
                }
                quote(key, out);
                out.push(':');
                let len = path.len();
                path.push('[');
                path.push_str(&MontyObject::string(key).py_repr());
                path.push(']');
                write_at(item, out, path, depth + 1)?;
                path.truncate(len);
            }
            out.push('}');
        }
        other => return refuse(path, format!("a {other}, which JSON cannot carry")),
    }
    Ok(())
}

/// A JSON string literal, escaped as `JSON.stringify` escapes it.
fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Reads a tool's reply. `None` when the bytes are not JSON (the host sends only JSON).
pub fn read(json: &[u8]) -> Option<MontyObject> {
    let value = JsonValue::parse(json, false).ok()?;
    Some(to_object(&value))
}

fn to_object(value: &JsonValue<'_>) -> MontyObject {
    match value {
        JsonValue::Null => MontyObject::none(),
        JsonValue::Bool(b) => MontyObject::bool(*b),
        JsonValue::Int(n) => MontyObject::int(*n),
        JsonValue::BigInt(n) => MontyObject::bigint(BigInt::clone(n)),
        JsonValue::Float(f) => MontyObject::float(*f),
        JsonValue::Str(s) => MontyObject::string(s.as_ref()),
        JsonValue::Array(items) => MontyObject::list(items.iter().map(to_object)),
        JsonValue::Object(pairs) => MontyObject::dict(
            pairs
                .iter()
                .map(|(k, v)| (MontyObject::string(k.as_ref()), to_object(v))),
        ),
    }
}

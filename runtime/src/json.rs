//! Lossless JSON: what may cross a sandbox or tool boundary, read and written without recursion.
//!
//! Values are `serde_json::Value`. "Lossless" follows the reference contract (§1.8) as far as a
//! Rust value can express it: numbers are finite and never `-0`, and nesting is bounded by
//! [`MAX_DEPTH`] so that every host path (parse, write, byte counting, drop) stays within a small
//! native stack. Parsing and writing here use explicit work stacks; output matches JavaScript's
//! `JSON.stringify` byte for byte (numbers as `String(n)`), which the output ledger relies on.

use serde_json::{Map, Number, Value};

/// The deepest nesting accepted at a boundary: what the reference's deepest tests use. serde_json
/// drops a `Value` recursively (measured: about 6,800 nested objects fit a 2 MiB thread stack)
/// and clones it recursively (about 900), so hosts holding deep values should use
/// [`drop_deep`] and [`clone_deep`], which need no stack at all.
pub const MAX_DEPTH: usize = 5_000;

/// Why a text or value is not lossless JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// The text is not JSON; holds the byte offset of the fault.
    #[error("malformed JSON at byte {0}")]
    Syntax(usize),
    /// A number overflows to infinity or is `-0`; holds its byte offset.
    #[error("number at byte {0} is not a finite JSON number other than -0")]
    Number(usize),
    /// The nesting exceeds [`MAX_DEPTH`].
    #[error("value is nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// Non-whitespace follows the value; holds its byte offset.
    #[error("trailing data at byte {0}")]
    Trailing(usize),
    /// Building the value would take more host memory than allowed (see [`heap_bytes`]).
    #[error("value needs more than {0} bytes of host memory")]
    TooLarge(usize),
}

enum Open {
    Array(Vec<Value>),
    Object(Map<String, Value>, String),
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Result<u8, JsonError> {
        self.skip_ws();
        self.bytes
            .get(self.pos)
            .copied()
            .ok_or(JsonError::Syntax(self.pos))
    }

    fn expect(&mut self, byte: u8) -> Result<(), JsonError> {
        if self.peek()? == byte {
            self.pos += 1;
            Ok(())
        } else {
            Err(JsonError::Syntax(self.pos))
        }
    }

    fn literal(&mut self, text: &[u8], value: Value) -> Result<Value, JsonError> {
        if self.bytes.get(self.pos..self.pos + text.len()) == Some(text) {
            self.pos += text.len();
            Ok(value)
        } else {
            Err(JsonError::Syntax(self.pos))
        }
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        let b = self.bytes;
        let mut i = self.pos;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = b.get(i) {
                    i += 1;
                }
            }
            _ => return Err(JsonError::Syntax(i)),
        }
        let mut integral = true;
        if b.get(i) == Some(&b'.') {
            integral = false;
            i += 1;
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                return Err(JsonError::Syntax(i));
            }
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            integral = false;
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                return Err(JsonError::Syntax(i));
            }
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
        }
        self.pos = i;
        // The token is ASCII by construction.
        let text = std::str::from_utf8(&b[start..i]).map_err(|_| JsonError::Syntax(start))?;
        if integral {
            if let Ok(n) = text.parse::<i64>() {
                if n == 0 && text.starts_with('-') {
                    return Err(JsonError::Number(start));
                }
                return Ok(Value::Number(n.into()));
            }
            if let Ok(n) = text.parse::<u64>() {
                return Ok(Value::Number(n.into()));
            }
        }
        let f: f64 = text.parse().map_err(|_| JsonError::Syntax(start))?;
        number_value(f).ok_or(JsonError::Number(start))
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .ok_or(JsonError::Syntax(self.pos))?;
        let unit = u32::from_str_radix(digits, 16).map_err(|_| JsonError::Syntax(self.pos))?;
        self.pos += 4;
        Ok(unit)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            let run = std::str::from_utf8(&self.bytes[start..self.pos])
                .map_err(|e| JsonError::Syntax(start + e.valid_up_to()))?;
            out.push_str(run);
            match self.bytes.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let escaped = *self
                        .bytes
                        .get(self.pos)
                        .ok_or(JsonError::Syntax(self.pos))?;
                    self.pos += 1;
                    let c = match escaped {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(JsonError::Syntax(self.pos - 1)),
                    };
                    out.push(c);
                }
                _ => return Err(JsonError::Syntax(self.pos)),
            }
        }
    }

    /// Decodes `\uXXXX` (and a following low surrogate). A lone surrogate has no Rust `char`:
    /// it becomes U+FFFD.
    fn unicode_escape(&mut self) -> Result<char, JsonError> {
        let unit = self.hex4()?;
        if (0xD800..0xDC00).contains(&unit)
            && self.bytes.get(self.pos..self.pos + 2) == Some(b"\\u")
        {
            let save = self.pos;
            self.pos += 2;
            let low = self.hex4()?;
            if (0xDC00..0xE000).contains(&low) {
                let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                return Ok(char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(unit).unwrap_or('\u{FFFD}'))
    }
}

/// A JSON number for `f`, or `None` when `f` is not lossless (non-finite or `-0`).
pub fn number_value(f: f64) -> Option<Value> {
    if !f.is_finite() || (f == 0.0 && f.is_sign_negative()) {
        return None;
    }
    if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        // Integral and exactly representable: keep it an integer so it prints as JS does.
        return Some(Value::Number((f as i64).into()));
    }
    Number::from_f64(f).map(Value::Number)
}

/// Parses one JSON text with no recursion. Rejects `-0`, numbers that overflow to infinity,
/// nesting deeper than [`MAX_DEPTH`], and trailing data.
pub fn parse(bytes: &[u8]) -> Result<Value, JsonError> {
    parse_within(bytes, usize::MAX).map(|(value, _)| value)
}

/// Host memory a value takes, estimated: one `Value` per node, the bytes of every string and
/// key, and the bookkeeping of every object entry. JSON text can expand about thirty-fold into
/// a `Value` (a one-byte `0` becomes a 32-byte node), so budgets that bound what the host holds
/// count this, not text length.
pub fn heap_bytes(value: &Value) -> usize {
    let mut total = 0usize;
    let mut pending = vec![value];
    while let Some(node) = pending.pop() {
        total = total.saturating_add(NODE_BYTES);
        match node {
            Value::String(s) => total = total.saturating_add(s.len()),
            Value::Array(items) => pending.extend(items.iter()),
            Value::Object(map) => {
                for (key, item) in map {
                    total = total.saturating_add(ENTRY_BYTES + key.len());
                    pending.push(item);
                }
            }
            _ => {}
        }
    }
    total
}

/// What one node costs in [`heap_bytes`].
const NODE_BYTES: usize = std::mem::size_of::<Value>();
/// What an object entry costs beyond its value and key bytes (the key's `String`, the index
/// map's hash and slot).
const ENTRY_BYTES: usize = std::mem::size_of::<String>() + 16;

/// [`parse`], refusing with [`JsonError::TooLarge`] as soon as the value being built would
/// exceed `max_heap` bytes by [`heap_bytes`]'s estimate (so a hostile text never gets built
/// past the limit). Returns the value and its estimate.
pub fn parse_within(bytes: &[u8], max_heap: usize) -> Result<(Value, usize), JsonError> {
    let mut stack: Vec<Open> = Vec::new();
    let mut heap = Heap {
        used: 0,
        max: max_heap,
    };
    let result = parse_into(bytes, &mut stack, &mut heap).map(|value| (value, heap.used));
    // A failed parse leaves partial containers behind; free them without recursion.
    for open in stack.drain(..) {
        match open {
            Open::Array(items) => drop_deep(Value::Array(items)),
            Open::Object(map, _) => drop_deep(Value::Object(map)),
        }
    }
    result
}

/// The running estimate of what a parse has built.
struct Heap {
    used: usize,
    max: usize,
}

impl Heap {
    fn charge(&mut self, bytes: usize) -> Result<(), JsonError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.max {
            Err(JsonError::TooLarge(self.max))
        } else {
            Ok(())
        }
    }
}

fn parse_into(bytes: &[u8], stack: &mut Vec<Open>, heap: &mut Heap) -> Result<Value, JsonError> {
    let mut s = Scanner { bytes, pos: 0 };
    loop {
        heap.charge(NODE_BYTES)?;
        let mut value = match s.peek()? {
            b'{' => {
                s.pos += 1;
                if stack.len() >= MAX_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                if s.peek()? == b'}' {
                    s.pos += 1;
                    Value::Object(Map::new())
                } else {
                    let key = s.string()?;
                    heap.charge(ENTRY_BYTES + key.len())?;
                    s.expect(b':')?;
                    stack.push(Open::Object(Map::new(), key));
                    continue;
                }
            }
            b'[' => {
                s.pos += 1;
                if stack.len() >= MAX_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                if s.peek()? == b']' {
                    s.pos += 1;
                    Value::Array(Vec::new())
                } else {
                    stack.push(Open::Array(Vec::new()));
                    continue;
                }
            }
            b'"' => {
                let text = s.string()?;
                heap.charge(text.len())?;
                Value::String(text)
            }
            b't' => s.literal(b"true", Value::Bool(true))?,
            b'f' => s.literal(b"false", Value::Bool(false))?,
            b'n' => s.literal(b"null", Value::Null)?,
            _ => s.number()?,
        };
        loop {
            let Some(top) = stack.last_mut() else {
                s.skip_ws();
                return if s.pos == bytes.len() {
                    Ok(value)
                } else {
                    Err(JsonError::Trailing(s.pos))
                };
            };
            match top {
                Open::Array(items) => {
                    items.push(value);
                    match s.peek()? {
                        b',' => {
                            s.pos += 1;
                            break;
                        }
                        b']' => {
                            s.pos += 1;
                            let Some(Open::Array(items)) = stack.pop() else {
                                return Err(JsonError::Syntax(s.pos));
                            };
                            value = Value::Array(items);
                        }
                        _ => return Err(JsonError::Syntax(s.pos)),
                    }
                }
                Open::Object(map, key) => {
                    // Duplicate keys: the last one wins, as in JSON.parse.
                    map.insert(std::mem::take(key), value);
                    match s.peek()? {
                        b',' => {
                            s.pos += 1;
                            let next = s.string()?;
                            heap.charge(ENTRY_BYTES + next.len())?;
                            s.expect(b':')?;
                            *key = next;
                            break;
                        }
                        b'}' => {
                            s.pos += 1;
                            let Some(Open::Object(map, _)) = stack.pop() else {
                                return Err(JsonError::Syntax(s.pos));
                            };
                            value = Value::Object(map);
                        }
                        _ => return Err(JsonError::Syntax(s.pos)),
                    }
                }
            }
        }
    }
}

/// Appends `n` as JavaScript's `String(n)` writes it.
pub fn write_number(n: &Number, out: &mut String) {
    if let Some(i) = n.as_i64() {
        if i.unsigned_abs() <= 1 << 53 {
            out.push_str(itoa_i64(i).as_str());
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

fn itoa_i64(i: i64) -> String {
    i.to_string()
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

/// Whether `value` may cross a boundary: no `-0`, no non-finite numbers (serde_json cannot
/// hold them anyway), nesting within [`MAX_DEPTH`]. Iterative.
pub fn is_lossless(value: &Value) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Number(n) => {
                if let Some(f) = n.as_f64() {
                    if !f.is_finite() || (f == 0.0 && f.is_sign_negative() && n.is_f64()) {
                        return false;
                    }
                }
            }
            Value::Array(items) => {
                if depth >= MAX_DEPTH {
                    return false;
                }
                stack.extend(items.iter().map(|i| (i, depth + 1)));
            }
            Value::Object(map) => {
                if depth >= MAX_DEPTH {
                    return false;
                }
                stack.extend(map.values().map(|i| (i, depth + 1)));
            }
            _ => {}
        }
    }
    true
}

/// Clones a value of any depth without recursion.
pub fn clone_deep(value: &Value) -> Value {
    enum Build<'a> {
        Array(std::slice::Iter<'a, Value>, Vec<Value>),
        Object(
            serde_json::map::Iter<'a>,
            Map<String, Value>,
            Option<String>,
        ),
    }
    let mut stack: Vec<Build<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        let mut done = match next.take() {
            Some(Value::Array(items)) => {
                stack.push(Build::Array(items.iter(), Vec::with_capacity(items.len())));
                None
            }
            Some(Value::Object(map)) => {
                stack.push(Build::Object(map.iter(), Map::new(), None));
                None
            }
            Some(scalar) => Some(scalar.clone()),
            None => None,
        };
        loop {
            let Some(top) = stack.last_mut() else {
                return done.unwrap_or(Value::Null);
            };
            match top {
                Build::Array(items, out) => {
                    if let Some(v) = done.take() {
                        out.push(v);
                    }
                    if let Some(item) = items.next() {
                        next = Some(item);
                        break;
                    }
                }
                Build::Object(entries, out, key) => {
                    if let (Some(v), Some(k)) = (done.take(), key.take()) {
                        out.insert(k, v);
                    }
                    if let Some((k, item)) = entries.next() {
                        *key = Some(k.clone());
                        next = Some(item);
                        break;
                    }
                }
            }
            done = match stack.pop() {
                Some(Build::Array(_, out)) => Some(Value::Array(out)),
                Some(Build::Object(_, out, _)) => Some(Value::Object(out)),
                None => None,
            };
        }
    }
}

/// Drops a value of any depth without recursion.
pub fn drop_deep(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(text: &str) -> String {
        to_string(&parse(text.as_bytes()).expect("valid"))
    }

    #[test]
    fn writes_like_json_stringify() {
        assert_eq!(
            round_trip(r#"{"a":[1,2.5,"x\"y"],"b":null}"#),
            r#"{"a":[1,2.5,"x\"y"],"b":null}"#
        );
        assert_eq!(round_trip("1e21"), "1e+21");
        assert_eq!(round_trip("123.0"), "123");
        assert_eq!(round_trip("0.000001"), "0.000001");
        assert_eq!(round_trip("1e-7"), "1e-7");
        assert_eq!(round_trip(r#""\u0001\b\f\n\r\t""#), r#""\u0001\b\f\n\r\t""#);
        assert_eq!(round_trip(r#""\u00e9\ud83d\ude00""#), "\"é😀\"");
    }

    #[test]
    fn rejects_negative_zero_and_overflow() {
        assert_eq!(parse(b"-0"), Err(JsonError::Number(0)));
        assert_eq!(parse(b"[-0.0]"), Err(JsonError::Number(1)));
        assert!(parse(b"1e400").is_err());
        assert!(parse(b"0").is_ok());
        assert!(!is_lossless(&json!([-0.0])));
        assert!(is_lossless(&json!([0.0, 1, "x"])));
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            "[",
            "[1,]",
            "{\"a\"}",
            "{\"a\":1,}",
            "tru",
            "01",
            "1.",
            "\"\\x\"",
            "[1] 2",
            "\"a\u{1}\"",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        assert_eq!(parse(br#""a\ud800b""#).unwrap(), json!("a\u{FFFD}b"));
    }

    #[test]
    fn deep_values_parse_write_and_drop_on_a_small_stack() {
        let depth = MAX_DEPTH;
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let handle = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let value = parse(text.as_bytes()).expect("deep but allowed");
                assert!(is_lossless(&value));
                let written = to_string(&value);
                drop_deep(value);
                written == text
            })
            .expect("spawn");
        assert!(handle.join().expect("no overflow"));
    }

    #[test]
    fn nesting_beyond_the_limit_is_refused() {
        let depth = MAX_DEPTH + 1;
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(parse(text.as_bytes()), Err(JsonError::TooDeep));
    }

    #[test]
    fn deep_clones_need_no_stack() {
        let mut v = json!("leaf");
        for i in 0..MAX_DEPTH {
            v = if i % 2 == 0 {
                Value::Array(vec![v, json!(1)])
            } else {
                let mut m = Map::new();
                m.insert("k".into(), v);
                m.insert("n".into(), Value::Null);
                Value::Object(m)
            };
        }
        let text = to_string(&v);
        let handle = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let c = clone_deep(&v);
                let same = to_string(&c) == text;
                drop_deep(c);
                drop_deep(v);
                same
            })
            .expect("spawn");
        assert!(handle.join().expect("no overflow"));
        assert_eq!(
            clone_deep(&json!({"a": [1, {"b": "c"}], "d": []})),
            json!({"a": [1, {"b": "c"}], "d": []})
        );
    }

    #[test]
    fn duplicate_keys_keep_the_last() {
        assert_eq!(parse(br#"{"a":1,"a":2}"#).unwrap(), json!({"a":2}));
    }

    #[test]
    fn parsing_stops_at_its_heap_limit_and_the_estimate_matches() {
        let text = br#"{"a":[1,2,{"b":"xyz"}],"c":null}"#;
        let (value, used) = parse_within(text, usize::MAX).unwrap();
        assert_eq!(used, heap_bytes(&value));
        assert!(parse_within(text, used).is_ok());
        assert_eq!(
            parse_within(text, used - 1).unwrap_err(),
            JsonError::TooLarge(used - 1)
        );
        // A text of small numbers expands many times over into values.
        let numbers = format!("[{}0]", "0,".repeat(100_000));
        let (big, used) = parse_within(numbers.as_bytes(), usize::MAX).unwrap();
        assert!(
            used > 20 * numbers.len(),
            "{used} for {} bytes",
            numbers.len()
        );
        drop_deep(big);
    }

    #[test]
    fn proto_key_is_data() {
        assert_eq!(
            round_trip(r#"{"__proto__":{"x":1}}"#),
            r#"{"__proto__":{"x":1}}"#
        );
    }
}

//! Lossless JSON: what may cross a sandbox or tool boundary, read and written without recursion.
//!
//! This is codemode's one definition of JSON. The tool pipeline, the guest bridge, the output
//! ledger and the SDK generator all read, check and write values here, so they agree on:
//!
//! - **losslessness**: numbers are finite and never `-0` ([`is_lossless`]);
//! - **depth**: nesting is bounded by [`MAX_DEPTH`], so that every host path (parse, write, byte
//!   counting, drop) stays within a small native stack;
//! - **number spelling**: as JavaScript's `String(n)` ([`write_number`]); an integer beyond
//!   2^53 is the double JavaScript would hold, as a program would see it;
//! - **equality**: scalars compare as JavaScript's `===` compares them ([`scalar_eq`]);
//! - **key order**: a map's own order (serde_json's `preserve_order`, which is the order a
//!   program's `JSON.stringify` wrote), or UTF-16 code-unit order for the canonical form
//!   ([`to_string_sorted`]).
//!
//! Values are `serde_json::Value`. Parsing and writing use explicit work stacks; output matches
//! JavaScript's `JSON.stringify` byte for byte, which the output ledger relies on.

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

/// A container being parsed. An object's entries are kept in text order and made into a map
/// when it closes, at the size it needs (a map grown entry by entry holds more than it uses).
enum Open {
    Array(Vec<Value>),
    Object(Vec<(String, Value)>, String),
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

    /// Bytes from `self.pos` (just past an opening quote) to the closing quote, escapes
    /// included: decoding never makes a string longer than its escaped text (`\n` is one byte,
    /// `\uXXXX` at most three, a surrogate pair four), so this is the capacity it needs.
    fn escaped_len(&self) -> usize {
        let mut i = self.pos;
        while let Some(&b) = self.bytes.get(i) {
            match b {
                b'"' => break,
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        i.min(self.bytes.len()) - self.pos
    }

    /// Reads a string token into a buffer allocated once, at its escaped length, and charged to
    /// `heap` before it is allocated.
    fn string(&mut self, heap: &mut Heap) -> Result<String, JsonError> {
        self.expect(b'"')?;
        let capacity = self.escaped_len();
        heap.charge(block(capacity))?;
        let mut out = String::with_capacity(capacity);
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

/// Host memory a value holds, as [`parse_within`] counts it: the heap blocks of every array's
/// buffer (its capacity, not its length), every string's and key's buffer, and every object's
/// entries and hash index (as if built at its length, which is how the parser builds them).
/// Exact for a value the parser built from a text without duplicate keys; the `Value` at the
/// root lives wherever its owner keeps it and is not counted.
pub fn heap_bytes(value: &Value) -> usize {
    let mut total = 0usize;
    walk(value, |node, _| {
        let bytes = match node {
            Value::String(s) => block(s.capacity()),
            Value::Array(items) => array_bytes::<Value>(items.capacity()),
            Value::Object(map) => map.keys().fold(map_bytes(map.len()), |sum, key| {
                sum.saturating_add(block(key.capacity()))
            }),
            _ => 0,
        };
        total = total.saturating_add(bytes);
        true
    });
    total
}

/// Bytes the allocator takes for a block of `size` bytes: the size plus a 16-byte header,
/// rounded up to 16, at least 32, and whole pages once blocks are large enough to be mapped on
/// their own. This is an upper bound for glibc's malloc (8-byte header, 32-byte minimum, blocks
/// of 128 KiB and more mapped page by page), the allocator the host uses. An empty buffer
/// allocates nothing.
fn block(size: usize) -> usize {
    const PAGE: usize = 4096;
    const MAPPED: usize = 128 * 1024;
    match size {
        0 => 0,
        s if s >= MAPPED => s.saturating_add(16).div_ceil(PAGE).saturating_mul(PAGE),
        s => s.saturating_add(16).div_ceil(16).saturating_mul(16).max(32),
    }
}

/// The block of a buffer of `capacity` elements of `T`.
fn array_bytes<T>(capacity: usize) -> usize {
    block(capacity.saturating_mul(std::mem::size_of::<T>()))
}

/// What `Map::with_capacity(n)` allocates (serde_json's `preserve_order` map, an `IndexMap`):
/// a buffer of `n` entries (the key's hash, the key and the value) and a hashbrown index of
/// `usize` slots with one control byte each plus a 16-byte group. hashbrown sizes the index in
/// power-of-two buckets: 4, 8 or 16 below 15 entries, else the next power of two above 8/7 of
/// them. `tests/json_memory.rs` checks this against the allocator.
fn map_bytes(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    const ENTRY: usize =
        std::mem::size_of::<usize>() + std::mem::size_of::<String>() + std::mem::size_of::<Value>();
    let buckets = match n {
        0..4 => 4,
        4..8 => 8,
        8..15 => 16,
        _ => (n.saturating_mul(8) / 7).next_power_of_two(),
    };
    let slot = std::mem::size_of::<usize>() + 1;
    block(n.saturating_mul(ENTRY))
        .saturating_add(block(buckets.saturating_mul(slot).saturating_add(16)))
}

/// [`parse`], refusing with [`JsonError::TooLarge`] before the host memory it holds (counted as
/// [`heap_bytes`] does, buffers being grown included) would exceed `max_heap` bytes: every
/// buffer is charged before it is allocated, so a hostile text never gets built past the limit.
/// Returns the value and what it holds, which is at most `max_heap`.
pub fn parse_within(bytes: &[u8], max_heap: usize) -> Result<(Value, usize), JsonError> {
    let mut stack: Vec<Open> = Vec::new();
    let mut heap = Heap {
        used: 0,
        max: max_heap,
    };
    let parsed = parse_into(bytes, &mut stack, &mut heap);
    // A failed parse leaves partial containers behind; free them without recursion.
    for open in stack.drain(..) {
        match open {
            Open::Array(items) => drop_deep(Value::Array(items)),
            Open::Object(entries, _) => entries.into_iter().for_each(|(_, v)| drop_deep(v)),
        }
    }
    // The work stack (counted while it grew) is freed on return; the value holds the rest.
    heap.release(array_bytes::<Open>(stack.capacity()));
    parsed.map(|value| (value, heap.used))
}

/// What a parse holds so far.
struct Heap {
    used: usize,
    max: usize,
}

impl Heap {
    /// Counts `bytes` about to be allocated, or refuses when they would pass the limit.
    fn charge(&mut self, bytes: usize) -> Result<(), JsonError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.max {
            Err(JsonError::TooLarge(self.max))
        } else {
            Ok(())
        }
    }

    /// Uncounts `bytes` just freed.
    fn release(&mut self, bytes: usize) {
        self.used = self.used.saturating_sub(bytes);
    }
}

/// Makes room for one more element. Growth is done here rather than left to `Vec::push` so that
/// what is counted is what is allocated: the doubled buffer is charged before it exists, and
/// the old one (which a moving reallocation holds until the copy is done) only after.
fn room_for_one<T>(items: &mut Vec<T>, heap: &mut Heap) -> Result<(), JsonError> {
    if items.len() < items.capacity() {
        return Ok(());
    }
    let old = items.capacity();
    let new = old.saturating_mul(2).max(4);
    heap.charge(array_bytes::<T>(new))?;
    items.reserve_exact(new - items.len());
    heap.release(array_bytes::<T>(old));
    Ok(())
}

fn parse_into(bytes: &[u8], stack: &mut Vec<Open>, heap: &mut Heap) -> Result<Value, JsonError> {
    let mut s = Scanner { bytes, pos: 0 };
    loop {
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
                    let key = s.string(heap)?;
                    s.expect(b':')?;
                    room_for_one(stack, heap)?;
                    stack.push(Open::Object(Vec::new(), key));
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
                    room_for_one(stack, heap)?;
                    stack.push(Open::Array(Vec::new()));
                    continue;
                }
            }
            b'"' => Value::String(s.string(heap)?),
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
                    if let Err(error) = room_for_one(items, heap) {
                        drop_deep(value);
                        return Err(error);
                    }
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
                Open::Object(entries, key) => {
                    if let Err(error) = room_for_one(entries, heap) {
                        drop_deep(value);
                        return Err(error);
                    }
                    entries.push((std::mem::take(key), value));
                    match s.peek()? {
                        b',' => {
                            s.pos += 1;
                            *key = s.string(heap)?;
                            s.expect(b':')?;
                            break;
                        }
                        b'}' => {
                            s.pos += 1;
                            // The map is built at its final size once its entries are known:
                            // charged before it exists, while the entries are still held.
                            let built = map_bytes(entries.len());
                            heap.charge(built)?;
                            let Some(Open::Object(entries, _)) = stack.pop() else {
                                return Err(JsonError::Syntax(s.pos));
                            };
                            let spent = array_bytes::<(String, Value)>(entries.capacity());
                            let mut map = Map::with_capacity(entries.len());
                            for (key, item) in entries {
                                // Duplicate keys: the last one wins, as in JSON.parse.
                                if let Some(replaced) = map.insert(key, item) {
                                    drop_deep(replaced);
                                }
                            }
                            heap.release(spent);
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

/// Whether `value` may cross a boundary: no `-0`, no non-finite numbers (serde_json cannot
/// hold them anyway), nesting within [`MAX_DEPTH`]. Iterative.
pub fn is_lossless(value: &Value) -> bool {
    walk(value, |node, depth| match node {
        Value::Number(n) => is_lossless_number(n),
        Value::Array(_) | Value::Object(_) => depth < MAX_DEPTH,
        _ => true,
    })
}

/// Visits every node of `value` (and, for an object, every value, not its keys) depth first
/// with its depth (0 at the root), stopping as soon as `visit` returns false; returns whether
/// it never did. No recursion, and the work stack holds one iterator per open container, so it
/// is as deep as the value rather than as wide (a stack of pending elements would hold a
/// pointer to every element of a wide array).
pub fn walk<'a>(value: &'a Value, mut visit: impl FnMut(&'a Value, usize) -> bool) -> bool {
    enum Children<'a> {
        Array(std::slice::Iter<'a, Value>),
        Object(serde_json::map::Values<'a>),
    }
    let mut stack: Vec<Children<'a>> = Vec::new();
    let mut next = Some(value);
    while let Some(node) = next.take() {
        if !visit(node, stack.len()) {
            return false;
        }
        match node {
            Value::Array(items) if !items.is_empty() => stack.push(Children::Array(items.iter())),
            Value::Object(map) if !map.is_empty() => stack.push(Children::Object(map.values())),
            _ => {}
        }
        while let Some(top) = stack.last_mut() {
            let child = match top {
                Children::Array(items) => items.next(),
                Children::Object(values) => values.next(),
            };
            if child.is_some() {
                next = child;
                break;
            }
            stack.pop();
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

/// Drops a value of any depth without recursion, and without a second copy of its elements:
/// containers are emptied one element at a time, and only a container nested inside another
/// goes on a stack (so the stack is as deep as the value, and a value with no nested
/// containers needs none).
pub fn drop_deep(value: Value) {
    enum Emptying {
        Array(std::vec::IntoIter<Value>),
        Object(serde_json::map::IntoIter),
    }
    let mut current = match value {
        Value::Array(items) => Emptying::Array(items.into_iter()),
        Value::Object(map) => Emptying::Object(map.into_iter()),
        _ => return,
    };
    let mut stack: Vec<Emptying> = Vec::new();
    loop {
        let child = match &mut current {
            Emptying::Array(items) => items.next(),
            Emptying::Object(entries) => entries.next().map(|(_, v)| v),
        };
        match child {
            Some(Value::Array(items)) if !items.is_empty() => {
                stack.push(std::mem::replace(
                    &mut current,
                    Emptying::Array(items.into_iter()),
                ));
            }
            Some(Value::Object(map)) if !map.is_empty() => {
                stack.push(std::mem::replace(
                    &mut current,
                    Emptying::Object(map.into_iter()),
                ));
            }
            // A scalar or an empty container is dropped here.
            Some(_) => {}
            None => match stack.pop() {
                Some(parent) => current = parent,
                None => return,
            },
        }
    }
}

/// Whether a number is lossless: finite (always true of a `serde_json` number) and not `-0`.
pub fn is_lossless_number(number: &Number) -> bool {
    number
        .as_f64()
        .is_none_or(|f| f.is_finite() && !(f == 0.0 && f.is_sign_negative() && number.is_f64()))
}

/// Scalar equality as JavaScript's `===` sees JSON scalars: numbers compare as the doubles a
/// program holds (so two integers beyond 2^53 that round to one double are equal), everything
/// else structurally.
pub fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
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
    fn parsing_stops_at_its_heap_limit_and_the_count_matches() {
        let text = br#"{"a":[1,2,{"b":"xyz"}],"c":null}"#;
        let (value, used) = parse_within(text, usize::MAX).unwrap();
        assert_eq!(used, heap_bytes(&value));
        assert_eq!(
            parse_within(text, used - 1).unwrap_err(),
            JsonError::TooLarge(used - 1)
        );
        // Buffers on their way out (an object's entries while its map is built, the work
        // stack) count until they are freed: the limit applies to that peak.
        let peak = (used..used * 4)
            .find(|&max| parse_within(text, max).is_ok())
            .unwrap();
        assert!(peak > used);
        assert_eq!(parse_within(text, peak).unwrap().1, used);
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
    fn strings_are_allocated_once_at_their_escaped_length() {
        let (value, used) = parse_within(br#"["a\nb", "\u00e9"]"#, usize::MAX).unwrap();
        assert_eq!(value, json!(["a\nb", "é"]));
        let Value::Array(items) = &value else {
            unreachable!("an array was parsed")
        };
        assert_eq!(items[0].as_str().map(str::len), Some(3));
        assert_eq!(used, heap_bytes(&value));
    }

    #[test]
    fn proto_key_is_data() {
        assert_eq!(
            round_trip(r#"{"__proto__":{"x":1}}"#),
            r#"{"__proto__":{"x":1}}"#
        );
    }

    #[test]
    fn integers_beyond_two_to_the_53_are_the_doubles_a_program_holds() {
        // 2^53 + 1 is not a double: JavaScript holds 2^53, and writes it so.
        let above = json!(9_007_199_254_740_993_u64);
        assert_eq!(to_string(&above), "9007199254740992");
        assert_eq!(to_string_sorted(&above), "9007199254740992");
        assert_eq!(
            to_string(&json!(9_007_199_254_740_992_u64)),
            "9007199254740992"
        );
        assert_eq!(
            to_string(&json!(-9_007_199_254_740_993_i64)),
            "-9007199254740992"
        );
        assert_eq!(to_string(&json!(u64::MAX)), "18446744073709552000");
        // `===` on the doubles: both integers are 2^53 to a program.
        assert!(scalar_eq(&above, &json!(9_007_199_254_740_992_u64)));
        assert!(scalar_eq(&json!(1), &json!(1.0)));
        assert!(!scalar_eq(&json!(1), &json!("1")));
        assert!(is_lossless(&above));
    }

    #[test]
    fn the_depth_limit_holds_for_every_check_and_parse() {
        let nest = |levels: usize| {
            let mut v = json!(1);
            for _ in 0..levels {
                v = Value::Array(vec![v]);
            }
            v
        };
        let at_limit = nest(MAX_DEPTH);
        let beyond = nest(MAX_DEPTH + 1);
        assert!(is_lossless(&at_limit));
        assert!(!is_lossless(&beyond));
        let text = to_string(&at_limit);
        assert_eq!(parse(text.as_bytes()).map(drop_deep), Ok(()));
        assert_eq!(
            parse(to_string(&beyond).as_bytes()).map(drop_deep),
            Err(JsonError::TooDeep)
        );
        assert_eq!(to_string_sorted(&at_limit), text);
        drop_deep(at_limit);
        drop_deep(beyond);
    }

    #[test]
    fn negative_zero_is_the_only_lossy_number() {
        assert!(is_lossless(&json!({"a": [0.0, 1, -1.5, "x", null]})));
        assert!(!is_lossless(&json!({"a": [{"b": -0.0}]})));
        assert!(!is_lossless_number(
            &Number::from_f64(-0.0).unwrap_or_else(|| 0.into())
        ));
    }

    #[test]
    fn sorted_output_orders_keys_by_utf16_at_every_depth() {
        let v = json!({"b": {"d": 1, "c": 2}, "a": [{"z": 0, "y": 1}]});
        assert_eq!(
            to_string_sorted(&v),
            r#"{"a":[{"y":1,"z":0}],"b":{"c":2,"d":1}}"#
        );
        // U+FF61 sorts after U+1F600 by code point, before it by UTF-16 code unit.
        let v = json!({"\u{ff61}": 1, "\u{1f600}": 2});
        assert_eq!(to_string_sorted(&v), "{\"\u{1f600}\":2,\"\u{ff61}\":1}");
    }
}

//! Text to values: one pass over the bytes with an explicit stack, counting the host memory
//! the values will take.

use serde_json::{Map, Number, Value};

use crate::value::{drop_deep, walk};
use crate::{JsonError, MAX_DEPTH};

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

//! Builds JavaScript values from the host's JSON text without recursion.
//!
//! Replies can be thousands of levels deep; Boa's `JSON.parse` walks them on the native stack,
//! so the guest parses them itself with an explicit work stack. The host only ever sends
//! well-formed JSON; anything else is reported as `None`.

use boa_engine::object::builtins::JsArray;
use boa_engine::{Context, JsObject, JsString, JsValue};

enum Open {
    Array(Vec<JsValue>),
    Object(JsObject, Option<JsString>),
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

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes.get(self.pos).copied()
    }

    fn eat(&mut self, literal: &[u8]) -> Option<()> {
        if self.bytes.get(self.pos..self.pos + literal.len())? == literal {
            self.pos += literal.len();
            Some(())
        } else {
            None
        }
    }

    fn number(&mut self) -> Option<f64> {
        let start = self.pos;
        while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
        std::str::from_utf8(&self.bytes[start..self.pos])
            .ok()?
            .parse()
            .ok()
    }

    fn hex4(&mut self) -> Option<u16> {
        let digits = std::str::from_utf8(self.bytes.get(self.pos..self.pos + 4)?).ok()?;
        self.pos += 4;
        u16::from_str_radix(digits, 16).ok()
    }

    fn string(&mut self) -> Option<JsString> {
        self.eat(b"\"")?;
        let mut units: Vec<u16> = Vec::new();
        loop {
            let start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' {
                    break;
                }
                self.pos += 1;
            }
            let run = std::str::from_utf8(&self.bytes[start..self.pos]).ok()?;
            units.extend(run.encode_utf16());
            match self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(JsString::from(units.as_slice()));
                }
                _ => {
                    self.pos += 1;
                    let escaped = *self.bytes.get(self.pos)?;
                    self.pos += 1;
                    let unit = match escaped {
                        b'"' => b'"' as u16,
                        b'\\' => b'\\' as u16,
                        b'/' => b'/' as u16,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n' as u16,
                        b'r' => b'\r' as u16,
                        b't' => b'\t' as u16,
                        b'u' => self.hex4()?,
                        _ => return None,
                    };
                    units.push(unit);
                }
            }
        }
    }
}

/// Parses `bytes` into a fresh JavaScript value (plain objects and arrays).
pub fn parse(bytes: &[u8], context: &mut Context) -> Option<JsValue> {
    let mut s = Scanner { bytes, pos: 0 };
    let mut stack: Vec<Open> = Vec::new();
    loop {
        // Parse one value, or open a container.
        let mut value = match s.peek()? {
            b'{' => {
                s.pos += 1;
                let object = JsObject::with_object_proto(context.intrinsics());
                if s.peek()? == b'}' {
                    s.pos += 1;
                    object.into()
                } else {
                    let key = s.string()?;
                    s.peek()?;
                    s.eat(b":")?;
                    stack.push(Open::Object(object, Some(key)));
                    continue;
                }
            }
            b'[' => {
                s.pos += 1;
                if s.peek()? == b']' {
                    s.pos += 1;
                    JsArray::new(context).ok()?.into()
                } else {
                    stack.push(Open::Array(Vec::new()));
                    continue;
                }
            }
            b'"' => s.string()?.into(),
            b't' => s.eat(b"true").map(|()| JsValue::from(true))?,
            b'f' => s.eat(b"false").map(|()| JsValue::from(false))?,
            b'n' => s.eat(b"null").map(|()| JsValue::null())?,
            _ => JsValue::from(s.number()?),
        };
        // Attach the value to its parent, closing every container that ends here.
        loop {
            match stack.last_mut() {
                None => {
                    return if s.peek().is_none() {
                        Some(value)
                    } else {
                        None
                    };
                }
                Some(Open::Array(items)) => {
                    items.push(value);
                    match s.peek()? {
                        b',' => {
                            s.pos += 1;
                            break;
                        }
                        b']' => {
                            s.pos += 1;
                            let Some(Open::Array(items)) = stack.pop() else {
                                return None;
                            };
                            value = JsArray::from_iter(items, context).into();
                        }
                        _ => return None,
                    }
                }
                Some(Open::Object(object, key)) => {
                    let key = key.take()?;
                    object
                        .create_data_property_or_throw(key, value, context)
                        .ok()?;
                    match s.peek()? {
                        b',' => {
                            s.pos += 1;
                            s.peek()?;
                            let next = s.string()?;
                            s.peek()?;
                            s.eat(b":")?;
                            if let Some(Open::Object(_, slot)) = stack.last_mut() {
                                *slot = Some(next);
                            }
                            break;
                        }
                        b'}' => {
                            s.pos += 1;
                            let Some(Open::Object(object, _)) = stack.pop() else {
                                return None;
                            };
                            value = object.into();
                        }
                        _ => return None,
                    }
                }
            }
        }
    }
}

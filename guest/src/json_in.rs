//! Builds JavaScript values from JSON text without recursion: the host's replies, and the
//! realm's `JSON.parse`.
//!
//! The parser is strict (RFC 8259, as `JSON.parse` accepts it) and reads the text in the
//! encoding it comes in (UTF-8 replies, Latin-1 or UTF-16 strings); strings are built as UTF-16
//! code units, so a string keeps exactly the units its escapes name, lone surrogates included.
//! Containers are kept on an explicit work stack: replies can be thousands of levels deep.
//!
//! Boa implements `JSON.parse` by running its whole JavaScript parser over the text, at about a
//! microsecond per byte in wasm; JSON is most of what tool programs parse. `install_json_parse`
//! puts this parser in front of it. It returns the same values (plain objects built with
//! `CreateDataProperty`, arrays, correctly rounded numbers), and hands the call to the original
//! whenever it would not: a reviver, or text that is not JSON (so the `SyntaxError` is Boa's).

use boa_engine::object::builtins::JsArray;
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyDescriptor;
use boa_engine::string::JsStrVariant;
use boa_engine::{js_string, Context, JsObject, JsResult, JsString, JsValue, NativeFunction};

enum Open {
    Array(Vec<JsValue>),
    Object(JsObject, Option<JsString>),
}

/// JSON text in one of the encodings it arrives in, read without converting it first. JSON's
/// structure is ASCII, so every encoding answers `at` with the unit's value for ASCII; only
/// the contents of strings need decoding.
#[derive(Clone, Copy)]
enum Text<'a> {
    /// A host reply. A run between structural characters never splits a UTF-8 sequence,
    /// whose bytes are all 0x80 or above.
    Utf8(&'a [u8]),
    Latin1(&'a [u8]),
    Utf16(&'a [u16]),
}

impl Text<'_> {
    fn at(self, pos: usize) -> Option<u16> {
        match self {
            Text::Utf8(bytes) | Text::Latin1(bytes) => bytes.get(pos).map(|&b| u16::from(b)),
            Text::Utf16(units) => units.get(pos).copied(),
        }
    }

    /// Appends the string contents `start..end` as UTF-16 code units.
    fn extend(self, start: usize, end: usize, out: &mut Vec<u16>) -> Option<()> {
        match self {
            Text::Utf8(bytes) => {
                out.extend(std::str::from_utf8(&bytes[start..end]).ok()?.encode_utf16())
            }
            Text::Latin1(bytes) => out.extend(bytes[start..end].iter().map(|&b| u16::from(b))),
            Text::Utf16(units) => out.extend_from_slice(&units[start..end]),
        }
        Some(())
    }
}

struct Scanner<'a> {
    text: Text<'a>,
    pos: usize,
}

fn is_digit(unit: u16) -> bool {
    (u16::from(b'0')..=u16::from(b'9')).contains(&unit)
}

impl Scanner<'_> {
    fn at(&self, pos: usize) -> Option<u16> {
        self.text.at(pos)
    }

    fn skip_ws(&mut self) {
        while let Some(0x20 | 0x09 | 0x0a | 0x0d) = self.at(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u16> {
        self.skip_ws();
        self.at(self.pos)
    }

    fn eat(&mut self, literal: &[u8]) -> Option<()> {
        let matches = literal
            .iter()
            .enumerate()
            .all(|(i, &b)| self.at(self.pos + i) == Some(u16::from(b)));
        if matches {
            self.pos += literal.len();
            Some(())
        } else {
            None
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.at(self.pos).is_some_and(is_digit) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, correctly rounded.
    fn number(&mut self) -> Option<f64> {
        let start = self.pos;
        if self.at(self.pos) == Some(u16::from(b'-')) {
            self.pos += 1;
        }
        match self.at(self.pos)? {
            0x30 => self.pos += 1,
            u if is_digit(u) => {
                self.digits();
            }
            _ => return None,
        }
        if self.at(self.pos) == Some(u16::from(b'.')) {
            self.pos += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if let Some(0x65 | 0x45) = self.at(self.pos) {
            self.pos += 1;
            if let Some(0x2b | 0x2d) = self.at(self.pos) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        // Every unit consumed is ASCII, so this is the number's text.
        let text: String = (start..self.pos)
            .filter_map(|i| self.at(i))
            .map(|u| char::from(u as u8))
            .collect();
        text.parse().ok()
    }

    fn hex4(&mut self) -> Option<u16> {
        let mut value = 0u16;
        for i in self.pos..self.pos + 4 {
            let nibble = char::from_u32(u32::from(self.at(i)?))?.to_digit(16)?;
            value = value << 4 | nibble as u16;
        }
        self.pos += 4;
        Some(value)
    }

    fn string(&mut self) -> Option<JsString> {
        if self.at(self.pos)? != u16::from(b'"') {
            return None;
        }
        self.pos += 1;
        let mut units: Vec<u16> = Vec::new();
        loop {
            let start = self.pos;
            while let Some(u) = self.at(self.pos) {
                if u == u16::from(b'"') || u == u16::from(b'\\') || u < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            self.text.extend(start, self.pos, &mut units)?;
            let stop = self.at(self.pos)?;
            self.pos += 1;
            if stop == u16::from(b'"') {
                return Some(JsString::from(units.as_slice()));
            }
            if stop != u16::from(b'\\') {
                // A raw control character.
                return None;
            }
            let escaped = self.at(self.pos)?;
            self.pos += 1;
            let unit = match u8::try_from(escaped).ok()? {
                b'"' => u16::from(b'"'),
                b'\\' => u16::from(b'\\'),
                b'/' => u16::from(b'/'),
                b'b' => 0x08,
                b'f' => 0x0c,
                b'n' => 0x0a,
                b'r' => 0x0d,
                b't' => 0x09,
                b'u' => self.hex4()?,
                _ => return None,
            };
            units.push(unit);
        }
    }
}

/// Parses JSON text; `None` when it is not JSON.
fn parse_text(text: Text<'_>, context: &mut Context) -> Option<JsValue> {
    let mut s = Scanner { text, pos: 0 };
    let mut stack: Vec<Open> = Vec::new();
    loop {
        // Parse one value, or open a container.
        let mut value = match u8::try_from(s.peek()?).ok()? {
            b'{' => {
                s.pos += 1;
                let object = JsObject::with_object_proto(context.intrinsics());
                if s.peek()? == u16::from(b'}') {
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
                if s.peek()? == u16::from(b']') {
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
            let Some(open) = stack.last_mut() else {
                return s.peek().is_none().then_some(value);
            };
            match open {
                Open::Array(items) => {
                    items.push(value);
                    match u8::try_from(s.peek()?).ok()? {
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
                Open::Object(object, key) => {
                    let key = key.take()?;
                    object
                        .create_data_property_or_throw(key, value, context)
                        .ok()?;
                    match u8::try_from(s.peek()?).ok()? {
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

/// Parses a reply's UTF-8 JSON text; `None` when it is not JSON.
pub fn parse(bytes: &[u8], context: &mut Context) -> Option<JsValue> {
    parse_text(Text::Utf8(bytes), context)
}

/// Puts the native parser in front of the realm's `JSON.parse` (see the module comment).
/// Called while the context is built, before any script runs.
pub fn install_json_parse(context: &mut Context) -> JsResult<()> {
    let json = context.intrinsics().objects().json();
    let original = json.get(js_string!("parse"), context)?;
    let parse = FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_copy_closure_with_captures(json_parse, original),
    )
    .name(js_string!("parse"))
    .length(2)
    .constructor(false)
    .build();
    json.define_property_or_throw(
        js_string!("parse"),
        PropertyDescriptor::builder()
            .value(parse)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    Ok(())
}

fn json_parse(
    this: &JsValue,
    args: &[JsValue],
    original: &JsValue,
    context: &mut Context,
) -> JsResult<JsValue> {
    let Some(original) = original.as_callable() else {
        return Ok(JsValue::undefined());
    };
    let reviver = args.get(1).is_some_and(JsValue::is_callable);
    if reviver {
        return original.call(this, args, context);
    }
    // ToString runs once, here; the original, if needed, gets the resulting string.
    let text = args
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string(context)?;
    let parsed = match text.as_str().variant() {
        JsStrVariant::Latin1(bytes) => parse_text(Text::Latin1(bytes), context),
        JsStrVariant::Utf16(units) => parse_text(Text::Utf16(units), context),
    };
    match parsed {
        Some(value) => Ok(value),
        None => original.call(this, &[text.into()], context),
    }
}

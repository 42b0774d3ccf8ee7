//! Builds JavaScript values from JSON text without recursion: the host's replies, and the
//! realm's `JSON.parse`.
//!
//! The parser is strict (RFC 8259, as `JSON.parse` accepts it) and reads the text in the
//! encoding it comes in (UTF-8 replies, Latin-1 or UTF-16 strings); a string keeps exactly the
//! code units its escapes name, lone surrogates included, and is stored as Latin-1 whenever its
//! units allow, as Boa's own strings are. Containers are kept on an explicit work stack:
//! replies can be thousands of levels deep.
//!
//! Boa implements `JSON.parse` by running its whole JavaScript parser over the text, at about a
//! microsecond per byte in wasm; JSON is most of what tool programs parse. `install_json_parse`
//! puts this parser in front of it. It returns the same values (plain objects with the
//! properties `CreateDataProperty` would make, arrays, correctly rounded numbers), and hands the
//! call to the original whenever it would not: a reviver, or text that is not JSON (so the
//! `SyntaxError` is Boa's).
//!
//! Large documents are mostly many objects with the same keys, so the parser builds objects
//! from shared shapes (`DataObjectTemplate`): a key order is walked through Boa's shape
//! transitions once, remembered in a small cache, and every further object with those keys is
//! made directly from its values. Short strings (keys, and values such as names, tags and dates)
//! are shared through a second small cache instead of being allocated again. Both caches are
//! direct-mapped and bounded: hostile text can only make them miss.

use boa_engine::object::builtins::JsArray;
use boa_engine::object::shape::DataObjectTemplate;
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyDescriptor;
use boa_engine::string::{JsStr, JsStrVariant};
use boa_engine::{js_string, Context, JsObject, JsResult, JsString, JsValue, NativeFunction};

/// One code unit of JSON text: a byte (UTF-8 or Latin-1) or a UTF-16 unit. JSON's structure is
/// ASCII, so every encoding gives the unit's value for ASCII; only string contents need
/// decoding.
trait Unit: Copy {
    fn value(self) -> u16;
}

impl Unit for u8 {
    #[inline(always)]
    fn value(self) -> u16 {
        u16::from(self)
    }
}

impl Unit for u16 {
    #[inline(always)]
    fn value(self) -> u16 {
        self
    }
}

/// How the contents of a string without escapes become a `JsString`, per encoding.
trait Decode: Unit {
    /// The string made of `units` (a run between quotes with no escape in it); `None` when they
    /// are not valid text in this encoding.
    fn run(units: &[Self], utf8: bool, strings: &mut StringCache) -> Option<JsString>;
    /// Appends `units` as UTF-16 code units.
    fn extend(units: &[Self], utf8: bool, out: &mut Vec<u16>) -> Option<()>;
}

impl Decode for u8 {
    fn run(units: &[u8], utf8: bool, strings: &mut StringCache) -> Option<JsString> {
        // A UTF-8 run that is all ASCII is also its Latin-1 text.
        if !utf8 || units.is_ascii() {
            return Some(strings.latin1(units));
        }
        let mut out = Vec::with_capacity(units.len());
        Self::extend(units, utf8, &mut out)?;
        Some(string_from_units(&out))
    }

    fn extend(units: &[u8], utf8: bool, out: &mut Vec<u16>) -> Option<()> {
        if utf8 {
            // A run between structural characters never splits a UTF-8 sequence, whose
            // bytes are all 0x80 or above.
            out.extend(std::str::from_utf8(units).ok()?.encode_utf16());
        } else {
            out.extend(units.iter().map(|&b| u16::from(b)));
        }
        Some(())
    }
}

impl Decode for u16 {
    fn run(units: &[u16], _: bool, _: &mut StringCache) -> Option<JsString> {
        Some(string_from_units(units))
    }

    fn extend(units: &[u16], _: bool, out: &mut Vec<u16>) -> Option<()> {
        out.extend_from_slice(units);
        Some(())
    }
}

/// A string of UTF-16 code units, stored as Latin-1 when every unit fits.
fn string_from_units(units: &[u16]) -> JsString {
    if units.iter().all(|&u| u <= 0xff) {
        let bytes: Vec<u8> = units.iter().map(|&u| u as u8).collect();
        JsString::from(JsStr::latin1(&bytes))
    } else {
        JsString::from(units)
    }
}

/// FNV-1a over `units` from `seed`: cheap, and good enough to spread short keys over a small
/// table.
fn fnv1a(seed: u64, units: impl Iterator<Item = u64>) -> u64 {
    units.fold(seed, |h, unit| (h ^ unit).wrapping_mul(0x0100_0000_01b3))
}

/// A direct-mapped table of what this parse already made, sized to the text: one slot per 16
/// units, from 16 up to `most`, and allocated at the first lookup. Tool replies and
/// `JSON.parse` calls are mostly small; a table sized for 7 MB would cost them more to fill
/// and drop than the parse itself.
struct Table<T> {
    size: usize,
    slots: Vec<Option<T>>,
}

impl<T: Clone> Table<T> {
    fn new(text_len: usize, most: usize) -> Self {
        Self {
            size: (text_len / 16).clamp(16, most),
            slots: Vec::new(),
        }
    }

    /// The slot `hash` falls in.
    fn slot(&mut self, hash: u64) -> &mut Option<T> {
        if self.slots.is_empty() {
            self.slots = vec![None; self.size];
        }
        &mut self.slots[hash as usize % self.size]
    }
}

/// Short Latin-1 strings already made during this parse, by content.
struct StringCache(Table<JsString>);

impl StringCache {
    /// Strings longer than this are made afresh: they rarely repeat, and comparing costs.
    const MAX_LEN: usize = 32;

    fn new(text_len: usize) -> Self {
        Self(Table::new(text_len, 1024))
    }

    fn latin1(&mut self, bytes: &[u8]) -> JsString {
        if bytes.len() > Self::MAX_LEN {
            return JsString::from(JsStr::latin1(bytes));
        }
        let slot = self.0.slot(fnv1a(
            0xcbf2_9ce4_8422_2325,
            bytes.iter().map(|&b| u64::from(b)),
        ));
        if let Some(cached) = slot {
            if matches!(cached.as_str().variant(), JsStrVariant::Latin1(c) if c == bytes) {
                return cached.clone();
            }
        }
        let string = JsString::from(JsStr::latin1(bytes));
        *slot = Some(string.clone());
        string
    }
}

/// Shape transitions already taken during this parse: (shape, key) to the shape with that key
/// added. Each entry holds both shapes and the key, so an address in it cannot be reused by
/// another shape while the entry exists.
struct ShapeCache {
    empty: DataObjectTemplate,
    transitions: Table<(DataObjectTemplate, JsString, DataObjectTemplate)>,
}

impl ShapeCache {
    fn new(context: &Context, text_len: usize) -> Self {
        Self {
            empty: DataObjectTemplate::ordinary(context),
            transitions: Table::new(text_len, 512),
        }
    }

    /// `from` with `key` added, or `None` when the key must be defined the ordinary way.
    fn next(&mut self, from: &DataObjectTemplate, key: &JsString) -> Option<DataObjectTemplate> {
        let h = fnv1a(from.addr() as u64, key.iter().map(u64::from));
        let slot = self.transitions.slot(h);
        if let Some((cached_from, cached_key, to)) = slot {
            if cached_from.same_as(from) && *cached_key == *key {
                return Some(to.clone());
            }
        }
        let to = from.with_property(key)?;
        *slot = Some((from.clone(), key.clone(), to.clone()));
        Some(to)
    }
}

/// An object being parsed: from its template while its keys allow, as an ordinary object after.
enum Members {
    Template(DataObjectTemplate, Vec<JsValue>),
    Object(JsObject),
}

enum Open {
    Array(Vec<JsValue>),
    Object(Members, Option<JsString>),
}

struct Scanner<'a, U> {
    units: &'a [U],
    /// Whether byte text is UTF-8 (a reply) rather than Latin-1 (a string's own storage).
    utf8: bool,
    pos: usize,
    strings: StringCache,
}

fn is_digit(unit: u16) -> bool {
    (u16::from(b'0')..=u16::from(b'9')).contains(&unit)
}

impl<U: Decode> Scanner<'_, U> {
    #[inline(always)]
    fn at(&self, pos: usize) -> Option<u16> {
        self.units.get(pos).map(|u| u.value())
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

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, correctly rounded. Integers of
    /// up to nine digits (all of which fit 32 bits) become integer values, as the same literal
    /// in a program would; longer ones are floats, with the same value.
    fn number(&mut self) -> Option<JsValue> {
        let start = self.pos;
        let negative = self.at(self.pos) == Some(u16::from(b'-'));
        if negative {
            self.pos += 1;
        }
        let int_start = self.pos;
        match self.at(self.pos)? {
            0x30 => self.pos += 1,
            u if is_digit(u) => {
                self.digits();
            }
            _ => return None,
        }
        let int_end = self.pos;
        let mut integral = true;
        if self.at(self.pos) == Some(u16::from(b'.')) {
            integral = false;
            self.pos += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if let Some(0x65 | 0x45) = self.at(self.pos) {
            integral = false;
            self.pos += 1;
            if let Some(0x2b | 0x2d) = self.at(self.pos) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        // Up to nine digits always fit an i32; `-0` stays a float.
        if integral && int_end - int_start <= 9 {
            let magnitude = self.units[int_start..int_end]
                .iter()
                .fold(0i32, |n, u| n * 10 + i32::from(u.value() - u16::from(b'0')));
            return Some(match (negative, magnitude) {
                (true, 0) => JsValue::from(-0.0),
                (true, n) => JsValue::from(-n),
                (false, n) => JsValue::from(n),
            });
        }
        // Every unit consumed is ASCII, so this is the number's text.
        let text: String = self.units[start..self.pos]
            .iter()
            .map(|u| char::from(u.value() as u8))
            .collect();
        let value: f64 = text.parse().ok()?;
        Some(JsValue::from(value))
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
        let start = self.pos;
        self.skip_plain();
        if self.at(self.pos)? == u16::from(b'"') {
            // No escapes: the common case, made without copying through a buffer.
            let end = self.pos;
            self.pos += 1;
            return U::run(&self.units[start..end], self.utf8, &mut self.strings);
        }
        let mut units: Vec<u16> = Vec::new();
        U::extend(&self.units[start..self.pos], self.utf8, &mut units)?;
        loop {
            let stop = self.at(self.pos)?;
            self.pos += 1;
            if stop == u16::from(b'"') {
                return Some(string_from_units(&units));
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
            let run = self.pos;
            self.skip_plain();
            U::extend(&self.units[run..self.pos], self.utf8, &mut units)?;
        }
    }

    /// Moves past string contents up to a quote, a backslash or a control character.
    fn skip_plain(&mut self) {
        while let Some(u) = self.at(self.pos) {
            if u == u16::from(b'"') || u == u16::from(b'\\') || u < 0x20 {
                break;
            }
            self.pos += 1;
        }
    }
}

impl Members {
    fn add(
        &mut self,
        key: JsString,
        value: JsValue,
        shapes: &mut ShapeCache,
        context: &mut Context,
    ) -> Option<()> {
        match self {
            Members::Template(template, values) => {
                if let Some(next) = shapes.next(template, &key) {
                    *template = next;
                    values.push(value);
                } else {
                    // An index, a repeated key or a very long key list: from here on the
                    // object takes its properties one at a time, as `CreateDataProperty`.
                    let object = template.create(std::mem::take(values))?;
                    object
                        .create_data_property_or_throw(key, value, context)
                        .ok()?;
                    *self = Members::Object(object);
                }
            }
            Members::Object(object) => {
                object
                    .create_data_property_or_throw(key, value, context)
                    .ok()?;
            }
        }
        Some(())
    }

    fn finish(self) -> Option<JsObject> {
        match self {
            Members::Template(template, values) => template.create(values),
            Members::Object(object) => Some(object),
        }
    }
}

/// Parses JSON text; `None` when it is not JSON.
fn parse_text<U: Decode>(units: &[U], utf8: bool, context: &mut Context) -> Option<JsValue> {
    let mut s = Scanner {
        units,
        utf8,
        pos: 0,
        strings: StringCache::new(units.len()),
    };
    let mut shapes = ShapeCache::new(context, units.len());
    let mut stack: Vec<Open> = Vec::new();
    loop {
        // Parse one value, or open a container.
        let mut value = match u8::try_from(s.peek()?).ok()? {
            b'{' => {
                s.pos += 1;
                if s.peek()? == u16::from(b'}') {
                    s.pos += 1;
                    shapes.empty.create(Vec::new())?.into()
                } else {
                    let key = s.string()?;
                    s.peek()?;
                    s.eat(b":")?;
                    let members = Members::Template(shapes.empty.clone(), Vec::new());
                    stack.push(Open::Object(members, Some(key)));
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
            _ => s.number()?,
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
                Open::Object(members, key) => {
                    let key = key.take()?;
                    members.add(key, value, &mut shapes, context)?;
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
                            let Some(Open::Object(members, _)) = stack.pop() else {
                                return None;
                            };
                            value = members.finish()?.into();
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
    parse_text(bytes, true, context)
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
        JsStrVariant::Latin1(bytes) => parse_text(bytes, false, context),
        JsStrVariant::Utf16(units) => parse_text(units, false, context),
    };
    match parsed {
        Some(value) => Ok(value),
        None => original.call(this, &[text.into()], context),
    }
}

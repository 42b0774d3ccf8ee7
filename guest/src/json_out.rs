//! The guest's outgoing JSON buffer. The snapshot (`snapshot.rs`) walks a value and appends
//! tokens here (strings are escaped straight from Boa's string storage), so a completion or argument
//! is built once, in its final bytes, instead of as a chain of JavaScript strings.
//!
//! Byte 0 is reserved for the `done` frame's tag, so a completion is sent without a copy.

use std::cell::RefCell;

use boa_engine::string::JsStrVariant;
use boa_engine::JsString;

thread_local! {
    static OUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

pub fn begin() {
    OUT.with_borrow_mut(|out| {
        out.clear();
        out.push(0);
    });
}

/// Appends structural text (punctuation, numbers, literals) as it is.
pub fn raw_bytes(text: &[u8]) {
    OUT.with_borrow_mut(|out| out.extend_from_slice(text));
}

fn escape_unit(out: &mut Vec<u8>, c: char) {
    match c {
        '"' => out.extend_from_slice(b"\\\""),
        '\\' => out.extend_from_slice(b"\\\\"),
        '\n' => out.extend_from_slice(b"\\n"),
        '\r' => out.extend_from_slice(b"\\r"),
        '\t' => out.extend_from_slice(b"\\t"),
        '\u{8}' => out.extend_from_slice(b"\\b"),
        '\u{c}' => out.extend_from_slice(b"\\f"),
        c if (c as u32) < 0x20 => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let n = c as usize;
            out.extend_from_slice(b"\\u00");
            out.push(HEX[n >> 4]);
            out.push(HEX[n & 15]);
        }
        c => {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

/// Appends `s` as a JSON string literal. Lone surrogates become U+FFFD.
pub fn string(s: &JsString) {
    OUT.with_borrow_mut(|out| {
        out.push(b'"');
        match s.as_str().variant() {
            JsStrVariant::Latin1(bytes) => {
                out.reserve(bytes.len() + 2);
                for &b in bytes {
                    if (0x20..0x80).contains(&b) && b != b'"' && b != b'\\' {
                        out.push(b);
                    } else {
                        escape_unit(out, char::from(b));
                    }
                }
            }
            JsStrVariant::Utf16(units) => {
                out.reserve(units.len() + 2);
                for c in char::decode_utf16(units.iter().copied()) {
                    escape_unit(out, c.unwrap_or('\u{FFFD}'));
                }
            }
        }
        out.push(b'"');
    });
}

/// Runs `f` on the finished buffer (byte 0 is the reserved tag slot).
pub fn with_frame<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    OUT.with_borrow_mut(f)
}

/// Releases the buffer's memory once its bytes have been sent.
pub fn release() {
    OUT.with_borrow_mut(|out| *out = Vec::new());
}

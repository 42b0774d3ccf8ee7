//! The bridge's wire format: every frame that crosses between guest and host.
//!
//! All integers are little-endian `u32`; strings are UTF-8; JSON is compact text as
//! `JSON.stringify` writes it. Pointers and lengths passed to imports address the guest's
//! exported `memory`.
//!
//! Imports (module `codemode`), guest → host:
//! - `boot_len() -> u32`, `boot_read(ptr, len) -> u32`: copy out the boot frame, returns bytes
//!   copied. Boot frame: `str program`, `u32 n`, then `n` namespaces of `str global`,
//!   `u32 m`, `m × str name`, `u8 has_class`, and if set `str class_name`, `str member_prop`
//!   (`str` = `u32 len` + bytes).
//! - `log(ptr, len)`: one log entry (UTF-8; invalid sequences become U+FFFD).
//! - `call(id, ptr, len) -> u32`: start binding call `id` (guest-chosen). Frame: `str global`,
//!   `str name`, then the arguments as JSON up to the end. Ids strictly increase; a reused or
//!   older id is a duplicate. Returns 0 when accepted (exactly one reply will be delivered), 1
//!   when ignored (duplicate id, malformed frame, names over 4 KiB, settled run, too many calls
//!   in flight).
//! - `timer_start(id, delay_ms: f64) -> u32` (0 armed, 1 refused: too many armed),
//!   `timer_cancel(id)`.
//! - `reply_read(ptr, len) -> u32`: copy out the delivery announced by `cm_deliver(len)`.
//! - `done(ptr, len)`: the program's outcome. Frame: `u8 tag`; tag 0 = returned `undefined`;
//!   1 = a value, JSON up to the end; 2 = a failure: `u8 kind` (0 exception, 1 invalid-output,
//!   2 output-limit), `u32 line`, `u32 column` (0 = unknown), message up to the end.
//! - `output_limit()`: the guest declares it overflowed the output cap (believed).
//!
//! Exports, host → guest: `memory`; `cm_run() -> u32` and `cm_deliver(len) -> u32`, each
//! returning 0 (finished) or 1 (waiting). Delivery frame: `u8 tag`, `u32 id`; tag 0 = the
//! call resolved, JSON up to the end; 1 = the call rejected, message up to the end; 2 = the
//! timer fired.
//!
//! Parsing here is total: any byte sequence either decodes or is `None`. Nothing in this file
//! touches guest memory; `imports.rs` copies bytes out first.

/// `cm_run` / `cm_deliver` return this while the program waits (0 means it finished).
pub const STATUS_WAITING: u32 = 1;

pub const CALL_ACCEPTED: u32 = 0;
pub const CALL_IGNORED: u32 = 1;

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(b)
    }

    fn u32(&mut self) -> Option<u32> {
        let head = self.bytes.get(..4)?;
        let v = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        self.bytes = &self.bytes[4..];
        Some(v)
    }

    fn str(&mut self) -> Option<&'a str> {
        let len = self.u32()? as usize;
        let s = self.bytes.get(..len)?;
        self.bytes = &self.bytes[len..];
        std::str::from_utf8(s).ok()
    }
}

/// A decoded `call` frame.
#[derive(Debug, PartialEq, Eq)]
pub struct CallFrame<'a> {
    pub global: &'a str,
    pub name: &'a str,
    pub args_json: &'a [u8],
}

pub fn decode_call(bytes: &[u8]) -> Option<CallFrame<'_>> {
    let mut r = Reader { bytes };
    let global = r.str()?;
    let name = r.str()?;
    Some(CallFrame {
        global,
        name,
        args_json: r.bytes,
    })
}

/// A decoded `done` frame.
#[derive(Debug, PartialEq, Eq)]
pub enum DoneFrame<'a> {
    Undefined,
    Value(&'a [u8]),
    Failure {
        kind: DoneKind,
        line: u32,
        column: u32,
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoneKind {
    Exception,
    InvalidOutput,
    OutputLimit,
}

pub fn decode_done(bytes: &[u8]) -> Option<DoneFrame<'_>> {
    let mut r = Reader { bytes };
    match r.u8()? {
        0 if r.bytes.is_empty() => Some(DoneFrame::Undefined),
        1 => Some(DoneFrame::Value(r.bytes)),
        2 => {
            let kind = match r.u8()? {
                0 => DoneKind::Exception,
                1 => DoneKind::InvalidOutput,
                2 => DoneKind::OutputLimit,
                _ => return None,
            };
            let line = r.u32()?;
            let column = r.u32()?;
            Some(DoneFrame::Failure {
                kind,
                line,
                column,
                message: String::from_utf8_lossy(r.bytes).into_owned(),
            })
        }
        _ => None,
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// One namespace as the guest needs it: names only; the functions stay on the host.
pub struct BootNamespace<'a> {
    pub global: &'a str,
    pub names: Vec<&'a str>,
    pub error_class: Option<(&'a str, &'a str)>,
}

pub fn encode_boot(program: &str, namespaces: &[BootNamespace<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() + 64);
    put_str(&mut out, program);
    out.extend_from_slice(&(namespaces.len() as u32).to_le_bytes());
    for ns in namespaces {
        put_str(&mut out, ns.global);
        out.extend_from_slice(&(ns.names.len() as u32).to_le_bytes());
        for name in &ns.names {
            put_str(&mut out, name);
        }
        match ns.error_class {
            None => out.push(0),
            Some((name, member)) => {
                out.push(1);
                put_str(&mut out, name);
                put_str(&mut out, member);
            }
        }
    }
    out
}

/// A resolved reply: the value's JSON is written straight after the header, not copied in.
pub fn encode_resolved(id: u32, value: &serde_json::Value) -> Vec<u8> {
    // Five placeholder bytes (tag 0 and the id), valid UTF-8 so the JSON can follow in place.
    let mut text = String::from("\0\0\0\0\0");
    codemode_runtime::json::write(value, &mut text);
    let mut out = text.into_bytes();
    // The placeholder makes `out` at least five bytes long.
    out[1..5].copy_from_slice(&id.to_le_bytes());
    out
}

pub fn encode_rejected(id: u32, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(1);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(message.as_bytes());
    out
}

pub fn encode_timer(id: u32) -> Vec<u8> {
    let mut out = vec![2];
    out.extend_from_slice(&id.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_frames_decode_or_are_refused() {
        let mut f = Vec::new();
        put_str(&mut f, "tools");
        put_str(&mut f, "__proto__");
        f.extend_from_slice(b"{\"a\":1}");
        assert_eq!(
            decode_call(&f),
            Some(CallFrame {
                global: "tools",
                name: "__proto__",
                args_json: b"{\"a\":1}"
            })
        );
        assert_eq!(decode_call(&f[..3]), None);
        assert_eq!(decode_call(&[255, 255, 255, 255]), None);
        assert_eq!(decode_call(&[1, 0, 0, 0, 0xff]), None);
    }

    #[test]
    fn done_frames_are_tagged() {
        assert_eq!(decode_done(&[0]), Some(DoneFrame::Undefined));
        assert_eq!(decode_done(&[0, 1]), None);
        assert_eq!(decode_done(b"\x011"), Some(DoneFrame::Value(b"1")));
        assert_eq!(decode_done(&[2, 9, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(decode_done(&[2, 0, 1, 0]), None);
        assert_eq!(
            decode_done(&[2, 0, 3, 0, 0, 0, 4, 0, 0, 0, b'x']),
            Some(DoneFrame::Failure {
                kind: DoneKind::Exception,
                line: 3,
                column: 4,
                message: "x".into()
            })
        );
        assert_eq!(decode_done(&[]), None);
        assert_eq!(decode_done(&[7]), None);
    }
}

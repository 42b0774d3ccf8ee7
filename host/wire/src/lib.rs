//! The bridge's wire format: every frame that crosses between guest and host, defined once.
//!
//! The guest (`guest/`, built for `wasm32-wasip1`) and the host (`host/src/bridge/`) both build
//! from this crate, so the decoder the host fuzzes is the one both sides run.
//!
//! All integers are little-endian `u32`; strings are UTF-8; JSON is compact text as
//! `JSON.stringify` writes it. Pointers and lengths passed to imports address the guest's
//! exported `memory`.
//!
//! Imports (module `codemode`), guest → host:
//! - `boot_len() -> u32`, `boot_read(ptr, len) -> u32`: copy out the [`Boot`] frame, returns
//!   bytes copied. Layout: `str program`, `u32 n`, then `n` namespaces of `str global`, `u32 m`,
//!   `m × str name`, `u8 has_class`, and if set `str class_name`, `str member_prop`
//!   (`str` = `u32 len` + bytes).
//! - `log(ptr, len)`: one log entry (UTF-8; invalid sequences become U+FFFD).
//! - `call(id, ptr, len) -> u32`: start binding call `id` (guest-chosen) with a [`Call`] frame:
//!   `str global`, `str name`, then the arguments as JSON up to the end. Ids strictly
//!   increase; a reused or older id is a duplicate. Returns [`CALL_ACCEPTED`] (exactly one
//!   reply will be delivered) or [`CALL_IGNORED`] (duplicate id, malformed frame, names over
//!   4 KiB, settled run, too many calls in flight).
//! - `timer_start(id, delay_ms: f64) -> u32` ([`TIMER_ARMED`] or [`TIMER_REFUSED`]: too many
//!   armed), `timer_cancel(id)`.
//! - `reply_read(ptr, len) -> u32`: copy out the [`Delivery`] announced by `cm_deliver(len)`.
//! - `done(ptr, len)`: the program's [`Done`] frame: `u8 tag`; tag 0 = returned `undefined`
//!   (nothing follows); 1 = a value, JSON up to the end; 2 = a failure: `u8 kind`
//!   (0 exception, 1 invalid-output, 2 output-limit), `u32 line` (1-based in the program, 0 = unknown),
//!   `u32 column` (1-based, 0 = unknown), message up to the end.
//! - `output_limit()`: the guest declares it overflowed the output cap (believed: the run
//!   settles as an output-limit failure). The Boa guest never imports it (it reports an
//!   overflow in its `done` frame, kind 2); it is part of the interface a guest may link, so
//!   the hostile-guest suites exercise it.
//!
//! Exports, host → guest: `memory`; `cm_run() -> u32` and `cm_deliver(len) -> u32`, each
//! returning [`STATUS_DONE`] or [`STATUS_WAITING`]. [`Delivery`] frame: `u8 tag`, `u32 id`;
//! tag 0 = the call resolved, JSON up to the end; 1 = the call rejected, message up to the
//! end; 2 = the timer fired (nothing follows); 3 = the call resolved with a string, its UTF-8
//! bytes up to the end (no JSON escaping on the host, no parse in the guest).
//!
//! Decoding is total: any byte sequence either decodes or is `None`, without panicking and
//! without allocating in proportion to a length field the bytes do not back.

use std::borrow::Cow;

/// `cm_run` / `cm_deliver` return this when the program has finished.
pub const STATUS_DONE: u32 = 0;
/// `cm_run` / `cm_deliver` return this while the program waits.
pub const STATUS_WAITING: u32 = 1;

/// `call` accepted the frame; exactly one reply will be delivered.
pub const CALL_ACCEPTED: u32 = 0;
/// `call` ignored the frame; no reply will ever come.
pub const CALL_IGNORED: u32 = 1;

/// `timer_start` armed the timer.
pub const TIMER_ARMED: u32 = 0;
/// `timer_start` refused the timer (too many armed).
pub const TIMER_REFUSED: u32 = 1;

/// Tag byte of a `done` frame carrying a value; the guest writes its JSON after it in place.
pub const DONE_VALUE: u8 = 1;
const DONE_UNDEFINED: u8 = 0;
const DONE_FAILURE: u8 = 2;

const DELIVERY_RESOLVED: u8 = 0;
const DELIVERY_REJECTED: u8 = 1;
const DELIVERY_TIMER: u8 = 2;
const DELIVERY_RESOLVED_STRING: u8 = 3;

/// Length of a delivery's header (tag and id).
pub const DELIVERY_HEADER_LEN: usize = 5;

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
        let (head, rest) = self.bytes.split_first_chunk::<4>()?;
        self.bytes = rest;
        Some(u32::from_le_bytes(*head))
    }

    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < len {
            return None;
        }
        let (head, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Some(head)
    }

    fn str(&mut self) -> Option<&'a str> {
        let len = usize::try_from(self.u32()?).ok()?;
        std::str::from_utf8(self.take(len)?).ok()
    }

    /// Everything not read yet.
    fn rest(self) -> &'a [u8] {
        self.bytes
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Writes a length-prefixed string. Frames are bounded far below 4 GiB by the budgets, so a
/// longer string cannot occur; it is cut rather than mis-prefixed if it ever did.
fn put_str(out: &mut Vec<u8>, s: &str) {
    let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
    put_u32(out, len);
    out.extend_from_slice(&s.as_bytes()[..len as usize]);
}

/// One binding namespace as the guest needs it: names only; the functions stay on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace<'a> {
    /// The global the namespace is bound to (`tools`, `codemode`, …).
    pub global: &'a str,
    /// Its members, in order.
    pub names: Vec<&'a str>,
    /// The error class the namespace's failures are instances of, and the member naming the
    /// failed binding (`("ToolCallError", "toolName")`).
    pub error_class: Option<(&'a str, &'a str)>,
}

/// The boot frame: the program and the namespaces it may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boot<'a> {
    /// The program's JavaScript (types already stripped).
    pub program: &'a str,
    /// The namespaces, in parameter order.
    pub namespaces: Vec<Namespace<'a>>,
    /// The member a TypeScript program's global `fetch` calls: a namespace's index in
    /// `namespaces` and the member's name.
    pub web_fetch: Option<(u32, &'a str)>,
}

impl Boot<'_> {
    /// The frame's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.program.len() + 64);
        put_str(&mut out, self.program);
        put_u32(&mut out, u32::try_from(self.namespaces.len()).unwrap_or(0));
        for ns in &self.namespaces {
            put_str(&mut out, ns.global);
            put_u32(&mut out, u32::try_from(ns.names.len()).unwrap_or(0));
            for name in &ns.names {
                put_str(&mut out, name);
            }
            match ns.error_class {
                None => out.push(0),
                Some((class, member)) => {
                    out.push(1);
                    put_str(&mut out, class);
                    put_str(&mut out, member);
                }
            }
        }
        match self.web_fetch {
            None => out.push(0),
            Some((namespace, name)) => {
                out.push(1);
                put_u32(&mut out, namespace);
                put_str(&mut out, name);
            }
        }
        out
    }
}

/// Decodes a boot frame; `None` when malformed, when the web fetch names no namespace, or when
/// bytes follow the frame.
pub fn decode_boot(bytes: &[u8]) -> Option<Boot<'_>> {
    let mut r = Reader { bytes };
    let program = r.str()?;
    let count = r.u32()?;
    let mut namespaces = Vec::new();
    for _ in 0..count {
        let global = r.str()?;
        let name_count = r.u32()?;
        let mut names = Vec::new();
        for _ in 0..name_count {
            names.push(r.str()?);
        }
        let error_class = match r.u8()? {
            0 => None,
            1 => Some((r.str()?, r.str()?)),
            _ => return None,
        };
        namespaces.push(Namespace {
            global,
            names,
            error_class,
        });
    }
    let web_fetch = match r.u8()? {
        0 => None,
        1 => {
            let namespace = r.u32()?;
            let name = r.str()?;
            if namespace as usize >= namespaces.len() {
                return None;
            }
            Some((namespace, name))
        }
        _ => return None,
    };
    r.rest().is_empty().then_some(Boot {
        program,
        namespaces,
        web_fetch,
    })
}

/// A `call` frame: binding `global.name` with its arguments' JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call<'a> {
    /// The namespace's global.
    pub global: &'a str,
    /// The member called.
    pub name: &'a str,
    /// The arguments array as JSON text (not validated here).
    pub args_json: &'a [u8],
}

/// The start of every call frame of binding `global.name`; the argument JSON follows it. The
/// guest builds it once per binding and appends each call's arguments.
pub fn call_header(global: &str, name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + global.len() + name.len());
    put_str(&mut out, global);
    put_str(&mut out, name);
    out
}

impl Call<'_> {
    /// The frame's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = call_header(self.global, self.name);
        out.extend_from_slice(self.args_json);
        out
    }
}

/// Decodes a call frame; `None` when its names are cut short or not UTF-8.
pub fn decode_call(bytes: &[u8]) -> Option<Call<'_>> {
    let mut r = Reader { bytes };
    let global = r.str()?;
    let name = r.str()?;
    Some(Call {
        global,
        name,
        args_json: r.rest(),
    })
}

/// How a program failed, as the guest saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoneKind {
    /// An exception escaped the program (or it failed to compile).
    Exception,
    /// The returned value is not lossless JSON.
    InvalidOutput,
    /// The logs overflowed the output cap.
    OutputLimit,
}

impl DoneKind {
    fn byte(self) -> u8 {
        match self {
            Self::Exception => 0,
            Self::InvalidOutput => 1,
            Self::OutputLimit => 2,
        }
    }

    fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Exception),
            1 => Some(Self::InvalidOutput),
            2 => Some(Self::OutputLimit),
            _ => None,
        }
    }
}

/// A `done` frame: what the program ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done<'a> {
    /// The program returned `undefined`.
    Undefined,
    /// The program returned this value's JSON.
    Value(&'a [u8]),
    /// The program failed.
    Failure {
        /// What kind of failure.
        kind: DoneKind,
        /// 1-based line in the program, or 0 when unknown.
        line: u32,
        /// 1-based column, or 0 when unknown.
        column: u32,
        /// The message (invalid UTF-8 decodes to U+FFFD).
        message: Cow<'a, str>,
    },
}

impl Done<'_> {
    /// The frame's bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Done::Undefined => vec![DONE_UNDEFINED],
            Done::Value(json) => {
                let mut out = Vec::with_capacity(1 + json.len());
                out.push(DONE_VALUE);
                out.extend_from_slice(json);
                out
            }
            Done::Failure {
                kind,
                line,
                column,
                message,
            } => {
                let mut out = Vec::with_capacity(10 + message.len());
                out.push(DONE_FAILURE);
                out.push(kind.byte());
                put_u32(&mut out, *line);
                put_u32(&mut out, *column);
                out.extend_from_slice(message.as_bytes());
                out
            }
        }
    }
}

/// Decodes a done frame; `None` for an unknown tag or kind, a short header, or bytes after an
/// `undefined`.
pub fn decode_done(bytes: &[u8]) -> Option<Done<'_>> {
    let mut r = Reader { bytes };
    match r.u8()? {
        DONE_UNDEFINED => r.rest().is_empty().then_some(Done::Undefined),
        DONE_VALUE => Some(Done::Value(r.rest())),
        DONE_FAILURE => {
            let kind = DoneKind::from_byte(r.u8()?)?;
            let line = r.u32()?;
            let column = r.u32()?;
            Some(Done::Failure {
                kind,
                line,
                column,
                message: String::from_utf8_lossy(r.rest()),
            })
        }
        _ => None,
    }
}

/// A delivery: a call's reply or a timer, host → guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery<'a> {
    /// Call `id` resolved with this JSON.
    Resolved {
        /// The call's id.
        id: u32,
        /// The value's JSON text.
        json: &'a [u8],
    },
    /// Call `id` rejected with this message.
    Rejected {
        /// The call's id.
        id: u32,
        /// The message (invalid UTF-8 decodes to U+FFFD).
        message: Cow<'a, str>,
    },
    /// Call `id` resolved with a string, sent as its UTF-8 bytes: a large text result (a file,
    /// a page) needs no escaping on the host and no JSON parse in the guest.
    ResolvedString {
        /// The call's id.
        id: u32,
        /// The string.
        text: &'a str,
    },
    /// Timer `id` fired.
    Timer {
        /// The timer's id.
        id: u32,
    },
}

impl Delivery<'_> {
    /// The frame's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let (tag, id, body): (u8, u32, &[u8]) = match self {
            Delivery::Resolved { id, json } => (DELIVERY_RESOLVED, *id, json),
            Delivery::Rejected { id, message } => (DELIVERY_REJECTED, *id, message.as_bytes()),
            Delivery::ResolvedString { id, text } => {
                (DELIVERY_RESOLVED_STRING, *id, text.as_bytes())
            }
            Delivery::Timer { id } => (DELIVERY_TIMER, *id, &[]),
        };
        let mut out = Vec::with_capacity(DELIVERY_HEADER_LEN + body.len());
        out.push(tag);
        put_u32(&mut out, id);
        out.extend_from_slice(body);
        out
    }
}

/// A resolved delivery whose JSON `write_json` appends in place after the header, so a large
/// value is never copied a second time.
pub fn encode_resolved_with(id: u32, write_json: impl FnOnce(&mut String)) -> Vec<u8> {
    // Placeholder header bytes, valid UTF-8 so that the JSON can be written after them.
    let mut text = String::from("\0\0\0\0\0");
    write_json(&mut text);
    let mut out = text.into_bytes();
    out[0] = DELIVERY_RESOLVED;
    // The placeholder makes `out` at least DELIVERY_HEADER_LEN bytes long.
    out[1..DELIVERY_HEADER_LEN].copy_from_slice(&id.to_le_bytes());
    out
}

/// Decodes a delivery; `None` for an unknown tag, a short header, bytes after a timer or a
/// string that is not UTF-8.
pub fn decode_delivery(bytes: &[u8]) -> Option<Delivery<'_>> {
    let mut r = Reader { bytes };
    let tag = r.u8()?;
    let id = r.u32()?;
    match tag {
        DELIVERY_RESOLVED => Some(Delivery::Resolved { id, json: r.rest() }),
        DELIVERY_REJECTED => Some(Delivery::Rejected {
            id,
            message: String::from_utf8_lossy(r.rest()),
        }),
        DELIVERY_TIMER => r.rest().is_empty().then_some(Delivery::Timer { id }),
        DELIVERY_RESOLVED_STRING => std::str::from_utf8(r.rest())
            .ok()
            .map(|text| Delivery::ResolvedString { id, text }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_frames_decode_or_are_refused() {
        let f = Call {
            global: "tools",
            name: "__proto__",
            args_json: b"{\"a\":1}",
        }
        .encode();
        assert_eq!(
            decode_call(&f),
            Some(Call {
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
        assert_eq!(decode_done(&[0]), Some(Done::Undefined));
        assert_eq!(decode_done(&[0, 1]), None);
        assert_eq!(decode_done(b"\x011"), Some(Done::Value(b"1")));
        assert_eq!(decode_done(&[2, 9, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(decode_done(&[2, 0, 1, 0]), None);
        assert_eq!(
            decode_done(&[2, 0, 3, 0, 0, 0, 4, 0, 0, 0, b'x']),
            Some(Done::Failure {
                kind: DoneKind::Exception,
                line: 3,
                column: 4,
                message: "x".into()
            })
        );
        assert_eq!(decode_done(&[]), None);
        assert_eq!(decode_done(&[7]), None);
    }

    #[test]
    fn boot_frames_round_trip_and_refuse_trailing_bytes() {
        let boot = Boot {
            program: "return 1",
            namespaces: vec![
                Namespace {
                    global: "tools",
                    names: vec!["a", "b-c"],
                    error_class: Some(("ToolCallError", "toolName")),
                },
                Namespace {
                    global: "codemode",
                    names: vec![],
                    error_class: None,
                },
            ],
            web_fetch: Some((0, "a")),
        };
        let mut bytes = boot.encode();
        assert_eq!(decode_boot(&bytes), Some(boot.clone()));
        let nowhere = Boot {
            web_fetch: Some((2, "a")),
            ..boot
        };
        assert_eq!(decode_boot(&nowhere.encode()), None);
        bytes.push(0);
        assert_eq!(decode_boot(&bytes), None);
        assert_eq!(decode_boot(&[0, 0, 0, 0, 255, 255, 255, 255]), None);
    }

    #[test]
    fn deliveries_round_trip() {
        for d in [
            Delivery::Resolved {
                id: 7,
                json: b"[1]",
            },
            Delivery::Rejected {
                id: u32::MAX,
                message: "no".into(),
            },
            Delivery::Timer { id: 0 },
            Delivery::ResolvedString {
                id: 3,
                text: "a \"quoted\" é",
            },
        ] {
            assert_eq!(decode_delivery(&d.encode()), Some(d));
        }
        let built = encode_resolved_with(9, |s| s.push_str("{}"));
        assert_eq!(
            decode_delivery(&built),
            Some(Delivery::Resolved { id: 9, json: b"{}" })
        );
        assert_eq!(decode_delivery(&[2, 0, 0, 0, 0, 1]), None);
        assert_eq!(decode_delivery(&[3, 0, 0, 0, 0, 0xff]), None, "not UTF-8");
        assert_eq!(decode_delivery(&[4, 0, 0, 0, 0]), None);
    }
}

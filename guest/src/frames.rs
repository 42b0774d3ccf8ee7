//! Encoding and decoding of the bridge frames (layouts in `host/src/bridge/wire.rs`).
//!
//! The host is trusted here: a malformed boot or reply frame is a host bug, reported as an
//! error rather than worked around.

pub struct Namespace {
    pub global: String,
    pub names: Vec<String>,
    pub error_class: Option<(String, String)>,
}

pub struct Boot {
    pub program: String,
    pub namespaces: Vec<Namespace>,
}

/// A reply or timer, borrowing from the frame it was read from.
pub enum Delivery<'a> {
    Resolved {
        id: u32,
        json: &'a [u8],
    },
    Rejected {
        id: u32,
        message: std::borrow::Cow<'a, str>,
    },
    Timer {
        id: u32,
    },
}

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
        if self.bytes.len() < 4 {
            return None;
        }
        let (head, rest) = self.bytes.split_at(4);
        self.bytes = rest;
        Some(u32::from_le_bytes([head[0], head[1], head[2], head[3]]))
    }

    fn bytes(&mut self, len: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < len {
            return None;
        }
        let (head, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Some(head)
    }

    fn string(&mut self) -> Option<String> {
        let len = self.u32()? as usize;
        String::from_utf8(self.bytes(len)?.to_vec()).ok()
    }
}

pub fn decode_boot(bytes: &[u8]) -> Option<Boot> {
    let mut r = Reader { bytes };
    let program = r.string()?;
    let count = r.u32()?;
    let mut namespaces = Vec::new();
    for _ in 0..count {
        let global = r.string()?;
        let name_count = r.u32()?;
        let mut names = Vec::new();
        for _ in 0..name_count {
            names.push(r.string()?);
        }
        let error_class = match r.u8()? {
            0 => None,
            _ => Some((r.string()?, r.string()?)),
        };
        namespaces.push(Namespace {
            global,
            names,
            error_class,
        });
    }
    Some(Boot {
        program,
        namespaces,
    })
}

pub fn decode_delivery(bytes: &[u8]) -> Option<Delivery<'_>> {
    let mut r = Reader { bytes };
    let tag = r.u8()?;
    let id = r.u32()?;
    match tag {
        0 => Some(Delivery::Resolved { id, json: r.bytes }),
        1 => Some(Delivery::Rejected {
            id,
            message: String::from_utf8_lossy(r.bytes),
        }),
        2 => Some(Delivery::Timer { id }),
        _ => None,
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The start of every call frame of binding `global.name`; the argument JSON follows it.
pub fn call_header(global: &str, name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + global.len() + name.len());
    put_str(&mut out, global);
    put_str(&mut out, name);
    out
}

/// Tag of a `done` frame carrying a value.
pub const TAG_VALUE: u8 = 1;

/// What the program ended with, as the guest saw it.
pub enum Outcome<'a> {
    Undefined,
    Exception {
        message: &'a str,
        line: u32,
        column: u32,
    },
    InvalidOutput(&'a str),
}

pub fn encode_done(outcome: &Outcome<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    match outcome {
        Outcome::Undefined => out.push(0),
        Outcome::Exception {
            message,
            line,
            column,
        } => {
            out.push(2);
            out.push(0);
            out.extend_from_slice(&line.to_le_bytes());
            out.extend_from_slice(&column.to_le_bytes());
            out.extend_from_slice(message.as_bytes());
        }
        Outcome::InvalidOutput(message) => {
            out.push(2);
            out.push(1);
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(message.as_bytes());
        }
    }
    out
}

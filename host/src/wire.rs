//! The host's side of the wire format. The frames themselves are defined once, in the
//! `codemode-wire` crate (`host/wire/`), which the guest builds too; this module adds what only
//! the host writes: deliveries built from `serde_json` values.

pub use codemode_wire::*;

/// A resolved reply: the value's JSON is written straight after the header, not copied in.
pub fn encode_resolved(id: u32, value: &serde_json::Value) -> Vec<u8> {
    encode_resolved_with(id, |text| codemode_runtime::json::write(value, text))
}

pub fn encode_rejected(id: u32, message: &str) -> Vec<u8> {
    Delivery::Rejected {
        id,
        message: message.into(),
    }
    .encode()
}

pub fn encode_timer(id: u32) -> Vec<u8> {
    Delivery::Timer { id }.encode()
}

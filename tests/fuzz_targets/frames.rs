//! Target `frames`: the wire decoders and the host's argument validator on arbitrary bytes.

use codemode_runtime::json;
use codemode_wire::{decode_boot, decode_call, decode_delivery, decode_done};

/// Every decoder is total and agrees with its encoder: what decodes re-encodes to a frame that
/// decodes to the same thing. The argument parser stays inside the heap room it is given.
pub fn frames(data: &[u8]) {
    if let Some(call) = decode_call(data) {
        // A call frame has no redundancy: its encoding is the input itself.
        assert_eq!(call.encode(), data);
        if let Some(&room) = data.first() {
            let room = usize::from(room) * 64;
            if let Ok((value, heap)) = json::parse_within(call.args_json, room) {
                assert!(
                    heap <= room,
                    "parsed {heap} heap bytes with room for {room}"
                );
                assert!(
                    json::is_lossless(&value),
                    "the parser admitted a lossy value"
                );
                // What the host would echo back must parse, and write the same text again.
                let text = json::to_string(&value);
                let again = json::parse(text.as_bytes()).expect("written JSON parses");
                assert_eq!(json::to_string(&again), text);
            }
        }
    }
    if let Some(done) = decode_done(data) {
        assert_eq!(decode_done(&done.encode()), Some(done));
    }
    if let Some(delivery) = decode_delivery(data) {
        assert_eq!(decode_delivery(&delivery.encode()), Some(delivery));
    }
    if let Some(boot) = decode_boot(data) {
        // Boot frames refuse trailing bytes, so the encoding is the input itself.
        assert_eq!(boot.encode(), data);
    }
}

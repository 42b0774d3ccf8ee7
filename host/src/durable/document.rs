//! A small JSON document kept in the state store for processes sharing it (a task's status
//! and result), tagged under the state key so that what one replica wrote is what another
//! reads: `<HMAC-SHA256 in hex>\n<JSON>`, the tag over a context string, the document's name
//! and its JSON.

use hmac::Mac;
use serde_json::Value;

use super::memory::unhex;
use super::record::{mac, HmacSha256};

const CONTEXT: &[u8] = b"codemode state document\0";

fn tag(key: &[u8], name: &str, json: &[u8]) -> HmacSha256 {
    let mut mac = mac(key);
    mac.update(CONTEXT);
    mac.update(name.as_bytes());
    mac.update(b"\0");
    mac.update(json);
    mac
}

/// `document` as kept under `name`.
pub(crate) fn seal(key: &[u8], name: &str, document: &Value) -> Vec<u8> {
    let json = codemode_runtime::json::to_string(document);
    let tag = super::memory::hex(&tag(key, name, json.as_bytes()).finalize().into_bytes());
    format!("{tag}\n{json}").into_bytes()
}

/// The document kept under `name`, once its tag is checked.
pub(crate) fn open(key: &[u8], name: &str, bytes: &[u8]) -> Result<Value, String> {
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("it is not a document codemode wrote")?;
    let (tag_hex, json) = (&bytes[..newline], &bytes[newline + 1..]);
    let presented = Some(tag_hex)
        .filter(|t| t.len() == 64)
        .and_then(unhex)
        .ok_or("it is not a document codemode wrote")?;
    tag(key, name, json)
        .verify_slice(&presented)
        .map_err(|_| "it is not authentic (changed, or written with another state key)")?;
    codemode_runtime::json::parse(json).map_err(|e| format!("it is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_reads_back_only_under_its_key_and_name() {
        let key = b"k".repeat(32);
        let document = serde_json::json!({"status": "working", "n": [1, 2]});
        let sealed = seal(&key, "task-1", &document);
        assert_eq!(open(&key, "task-1", &sealed).unwrap(), document);
        assert!(open(&key, "task-2", &sealed)
            .unwrap_err()
            .contains("not authentic"));
        assert!(open(&b"x".repeat(32), "task-1", &sealed)
            .unwrap_err()
            .contains("not authentic"));
        let mut changed = sealed.clone();
        let last = changed.len() - 2;
        changed[last] = b'3';
        assert!(open(&key, "task-1", &changed)
            .unwrap_err()
            .contains("not authentic"));
        assert!(open(&key, "task-1", b"no newline")
            .unwrap_err()
            .contains("not a document"));
        assert!(open(&key, "task-1", b"zz\n{}")
            .unwrap_err()
            .contains("not a document"));
    }
}

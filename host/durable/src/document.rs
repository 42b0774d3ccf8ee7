//! A small JSON document kept in the state store for processes sharing it (a task's status,
//! result, arguments and `requestState`; a task's lease), sealed (`sealed.rs`) under a key
//! derived from the state key for documents alone, with the document's name as associated
//! data. Whoever reads the store without the key learns a document's size and nothing else:
//! not the program, not its result, not a `requestState` to present.

use serde_json::Value;

use super::key::Key;
use super::sealed;

/// What documents' key is derived for.
const PURPOSE: &[u8] = b"codemode state documents v1";

/// `document` as kept under `name`.
pub fn seal(key: &Key, name: &str, document: &Value) -> Result<Vec<u8>, String> {
    let json = codemode_runtime::json::to_string(document);
    sealed::seal(&key.derive(PURPOSE), name, json.as_bytes()).map_err(|e| e.to_string())
}

/// The document kept under `name`, once it opens under the key.
pub fn open(key: &Key, name: &str, bytes: &[u8]) -> Result<Value, String> {
    let json = sealed::open(&key.derive(PURPOSE), name, bytes).map_err(|e| e.to_string())?;
    codemode_runtime::json::parse(&json).map_err(|e| format!("it is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_reads_back_only_under_its_key_and_name_and_shows_nothing() {
        let key = Key::from_bytes(b"k".repeat(32));
        let state = "cm2.0123456789abcdef0123456789abcdef.99.ab";
        let document = serde_json::json!({
            "status": "input_required",
            "arguments": {"code": "return await tools.deploy({ target: 'prod' })"},
            "requestState": state,
        });
        let sealed = seal(&key, "task/1", &document).unwrap();
        let text = String::from_utf8_lossy(&sealed);
        for hidden in ["deploy", "prod", "cm2.", "input_required", "requestState"] {
            assert!(!text.contains(hidden), "{hidden} in {text}");
        }
        assert_eq!(open(&key, "task/1", &sealed).unwrap(), document);
        assert!(open(&key, "task/2", &sealed)
            .unwrap_err()
            .contains("not authentic"));
        let other = Key::from_bytes(b"x".repeat(32));
        assert!(open(&other, "task/1", &sealed)
            .unwrap_err()
            .contains("not authentic"));
        let mut changed = sealed.clone();
        let last = changed.len() - 2;
        changed[last] ^= 0x20;
        assert!(open(&key, "task/1", &changed)
            .unwrap_err()
            .contains("not authentic"));
        // A document of the earlier, tagged but readable, format.
        let earlier = format!("{}\n{{\"status\":\"working\"}}", "0".repeat(64));
        assert!(open(&key, "task/1", earlier.as_bytes())
            .unwrap_err()
            .contains("earlier version"));
        // The key for documents is not the state key itself.
        assert_ne!(&key.derive(PURPOSE)[..], key.bytes());
    }
}

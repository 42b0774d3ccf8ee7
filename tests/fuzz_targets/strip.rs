//! Target `strip`: the TypeScript stripper on arbitrary text.

use codemode_host::strip::strip_types;

/// Stripping either refuses with a position inside the program or returns text of the same
/// length in characters (a type is replaced by one space per character, so multi-byte
/// characters change the byte length) with every line break where it was, so that every
/// line:col the guest reports is one the model wrote.
pub fn strip(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match strip_types(&text) {
        Ok(js) => {
            assert_eq!(
                js.chars().count(),
                text.chars().count(),
                "stripping moved positions:\n{text}\n---\n{js}"
            );
            for (i, (a, b)) in text.chars().zip(js.chars()).enumerate() {
                assert!(
                    (a == '\n') == (b == '\n'),
                    "line break moved at character {i}:\n{text}\n---\n{js}"
                );
            }
        }
        Err(e) => {
            assert!(!e.message.is_empty(), "a refusal says why");
            let lines = text.split('\n').count() as u32;
            assert!(
                e.line <= lines,
                "refusal at line {} of a {lines}-line program",
                e.line
            );
        }
    }
}

//! Small text rules shared by both renderers: code-unit ordering, one-line documentation,
//! identifier tests, PascalCase names derived from tool and field names, and fresh names.
//!
//! Everything here but `unique_name` is a pure function of its input; nothing allocates per
//! character more than once.

use std::collections::BTreeSet;
use unicode_normalization::UnicodeNormalization;

pub use codemode_json::cmp_utf16;

/// JavaScript's `\s` class: ECMAScript WhiteSpace plus LineTerminator.
fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// Collapses every whitespace run to one space and trims the ends, so that a description
/// fits on one line of a prompt.
pub fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in text.chars() {
        if is_js_whitespace(c) {
            pending_space = !out.is_empty();
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            out.push(c);
        }
    }
    out
}

/// `^[A-Za-z_$][A-Za-z0-9_$]*$`: the names TypeScript output may use as bare keys.
pub fn is_ts_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A JSON string literal for `text` (also a valid TypeScript and Python string literal).
pub fn json_quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    codemode_json::write_string(text, &mut quoted);
    quoted
}

/// Python's hard keywords, which can be neither method nor field names.
const PYTHON_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Whether `name` is a Python identifier that means exactly itself: XID characters, unchanged by
/// NFKC (Python normalises identifiers, so a non-stable name would silently become another name),
/// and not a hard keyword or `__debug__`.
pub fn is_python_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c == '_' || unicode_ident::is_xid_start(c) => {}
        _ => return false,
    }
    if !chars.all(unicode_ident::is_xid_continue) {
        return false;
    }
    if name.nfkc().ne(name.chars()) {
        return false;
    }
    name != "__debug__" && !PYTHON_KEYWORDS.contains(&name)
}

/// Whether a class body would mangle `name` (`__x` but not `__x__`), so a TypedDict field of that
/// name would not be the key the tool expects.
pub fn is_python_mangled(name: &str) -> bool {
    name.starts_with("__") && !name.ends_with("__")
}

/// PascalCase from the identifier characters of `name`: every run of characters that cannot
/// continue an identifier (and every `_`) starts a new word. May be empty.
pub fn pascal_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut word_start = true;
    for c in name.nfkc() {
        if c == '_' || !unicode_ident::is_xid_continue(c) {
            word_start = true;
            continue;
        }
        if word_start {
            out.extend(c.to_uppercase());
            word_start = false;
        } else {
            out.push(c);
        }
    }
    // Uppercasing can produce characters that NFKC changes again; normalise once more so the
    // name is NFKC-stable as Python requires.
    out.nfkc().collect()
}

/// Escapes text for a one-line Python docstring: backslashes and double quotes (which could end
/// the string early) are escaped, and so are control characters, as `\xNN`.
pub fn python_docstring_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => push_python_char(c, &mut out),
        }
    }
    out
}

/// Escapes text for a one-line Python comment: only control characters, which could end the
/// line or are not allowed in source at all, become `\xNN`.
pub fn python_comment_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_python_char(c, &mut out);
    }
    out
}

fn push_python_char(c: char, out: &mut String) {
    if (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32)) {
        out.push_str(&format!("\\x{:02x}", c as u32));
    } else {
        out.push(c);
    }
}

/// `base`, or `base2`, `base3`, … whichever is not yet in `taken`; the result is taken.
pub fn unique_name(taken: &mut BTreeSet<String>, base: &str) -> String {
    let mut name = base.to_owned();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}{n}");
        n += 1;
    }
    taken.insert(name.clone());
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    #[test]
    fn utf16_order_puts_astral_characters_before_the_private_use_area() {
        // U+1F600 is D83D DE00 in UTF-16, which sorts before U+E000; by UTF-8 bytes it sorts after.
        assert_eq!(cmp_utf16("\u{1F600}", "\u{E000}"), Ordering::Less);
        assert_eq!("\u{1F600}".cmp("\u{E000}"), Ordering::Greater);
    }

    #[test]
    fn whitespace_runs_collapse_and_ends_are_trimmed() {
        assert_eq!(collapse_whitespace("  a\n\t b\u{2028}c \u{FEFF}"), "a b c");
        assert_eq!(collapse_whitespace(" \n "), "");
    }

    #[test]
    fn typescript_identifiers_are_ascii_only() {
        assert!(is_ts_identifier("mcp__fs__read_file"));
        assert!(is_ts_identifier("$x"));
        assert!(!is_ts_identifier("read-file"));
        assert!(!is_ts_identifier("1a"));
        assert!(!is_ts_identifier("é"));
        assert!(!is_ts_identifier(""));
    }

    #[test]
    fn python_identifiers_exclude_keywords_and_unstable_names() {
        assert!(is_python_identifier("read_file"));
        assert!(is_python_identifier("match"));
        assert!(is_python_identifier("é"));
        assert!(!is_python_identifier("class"));
        assert!(!is_python_identifier("__debug__"));
        assert!(!is_python_identifier("ﬁle"));
        assert!(!is_python_identifier("read-file"));
        assert!(is_python_mangled("__x"));
        assert!(!is_python_mangled("__x__"));
    }

    #[test]
    fn pascal_case_splits_on_underscores_and_punctuation() {
        assert_eq!(pascal_case("mcp__fs__read-file"), "McpFsReadFile");
        assert_eq!(pascal_case("getSum"), "GetSum");
        assert_eq!(pascal_case("--"), "");
    }

    #[test]
    fn python_escape_handles_quotes_backslashes_and_controls() {
        assert_eq!(
            python_docstring_escape("a\"b\\c\u{0}d"),
            "a\\\"b\\\\c\\x00d"
        );
        assert_eq!(python_comment_escape("a\"b\\c\u{7f}d"), "a\"b\\c\\x7fd");
    }
}

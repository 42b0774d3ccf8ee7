//! A cheap pass over a program before the TypeScript parser sees it, bounding what the parser
//! could be made to spend.
//!
//! swc reports a duplicate label once for every enclosing label of the same name, so `a:a:a:…`
//! (or `a: { a: { … } }`, or `a: if (x) {} else a: …`) costs time and memory quadratic in the
//! number of labels (a few kilobytes of them took seconds and gigabytes). This pass counts
//! those pairs and refuses a program with more than [`MAX_LABEL_PAIRS`] before parsing.
//!
//! The pass does not tokenize strings, comments or regular expressions: it reads every
//! `name:` as a possible label, so it can only over-count, never miss a label the parser will
//! see. Object keys nested inside objects with the same name count too; a program would need
//! that name nested about 140 deep to be refused.

use std::collections::HashMap;

/// Most pairs of a label and an enclosing label of the same name a program may contain.
pub const MAX_LABEL_PAIRS: usize = 10_000;

/// What the pass found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// Deepest bracket nesting (brackets in strings and comments count too).
    pub nesting: usize,
    /// Pairs of a possible label and an enclosing possible label of the same name.
    pub label_pairs: usize,
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'\\' || b >= 0x80
}

/// Reads an identifier at `start`, decoding `\uXXXX` and `\u{…}` escapes so that every spelling
/// of a name is one name. Returns the name and the position after it.
fn identifier(bytes: &[u8], start: usize) -> (Vec<u8>, usize) {
    let mut name = Vec::new();
    let mut i = start;
    while i < bytes.len() && is_ident(bytes[i]) {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'u') {
            let (code, end) = if bytes.get(i + 2) == Some(&b'{') {
                let close = bytes[i + 3..]
                    .iter()
                    .position(|&b| b == b'}')
                    .map(|p| i + 3 + p);
                match close {
                    Some(close) => (hex(&bytes[i + 3..close]), close + 1),
                    None => (None, bytes.len()),
                }
            } else {
                let end = (i + 6).min(bytes.len());
                (hex(&bytes[i + 2..end]), end)
            };
            match code.and_then(char::from_u32) {
                Some(c) => {
                    let mut buf = [0u8; 4];
                    name.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                None => name.extend_from_slice(&bytes[i..end]),
            }
            i = end;
            continue;
        }
        name.push(bytes[i]);
        i += 1;
    }
    (name, i)
}

fn hex(digits: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(digits).ok()?;
    // Any number of leading zeros spells the same code point.
    let trimmed = text.trim_start_matches('0');
    if trimmed.len() > 6 {
        return None;
    }
    u32::from_str_radix(if trimmed.is_empty() { "0" } else { trimmed }, 16).ok()
}

/// The position of the next byte that is not whitespace or inside a comment.
fn skip_trivia(bytes: &[u8], mut i: usize) -> usize {
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i..].starts_with(b"/*") {
            i = bytes[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(bytes.len(), |p| i + 2 + p + 2);
        } else {
            return i;
        }
    }
}

/// One pass over `program`.
pub fn scan(program: &str) -> Scan {
    let bytes = program.as_bytes();
    let mut depth = 0usize;
    let mut nesting = 0usize;
    // Possible labels in force: (name, depth declared at), and how many of each name.
    let mut open: Vec<(Vec<u8>, usize)> = Vec::new();
    let mut active: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut pairs = 0usize;
    // Unanswered `?` of a conditional expression at this point (their `:` is not a label).
    let mut questions = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                nesting = nesting.max(depth);
                questions = 0;
                i += 1;
            }
            b')' | b']' | b'}' => {
                // Labels declared inside the closed bracket are out of force (a label's own
                // statement may continue past it: `a: if (x) {} else a: …`).
                while open.last().is_some_and(|(_, at)| *at >= depth) {
                    if let Some((name, _)) = open.pop() {
                        if let Some(count) = active.get_mut(&name) {
                            *count -= 1;
                        }
                    }
                }
                depth = depth.saturating_sub(1);
                questions = 0;
                i += 1;
            }
            b';' | b',' | b'\n' => {
                questions = 0;
                i += 1;
            }
            b'?' => {
                let next = bytes.get(i + 1).copied();
                let optional_chain =
                    next == Some(b'.') && !bytes.get(i + 2).is_some_and(|d| d.is_ascii_digit());
                if next == Some(b'?') {
                    i += 2;
                } else {
                    if !optional_chain {
                        questions += 1;
                    }
                    i += 1;
                }
            }
            _ if is_ident(b) => {
                let (name, end) = identifier(bytes, i);
                i = end;
                let after = skip_trivia(bytes, i);
                let is_colon =
                    bytes.get(after) == Some(&b':') && bytes.get(after + 1) != Some(&b':');
                if !is_colon {
                    continue;
                }
                i = after + 1;
                if questions > 0 {
                    questions -= 1;
                    continue;
                }
                let count = active.entry(name.clone()).or_insert(0);
                pairs = pairs.saturating_add(*count);
                *count += 1;
                open.push((name, depth));
            }
            _ => i += 1,
        }
    }
    Scan {
        nesting,
        label_pairs: pairs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(program: &str) -> usize {
        scan(program).label_pairs
    }

    #[test]
    fn every_way_of_nesting_a_label_counts() {
        assert_eq!(pairs("a:a:a:;"), 3);
        assert_eq!(pairs("a: { a: { a: { } } }"), 3);
        assert_eq!(pairs("a: if (1) {} else a: if (1) {} else a: ;"), 3);
        assert_eq!(pairs("a: for (;;) a: while (1) ;"), 1);
        assert_eq!(pairs("a /* x */ : a // y\n : a\n:;"), 3);
        assert_eq!(
            pairs("\\u0061: \\u{00061}: a:;"),
            3,
            "escapes spell one name"
        );
        assert_eq!(pairs("é:é:é:;"), 3);
    }

    #[test]
    fn ordinary_code_counts_nothing() {
        let program = r#"
            const rows = [{ id: 1, name: "a" }, { id: 2, name: "b" }];
            const pick = (row: Row) => row.ok ? row.id : row.name;
            const x = a ? b : c ? d : e;
            outer: for (const r of rows) { inner: for (const k of r) { if (k) continue outer; } }
            const y = maybe?.value ?? 0;
        "#;
        assert_eq!(pairs(program), 0);
    }

    #[test]
    fn sibling_blocks_and_objects_do_not_pile_up() {
        let objects = "[".to_owned() + &"{ a: 1, b: { a: 2 } },".repeat(1_000) + "]";
        assert_eq!(pairs(&objects), 1_000);
        let quadratic = "a:".repeat(200);
        assert_eq!(pairs(&quadratic), 200 * 199 / 2);
    }

    #[test]
    fn nesting_is_the_deepest_bracket() {
        assert_eq!(scan("f([{ }])").nesting, 3);
        assert_eq!(scan("").nesting, 0);
    }
}

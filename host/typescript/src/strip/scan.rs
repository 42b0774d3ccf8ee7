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

/// Most `<` in one statement where an expression starts (a type assertion `<T>x` or a generic
/// arrow function `<T>(x: T) => …`). swc tries each such `<` both ways, and when the tries
/// nest and fail (`<T><T>(<T><T>(…`) it reparses what follows each: time exponential in their
/// number (a program of 112 characters took a minute). A statement written by anyone has a
/// few; 16 of them cost the parser well under a second whatever they are.
pub const MAX_SPECULATIVE_ANGLES: usize = 16;

/// Most `<` after a name left open inside the computed keys (`{[…`) that are open at once.
/// swc reads such a `<` as the start of type arguments and tries the key's text both ways, and
/// keys nested in keys multiply the tries: `{[A<` nine times took a second, `[{[A< b <n`
/// eight times 48 seconds. A computed key holding a comparison is rare; eight of them open at
/// once cost the parser a fraction of a second.
pub const MAX_ANGLES_IN_COMPUTED_KEYS: usize = 8;

/// What the pass found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// Deepest bracket nesting (brackets in strings and comments count too).
    pub nesting: usize,
    /// Pairs of a possible label and an enclosing possible label of the same name.
    pub label_pairs: usize,
    /// The most `<` where an expression starts in one statement (strings, templates and
    /// comments skipped): see [`MAX_SPECULATIVE_ANGLES`].
    pub speculative_angles: usize,
    /// The most `<` after a name open in the computed keys open at once: see
    /// [`MAX_ANGLES_IN_COMPUTED_KEYS`].
    pub angles_in_computed_keys: usize,
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

/// Where a string, template literal or comment that starts at `i` ends (a template's `${…}`
/// skipped with it); `None` when none starts there.
fn skip_literal(bytes: &[u8], i: usize) -> Option<usize> {
    let quote = bytes[i];
    match quote {
        b'\'' | b'"' | b'`' => {
            let mut at = i + 1;
            while at < bytes.len() && bytes[at] != quote {
                at += if bytes[at] == b'\\' { 2 } else { 1 };
            }
            Some(at + 1)
        }
        b'/' if matches!(bytes.get(i + 1), Some(b'/' | b'*')) => Some(skip_trivia(bytes, i)),
        _ => None,
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
        speculative_angles: speculative_angles(bytes),
        angles_in_computed_keys: angles_in_computed_keys(bytes),
    }
}

/// The most `<` after a name (or a number, `)` or `]`) that are open at once inside open
/// computed keys (a computed key being a `[` right after `{`, and what it holds). A `>` closes
/// the last `<` of its bracket (not the `>` of `=>` or `>=`). Strings, templates and comments
/// are skipped.
fn angles_in_computed_keys(bytes: &[u8]) -> usize {
    // Per open bracket: whether it is (inside) a computed key, and its open `<`.
    let mut frames: Vec<(bool, usize)> = Vec::new();
    let mut open = 0usize;
    let mut most = 0usize;
    let mut prev = 0u8;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\'' | b'"' | b'`' | b'/' if let Some(after) = skip_literal(bytes, i) => {
                if b != b'/' {
                    prev = b;
                }
                i = after;
                continue;
            }
            b'(' | b'[' | b'{' => {
                let inside = frames.last().is_some_and(|(key, _)| *key);
                frames.push((inside || (b == b'[' && prev == b'{'), 0));
            }
            b')' | b']' | b'}' => {
                if let Some((key, angles)) = frames.pop() {
                    if key {
                        open -= angles;
                    }
                }
            }
            b'<' if is_ident(prev) || prev == b')' || prev == b']' => {
                if let Some((key, angles)) = frames.last_mut() {
                    if *key {
                        *angles += 1;
                        open += 1;
                        most = most.max(open);
                    }
                }
            }
            b'>' if prev != b'=' && bytes.get(i + 1) != Some(&b'=') => {
                if let Some((key, angles)) = frames.last_mut() {
                    if *key && *angles > 0 {
                        *angles -= 1;
                        open -= 1;
                    }
                }
            }
            _ => {}
        }
        if !b.is_ascii_whitespace() {
            prev = b;
        }
        i += 1;
    }
    most
}

/// The most `<` in one statement that follow what an expression can start after (an opening
/// bracket, a comma, an operator, `=>`, a closing `>`, the start): each is a type assertion or
/// a generic arrow function the parser must try both ways (not after `!`, which is more often
/// a non-null assertion before a comparison). Statements are told apart by `;`,
/// `{` and `}` (an object literal or a block body starts another: it can only under-count).
/// Strings, template literals and comments are skipped; a `<` after a name, a number, `)` or
/// `]` (a comparison, a generic call's type arguments) is not counted.
fn speculative_angles(bytes: &[u8]) -> usize {
    let mut most = 0usize;
    let mut count = 0usize;
    // The last byte of code read: 0 at the start.
    let mut prev = 0u8;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\'' | b'"' | b'`' | b'/' if let Some(after) = skip_literal(bytes, i) => {
                if b != b'/' {
                    prev = b;
                }
                i = after;
                continue;
            }
            b';' | b'{' | b'}' => count = 0,
            b'<' if prev == 0 || b"(,=>:?[&|+-*%^~".contains(&prev) => {
                count += 1;
                most = most.max(count);
            }
            _ => {}
        }
        if !b.is_ascii_whitespace() {
            prev = b;
        }
        i += 1;
    }
    most
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
    fn speculative_angles_are_counted_per_statement_outside_strings() {
        let angles = |program: &str| scan(program).speculative_angles;
        assert_eq!(angles(&"<T><T>(".repeat(8)), 16);
        assert_eq!(
            angles("const id = <T,>(x: T): T => x; const n = <number>v;"),
            1
        );
        assert_eq!(
            angles("f<T>(x); a < b; m.get(k)! < 2; if (a<b && c>d) {}"),
            0
        );
        assert_eq!(angles(&"const f = <T>(x: T) => x;\n".repeat(100)), 1);
        let html = format!("const page = \"{}\";", "<p>(<b>x</b>)</p>".repeat(50));
        assert_eq!(angles(&html), 0);
        let template = format!("const page = `${{a}}{}`;", "><i>".repeat(50));
        assert_eq!(angles(&template), 0);
        assert_eq!(angles("// (<T><T>\n/* (<a><b> */ x"), 0);
    }

    #[test]
    fn angles_open_in_computed_keys_are_counted_while_the_keys_are_open() {
        let keys = |program: &str| scan(program).angles_in_computed_keys;
        assert_eq!(keys(&"{[A<".repeat(9)), 9);
        assert_eq!(keys(&"[{[A< mb <n".repeat(5)), 10);
        assert_eq!(
            keys("const o = { [a < b ? 'x' : 'y']: 1, [k]: f<T>(x) };"),
            1
        );
        assert_eq!(
            keys("const m: Map<string, Array<number>> = new Map(); if (a < b) {}"),
            0
        );
        assert_eq!(keys(&"const o = { [`${a < b}`]: 1 };\n".repeat(20)), 0);
        assert_eq!(keys(&"{[A<B>]: 1}, ".repeat(20)), 1);
        assert_eq!(keys("{[[[[A< mb <n[n| [{[[[[A< mb <n"), 4);
    }

    #[test]
    fn nesting_is_the_deepest_bracket() {
        assert_eq!(scan("f([{ }])").nesting, 3);
        assert_eq!(scan("").nesting, 0);
    }
}

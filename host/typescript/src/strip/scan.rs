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

/// Most `<` where an expression starts (a type assertion `<T>x` or a generic arrow function
/// `<T>(x: T) => …`) open at once: in one statement, counted on through the brackets it
/// encloses and into template substitutions. swc tries each such `<` both ways, and when the
/// tries nest and fail (`<T><T>(<T><T>(…`, also through braces or inside `${…}`) it reparses
/// what follows each: time exponential in their number (a program of 112 characters took a
/// minute). A statement written by anyone has a few; 16 of them cost the parser well under a
/// second whatever they are.
pub const MAX_SPECULATIVE_ANGLES: usize = 16;

/// Most `<` after a name (a comparison, or type arguments swc tries first) that can enclose a
/// point of the program at once: those left open in a bracket when a bracket inside it opens,
/// counted down through the nesting, and those open where the point is. swc tries the text
/// after each as type arguments, and a try that nests inside another multiplies the work:
/// `y <((e=ee(eCCy,yyy` ten times took 26 seconds, `[{[A< mb <n` eight times 48, and a nest of
/// eight within the earlier bound of eight (`2<{[` six times and more, 287 bytes) 1.5 s of a
/// release build: each level costs about four to five times the one inside it. A comparison
/// ends at `&&`, `||`, `??` or `;`, so a long condition's comparisons do not pile up; a nest of
/// six costs the parser about 50 ms at worst (half a second nested in four `<T>(`, the most
/// [`MAX_ANGLE_TRIES`] leaves).
pub const MAX_NESTED_TYPE_ARGUMENT_TRIES: usize = 6;

/// Most `<` tries of both kinds around one point, a `<` after a name counting two: the two
/// kinds nested in each other multiply (`<T><T>(` eight times around `y <((e=ee(eCCy,yyy`
/// eight times ran past five minutes, each bound met).
pub const MAX_ANGLE_TRIES: usize = 16;

/// What the pass found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// Deepest bracket nesting (brackets in strings and comments count too).
    pub nesting: usize,
    /// Pairs of a possible label and an enclosing possible label of the same name.
    pub label_pairs: usize,
    /// The most `<` where an expression starts open at once (strings and comments skipped,
    /// and template text): see [`MAX_SPECULATIVE_ANGLES`].
    pub speculative_angles: usize,
    /// The most `<` after a name open around one point at once: see
    /// [`MAX_NESTED_TYPE_ARGUMENT_TRIES`].
    pub nested_type_argument_tries: usize,
    /// The most of both around one point, a `<` after a name counting two: see
    /// [`MAX_ANGLE_TRIES`].
    pub angle_tries: usize,
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

/// Where a string or comment that starts at `i` ends; `None` when none starts there. Template
/// literals are read by [`template_text`]: their substitutions are code.
fn skip_literal(bytes: &[u8], i: usize) -> Option<usize> {
    let quote = bytes[i];
    match quote {
        b'\'' | b'"' => {
            // A string ends at its quote or, unterminated, at the end of its line, where the
            // parser's lexer ends it too and reads the next line as code: skipping further
            // would hide that code from the counts (a `'` then a line of `b<{[` took seconds).
            // A backslash before a line break continues the string.
            let mut at = i + 1;
            while at < bytes.len() && bytes[at] != quote {
                match bytes[at] {
                    b'\n' | b'\r' => return Some(at),
                    b'\\'
                        if bytes.get(at + 1) == Some(&b'\r')
                            && bytes.get(at + 2) == Some(&b'\n') =>
                    {
                        at += 3;
                    }
                    b'\\' => at += 2,
                    _ => at += 1,
                }
            }
            Some(at + 1)
        }
        b'/' if matches!(bytes.get(i + 1), Some(b'/' | b'*')) => Some(skip_trivia(bytes, i)),
        _ => None,
    }
}

/// Reads a template literal's text from `at` (just after its backtick, or after the `}` that
/// closed a substitution): where the text ends, and whether a substitution `${` starts there
/// (the position is then after the `${`).
fn template_text(bytes: &[u8], mut at: usize) -> (usize, bool) {
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'`' => return (at + 1, false),
            b'$' if bytes.get(at + 1) == Some(&b'{') => return (at + 2, true),
            _ => at += 1,
        }
    }
    (at, false)
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
    let tries = angle_tries(bytes);
    Scan {
        nesting,
        label_pairs: pairs,
        speculative_angles: tries.speculative,
        nested_type_argument_tries: tries.type_arguments,
        angle_tries: tries.weighted,
    }
}

/// The `<` tries open around the points of a program, at most: see [`angle_tries`].
struct AngleTries {
    speculative: usize,
    type_arguments: usize,
    weighted: usize,
}

/// One pass over the `<` the parser may try two ways, counting those that enclose each point:
///
/// - **speculative**: `<` where an expression starts (a type assertion or a generic arrow
///   function): after an opening bracket, a comma, an operator, `=>`, a closing `>`, a `;`, a
///   `}`, the start, a spread, a `!` that is a logical not (not the non-null assertion of
///   `x! < y`), or a keyword that takes an operand (`return`, `typeof`, `await`, …). Counted
///   through the brackets a statement encloses, since a try that starts before a bracket
///   parses what it holds (`<T>(<T>{ <T>f() {} <T>…`); a `;` ends those of its statement, a
///   closing bracket those begun inside it.
/// - **type arguments**: `<` after a name, a number, `)` or `]` (a comparison, or type
///   arguments swc tries first), counted down through the nesting: those open in each
///   enclosing bracket when the next one opened, and those open in the point's own. A `>`
///   closes the last one of its bracket (not the `>` of `=>` or `>=`); `&&`, `||`, `??` and
///   `;` end a bracket's comparisons.
/// - **weighted**: both around one point, a type-arguments try counting two (each multiplies
///   the work by about five, a speculative one by about two).
///
/// Strings and comments are skipped, and template literals but for their substitutions.
fn angle_tries(bytes: &[u8]) -> AngleTries {
    struct Frame {
        /// Speculative `<` open around the bracket when it opened, and since in its statement.
        speculative_base: usize,
        speculative: usize,
        /// Type-argument `<` open around the bracket when it opened, and in it since.
        around: usize,
        open: usize,
        /// A template literal's substitution.
        template: bool,
    }
    let mut frames = vec![Frame {
        speculative_base: 0,
        speculative: 0,
        around: 0,
        open: 0,
        template: false,
    }];
    let mut most = AngleTries {
        speculative: 0,
        type_arguments: 0,
        weighted: 0,
    };
    // The last byte of code read (0 at the start), the one before it, and where the name
    // `prev` ends began.
    let mut prev = 0u8;
    let mut before_prev = 0u8;
    let mut name_start = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // The frame of the point: there is always the outermost one.
        let top = frames.len() - 1;
        match b {
            b'\'' | b'"' | b'/' if let Some(after) = skip_literal(bytes, i) => {
                if b != b'/' {
                    prev = b;
                }
                i = after;
                continue;
            }
            b'`' | b'(' | b'[' | b'{' => {
                let template = b == b'`';
                if template {
                    let (after, substitution) = template_text(bytes, i + 1);
                    i = after;
                    before_prev = prev;
                    prev = if substitution { b'{' } else { b'`' };
                    if !substitution {
                        continue;
                    }
                }
                let frame = &frames[top];
                let opened = Frame {
                    speculative_base: frame.speculative,
                    speculative: frame.speculative,
                    around: frame.around + frame.open,
                    open: 0,
                    template,
                };
                frames.push(opened);
                if template {
                    continue;
                }
            }
            b')' | b']' | b'}' if top > 0 => {
                if let Some(frame) = frames.pop() {
                    if frame.template && b == b'}' {
                        // Back in the template's text, until its next substitution or its end.
                        let (after, substitution) = template_text(bytes, i + 1);
                        if substitution {
                            frames.push(Frame {
                                speculative: frame.speculative_base,
                                open: 0,
                                ..frame
                            });
                        }
                        before_prev = prev;
                        prev = if substitution { b'{' } else { b'`' };
                        i = after;
                        continue;
                    }
                }
            }
            b'<' => {
                let speculative = prev == 0
                    || b"(,=>:?[&|+-*%^~{;}.".contains(&prev)
                    || (prev == b'!' && !ends_operand(before_prev))
                    || (is_ident(prev) && takes_operand(&bytes[name_start..i]));
                let frame = &mut frames[top];
                if speculative {
                    frame.speculative += 1;
                } else if is_ident(prev) || prev == b')' || prev == b']' {
                    frame.open += 1;
                }
                let type_arguments = frame.around + frame.open;
                most.speculative = most.speculative.max(frame.speculative);
                most.type_arguments = most.type_arguments.max(type_arguments);
                most.weighted = most.weighted.max(frame.speculative + 2 * type_arguments);
            }
            b'>' if prev != b'=' && bytes.get(i + 1) != Some(&b'=') => {
                let frame = &mut frames[top];
                frame.open = frame.open.saturating_sub(1);
            }
            b';' => {
                let frame = &mut frames[top];
                frame.speculative = frame.speculative_base;
                frame.open = 0;
            }
            b'&' | b'|' | b'?' if bytes.get(i + 1) == Some(&b) => frames[top].open = 0,
            _ => {}
        }
        if is_ident(b) && !is_ident(prev) {
            name_start = i;
        }
        if !b.is_ascii_whitespace() {
            before_prev = prev;
            prev = b;
        }
        i += 1;
    }
    most
}

/// Whether `b`, the last byte of code before a `!`, ends an operand (the `!` is then a non-null
/// assertion, `x! < y`, rather than a logical not).
fn ends_operand(b: u8) -> bool {
    is_ident(b) || b == b')' || b == b']'
}

/// Whether `word` (a name and what follows it up to a `<`) is a keyword an expression follows.
fn takes_operand(word: &[u8]) -> bool {
    let end = word
        .iter()
        .position(|b| !is_ident(*b))
        .unwrap_or(word.len());
    matches!(
        &word[..end],
        b"return"
            | b"typeof"
            | b"void"
            | b"delete"
            | b"await"
            | b"yield"
            | b"throw"
            | b"case"
            | b"new"
            | b"in"
            | b"of"
            | b"instanceof"
            | b"else"
            | b"do"
            | b"extends"
    )
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
    fn speculative_angles_are_counted_through_the_brackets_their_tries_enclose() {
        let angles = |program: &str| scan(program).speculative_angles;
        // Braces inside a try do not end it: the shape the fuzzer found took 39 s.
        assert_eq!(
            angles("<T>(<T>{<T><T>function f() { return true }<T>(<T>"),
            6
        );
        assert_eq!(
            angles("<T>(x) => { return <T>(y) => { return <T>z; }; };"),
            3
        );
        // Keywords that take an operand start an expression.
        assert_eq!(angles("typeof <T> void <T> await <T>(x)"), 3);
        assert_eq!(angles("return <T>x; throw <T>y;"), 1);
        // A statement of a block ends its tries; a closed bracket ends those begun inside it.
        assert_eq!(
            angles(&format!(
                "function g() {{ {} }}",
                "const f = <T>(x: T) => x; ".repeat(40)
            )),
            1
        );
        assert_eq!(angles(&"f(<T>a, <U>b); ".repeat(20)), 2);
        assert_eq!(angles("[<T>a][<T>b](<T>c)"), 1);
        // Names that only end in a keyword are names.
        assert_eq!(angles("areturn < b; xtypeof < y; newValue < 3"), 0);
        // A template's substitutions are code; its text is not.
        assert_eq!(angles(&format!("`${{{}}}`", "<T><T>(".repeat(8))), 16);
        assert_eq!(angles("`a ${ `b ${<T>x} <p>(<b>` } c <i>(` + <U>y"), 1);
        assert_eq!(angles("`${a}<T>(${<T>b}<U>(${<T>c}`"), 1);
        // A logical not starts an expression; a non-null assertion ends one.
        assert_eq!(angles("!<T>!<T>(x); m.get(k)! < 2; a! < b"), 2);
        assert_eq!(angles("f(...<T>a, ...<U>b)"), 2);
    }

    #[test]
    fn angles_open_around_nested_brackets_are_counted_through_the_nesting() {
        let tries = |program: &str| scan(program).nested_type_argument_tries;
        assert_eq!(tries(&"{[A<".repeat(9)), 9);
        assert_eq!(tries(&"[{[A< mb <n".repeat(5)), 10);
        // A `<` after a number may be tried as type arguments too (`2<{[`, found by fuzzing).
        assert_eq!(tries(&"2<{[".repeat(7)), 7);
        // A string left open at the end of its line hides nothing after it.
        assert_eq!(tries(&format!("b<{{['\n{}", "b<{[".repeat(7))), 8);
        assert_eq!(tries("const s = 'a < b \\\n c < d'; f(x < y);"), 1);
        // The shape strip_differential found: one `<` per level, inside parentheses.
        assert_eq!(tries(&"y <((e=ee(eCCy,yyy".repeat(10)), 10);
        assert_eq!(
            tries("const o = { [a < b ? 'x' : 'y']: 1, [k]: f<T>(x) };"),
            1
        );
        // Type arguments inside type arguments nest too.
        assert_eq!(
            tries("const m: Map<string, Array<number>> = new Map(); if (a < b) {}"),
            2
        );
        assert_eq!(tries(&"const o = { [`${a < b}`]: 1 };\n".repeat(20)), 1);
        assert_eq!(tries(&"{[A<B>]: 1}, ".repeat(20)), 1);
        assert_eq!(tries("{[[[[A< mb <n[n| [{[[[[A< mb <n"), 4);
        assert_eq!(tries(&format!("`${{{}}}`", "{[A<".repeat(9))), 9);
        assert_eq!(tries("`{[A< ${x} {[B<`"), 0);
        // A long condition's comparisons end at its operators; closed brackets end theirs.
        assert_eq!(
            tries("if (a < b && c < d || e < f && (g < h || (i < j))) { k(l < m); }"),
            1
        );
        assert_eq!(
            tries("for (let i = 0; i < n; i++) { if (i < m) f(i < 2); }"),
            1
        );
        assert_eq!(
            tries("const f: Array<Record<string, Foo<(x: number) => void>>> = [];"),
            3
        );
    }

    #[test]
    fn nesting_is_the_deepest_bracket() {
        assert_eq!(scan("f([{ }])").nesting, 3);
        assert_eq!(scan("").nesting, 0);
    }
}

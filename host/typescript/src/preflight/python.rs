//! Preflight for Python programs: the same checks as for TypeScript, on the calls a Python
//! program writes as `tools.name(…)` or `tools["name"](…)`.
//!
//! Python is parsed in the guest (Monty), not here, so this reads the program as tokens, which
//! is all a call site takes: a namespace's name, a member, and an argument list. Each argument
//! written as a literal (a dict, a list or tuple, a string, a number, `True`, `False`, `None`)
//! is turned into the JavaScript literal it stands for, placed at the Python text, and checked
//! by the same argument checker as TypeScript's (`arguments.rs`); anything else in it (a
//! name, a call, an f-string, an operator) is a value the checker cannot know, so it passes.
//! Keyword arguments are the object they become at run time (`tools.search(query="x")`), and
//! no argument is `{}`, as the guest sends them.
//!
//! A namespace whose name the program uses any other way (`t = tools`, a parameter named
//! `tools`, `tools = …`) is not checked at all: its calls may not be the namespace's.

use swc_atoms::Atom;
use swc_common::{BytePos, Span};
use swc_ecma_ast::{
    ArrayLit, Bool, Expr, ExprOrSpread, Ident, KeyValueProp, Lit, Null, Number, ObjectLit, Prop,
    PropName, PropOrSpread, SpreadElement, Str,
};

use super::{arguments, Namespace, Problem};

/// Deepest literal nesting read; a deeper literal is a value the checker cannot know.
const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    Name(&'a str),
    /// A string literal; its value, when it is a plain (not f-, not bytes) string whose
    /// escapes are all understood.
    Str(Option<String>),
    Number(Option<f64>),
    Op(&'a str),
}

#[derive(Debug, Clone)]
struct Spanned<'a> {
    token: Token<'a>,
    start: usize,
    end: usize,
}

/// Every problem in `program`'s calls, in source order.
pub fn check(program: &str, namespaces: &[Namespace]) -> Vec<Problem> {
    let tokens = tokenize(program);
    let mut problems = Vec::new();
    for ns in namespaces {
        if !trusted(&tokens, &ns.global) {
            continue;
        }
        let mut i = 0;
        while i < tokens.len() {
            if let Some((name, name_span, open)) = call_at(&tokens, i, &ns.global) {
                check_call(program, ns, &tokens, name, name_span, open, &mut problems);
                i = open;
            }
            i += 1;
        }
    }
    problems.sort_by_key(|p| (p.line, p.column));
    problems
}

/// The name the program's last top-level statement assigns, and its line, when that statement
/// is an assignment (`total = …`, `total += …`, `total: int = …`): a program that ends so
/// returns nothing, though it most likely meant to return that name.
pub fn assigned_last(program: &str) -> Option<(u32, String)> {
    let tokens = tokenize(program);
    let mut depth = 0usize;
    let mut last: Option<usize> = None;
    for (i, token) in tokens.iter().enumerate() {
        if depth == 0 {
            let line_start = program[..token.start].rfind('\n').map_or(0, |n| n + 1);
            let at_line_start = line_start == token.start && !continued(program, line_start);
            let after_semicolon = i > 0
                && tokens[i - 1].token == Token::Op(";")
                && last.is_some_and(|l| starts_at_column_0(program, &tokens, l));
            if at_line_start || after_semicolon {
                last = Some(i);
            }
        }
        match token.token {
            Token::Op("(") | Token::Op("[") | Token::Op("{") => depth += 1,
            Token::Op(")") | Token::Op("]") | Token::Op("}") => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let i = last?;
    let Token::Name(name) = tokens[i].token else {
        return None;
    };
    let op = |k: usize| match tokens.get(i + k).map(|t| &t.token) {
        Some(Token::Op(op)) => Some(*op),
        _ => None,
    };
    let assigns = match (op(1), op(2)) {
        (Some("="), next) => next != Some("="),
        (Some(":"), _) => true,
        (Some("+" | "-" | "*" | "/" | "%" | "&" | "|" | "^" | "@" | "**"), Some("=")) => true,
        _ => false,
    };
    if !assigns || KEYWORDS.contains(&name) {
        return None;
    }
    let (line, _) = position(program, tokens[i].start);
    Some((line, name.to_owned()))
}

/// Words that begin a statement other than an assignment.
const KEYWORDS: &[&str] = &[
    "if", "elif", "else", "for", "while", "with", "try", "except", "finally", "def", "class",
    "return", "lambda", "match", "case", "async", "await", "import", "from", "global", "nonlocal",
    "del", "pass", "raise", "assert",
];

/// Whether the line before the one at `line_start` ends in a backslash, continuing onto it.
fn continued(program: &str, line_start: usize) -> bool {
    line_start >= 2 && program[..line_start - 1].ends_with('\\')
}

fn starts_at_column_0(program: &str, tokens: &[Spanned<'_>], i: usize) -> bool {
    let start = tokens[i].start;
    start == 0 || program.as_bytes().get(start - 1) == Some(&b'\n')
}

/// Whether every use of `global` is a member access (`global.x`, `global[...]`).
fn trusted(tokens: &[Spanned<'_>], global: &str) -> bool {
    tokens.iter().enumerate().all(|(i, t)| {
        if t.token != Token::Name(global) {
            return true;
        }
        let attribute_of_something = i > 0 && tokens[i - 1].token == Token::Op(".");
        let member = matches!(
            tokens.get(i + 1).map(|t| &t.token),
            Some(Token::Op(".")) | Some(Token::Op("["))
        );
        attribute_of_something || member
    })
}

/// A call of a member of `global` starting at token `i`: the member's name, where it is
/// written, and the index of the call's `(`.
fn call_at(
    tokens: &[Spanned<'_>],
    i: usize,
    global: &str,
) -> Option<(String, (usize, usize), usize)> {
    if tokens[i].token != Token::Name(global) {
        return None;
    }
    if i > 0 && tokens[i - 1].token == Token::Op(".") {
        return None;
    }
    match tokens.get(i + 1)?.token {
        Token::Op(".") => {
            let member = tokens.get(i + 2)?;
            let Token::Name(name) = member.token else {
                return None;
            };
            (tokens.get(i + 3)?.token == Token::Op("("))
                .then(|| (name.to_owned(), (member.start, member.end), i + 3))
        }
        Token::Op("[") => {
            let member = tokens.get(i + 2)?;
            let Token::Str(Some(name)) = &member.token else {
                return None;
            };
            (tokens.get(i + 3)?.token == Token::Op("]")
                && tokens.get(i + 4)?.token == Token::Op("("))
            .then(|| (name.clone(), (member.start, member.end), i + 4))
        }
        _ => None,
    }
}

fn check_call(
    program: &str,
    ns: &Namespace,
    tokens: &[Spanned<'_>],
    name: String,
    name_span: (usize, usize),
    open: usize,
    problems: &mut Vec<Problem>,
) {
    let mut push = |at: usize, message: String| {
        let (line, column) = position(program, at);
        problems.push(Problem {
            line,
            column,
            message,
        });
    };
    if !ns.members.contains(&name) {
        push(
            name_span.0,
            crate::explain::describe_unknown(&ns.global, &name, &ns.members),
        );
        return;
    }
    let (schema, check) = (ns.schemas.get(&name), ns.urls.get(&name));
    if schema.is_none() && check.is_none() {
        return;
    }
    let Some(argument) = Reader::new(tokens, open + 1).arguments(name_span) else {
        return;
    };
    if let Some((span, reason)) = check.and_then(|c| super::refused_url(&argument, false, c)) {
        push((span.lo.0 as usize).saturating_sub(1), reason);
    }
    let Some(schema) = schema else {
        return;
    };
    let mut findings = Vec::new();
    arguments::check(&argument, schema.json(), &mut findings);
    for finding in findings {
        let at = (finding.span.lo.0 as usize).saturating_sub(1);
        push(
            at,
            format!("{name}: invalid arguments: {}", finding.message),
        );
    }
}

/// 1-based line and column (in characters) of byte `at`.
fn position(program: &str, at: usize) -> (u32, u32) {
    let before = program.get(..at).unwrap_or(program);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |n| n + 1);
    let column = before[line_start..].chars().count() + 1;
    (line as u32, column as u32)
}

/// A span at bytes `start..end` of the Python text (swc's positions start at 1).
fn span(start: usize, end: usize) -> Span {
    Span::new(BytePos(start as u32 + 1), BytePos(end as u32 + 1))
}

/// Reads argument lists and literals from the tokens, as the checker's JavaScript literals.
struct Reader<'t, 'a> {
    tokens: &'t [Spanned<'a>],
    at: usize,
}

impl<'t, 'a> Reader<'t, 'a> {
    fn new(tokens: &'t [Spanned<'a>], at: usize) -> Self {
        Self { tokens, at }
    }

    fn peek(&self) -> Option<&'t Spanned<'a>> {
        self.tokens.get(self.at)
    }

    fn peek_op(&self, op: &str) -> bool {
        self.peek().is_some_and(|t| t.token == Token::Op(op))
    }

    /// The call's argument as the guest sends it: the one positional argument, the keyword
    /// arguments as an object, or `{}`. `None` when the call's shape is another (several
    /// positional arguments, `*args`): the guest's own error says what is wrong.
    fn arguments(mut self, name_span: (usize, usize)) -> Option<Expr> {
        let mut positional = Vec::new();
        let mut keywords = Vec::new();
        loop {
            if self.peek_op(")") || self.peek().is_none() {
                break;
            }
            let start = self.peek()?.start;
            if self.peek_op("*") {
                return None;
            }
            if self.peek_op("**") {
                self.at += 1;
                let expr = self.expression(0);
                keywords.push(PropOrSpread::Spread(SpreadElement {
                    dot3_token: span(start, start + 2),
                    expr: Box::new(expr),
                }));
            } else if matches!(self.peek()?.token, Token::Name(_))
                && self
                    .tokens
                    .get(self.at + 1)
                    .is_some_and(|t| t.token == Token::Op("="))
            {
                let Token::Name(key) = self.peek()?.token else {
                    return None;
                };
                let key_token = self.peek()?;
                self.at += 2;
                let value = self.expression(0);
                keywords.push(PropOrSpread::Prop(Box::new(Prop::KeyValue(KeyValueProp {
                    key: PropName::Str(string(key, key_token.start, key_token.end)),
                    value: Box::new(value),
                }))));
            } else {
                positional.push(self.expression(0));
            }
            if self.peek_op(",") {
                self.at += 1;
            } else {
                break;
            }
        }
        match (positional.len(), keywords.is_empty()) {
            (0, _) => Some(Expr::Object(ObjectLit {
                span: span(name_span.0, name_span.1),
                props: keywords,
            })),
            (1, true) => positional.pop(),
            _ => None,
        }
    }

    /// One expression up to the next `,`, `:` or closing bracket at its own depth: the literal
    /// it is, or an unknown value.
    fn expression(&mut self, depth: usize) -> Expr {
        let start = self.at;
        let literal = if depth < MAX_DEPTH {
            self.literal(depth)
        } else {
            None
        };
        match literal {
            Some(expr) if self.at_end_of_expression() => expr,
            _ => {
                self.at = start;
                self.skip_expression();
                let (from, to) = self.extent(start);
                unknown(from, to)
            }
        }
    }

    fn at_end_of_expression(&self) -> bool {
        match self.peek() {
            None => true,
            Some(t) => matches!(
                t.token,
                Token::Op(",") | Token::Op(":") | Token::Op(")") | Token::Op("]") | Token::Op("}")
            ),
        }
    }

    /// Moves past one expression: to the next `,`, `:` or closing bracket outside brackets
    /// opened within it.
    fn skip_expression(&mut self) {
        let mut depth = 0usize;
        while let Some(t) = self.peek() {
            match t.token {
                Token::Op("(") | Token::Op("[") | Token::Op("{") => depth += 1,
                Token::Op(")") | Token::Op("]") | Token::Op("}") => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                }
                // A lambda's or a slice's colon is inside the expression only within brackets,
                // where it is skipped with them; at this depth it ends a dict key.
                Token::Op(",") | Token::Op(":") if depth == 0 => return,
                _ => {}
            }
            self.at += 1;
        }
    }

    /// Byte range from token `start` to the last token read.
    fn extent(&self, start: usize) -> (usize, usize) {
        let from = self.tokens.get(start).map_or(0, |t| t.start);
        let to = self
            .at
            .checked_sub(1)
            .and_then(|i| self.tokens.get(i))
            .map_or(from, |t| t.end.max(from));
        (from, to)
    }

    fn literal(&mut self, depth: usize) -> Option<Expr> {
        let first = self.peek()?;
        let start = first.start;
        match &first.token {
            Token::Str(_) => {
                // Adjacent literals are one string.
                let mut value = Some(String::new());
                let mut end = start;
                while let Some(Spanned {
                    token: Token::Str(part),
                    end: part_end,
                    ..
                }) = self.peek()
                {
                    value = value.zip(part.as_ref()).map(|(mut v, p)| {
                        v.push_str(p);
                        v
                    });
                    end = *part_end;
                    self.at += 1;
                }
                value.map(|v| Expr::Lit(Lit::Str(string(&v, start, end))))
            }
            Token::Number(n) => {
                let value = (*n)?;
                self.at += 1;
                Some(number(value, start, first.end))
            }
            Token::Op("-") | Token::Op("+") => {
                let negative = first.token == Token::Op("-");
                let next = self.tokens.get(self.at + 1)?;
                let Token::Number(Some(n)) = next.token else {
                    return None;
                };
                self.at += 2;
                Some(number(if negative { -n } else { n }, start, next.end))
            }
            Token::Name("True") | Token::Name("False") => {
                self.at += 1;
                Some(Expr::Lit(Lit::Bool(Bool {
                    span: span(start, first.end),
                    value: first.token == Token::Name("True"),
                })))
            }
            Token::Name("None") => {
                self.at += 1;
                Some(Expr::Lit(Lit::Null(Null {
                    span: span(start, first.end),
                })))
            }
            Token::Op("[") => {
                self.at += 1;
                let elems = self.sequence("]", depth)?;
                Some(array(elems, start, self.extent(self.at - 1).1))
            }
            Token::Op("(") => {
                self.at += 1;
                if self.peek_op(")") {
                    self.at += 1;
                    return Some(array(Vec::new(), start, self.extent(self.at - 1).1));
                }
                let inner = self.expression(depth + 1);
                if self.peek_op(")") {
                    // Parentheses around one value.
                    self.at += 1;
                    return Some(inner);
                }
                if !self.peek_op(",") {
                    return None;
                }
                self.at += 1;
                let mut elems = vec![inner];
                elems.extend(self.sequence(")", depth)?);
                Some(array(elems, start, self.extent(self.at - 1).1))
            }
            Token::Op("{") => {
                self.at += 1;
                self.dict(start, depth)
            }
            _ => None,
        }
    }

    /// Items up to `close`, which is consumed; `None` for a comprehension or a starred item.
    fn sequence(&mut self, close: &str, depth: usize) -> Option<Vec<Expr>> {
        let mut items = Vec::new();
        loop {
            if self.peek_op(close) {
                self.at += 1;
                return Some(items);
            }
            if self.peek_op("*") {
                return None;
            }
            items.push(self.expression(depth + 1));
            if self.peek_op(",") {
                self.at += 1;
            } else if !self.peek_op(close) {
                // `for` of a comprehension, or a stray `:`.
                return None;
            }
        }
    }

    /// A dict display after its `{`; `None` for a set or a comprehension.
    fn dict(&mut self, start: usize, depth: usize) -> Option<Expr> {
        let mut props = Vec::new();
        loop {
            if self.peek_op("}") {
                self.at += 1;
                let end = self.extent(self.at - 1).1;
                return Some(Expr::Object(ObjectLit {
                    span: span(start, end),
                    props,
                }));
            }
            if self.peek_op("**") {
                let star = self.peek()?.start;
                self.at += 1;
                let expr = self.expression(depth + 1);
                props.push(PropOrSpread::Spread(SpreadElement {
                    dot3_token: span(star, star + 2),
                    expr: Box::new(expr),
                }));
            } else {
                let key_start = self.at;
                let key = self.expression(depth + 1);
                if !self.peek_op(":") {
                    return None;
                }
                self.at += 1;
                let value = self.expression(depth + 1);
                let key = match key {
                    // A key that is not a string literal is a key the checker cannot know: a
                    // spread of an unknown value has the same effect on what it checks.
                    Expr::Lit(Lit::Str(s)) => PropName::Str(s),
                    _ => {
                        let (from, to) = self.extent(key_start);
                        props.push(PropOrSpread::Spread(SpreadElement {
                            dot3_token: span(from, to),
                            expr: Box::new(unknown(from, to)),
                        }));
                        if self.peek_op(",") {
                            self.at += 1;
                        }
                        continue;
                    }
                };
                props.push(PropOrSpread::Prop(Box::new(Prop::KeyValue(KeyValueProp {
                    key,
                    value: Box::new(value),
                }))));
            }
            if self.peek_op(",") {
                self.at += 1;
            } else if !self.peek_op("}") {
                return None;
            }
        }
    }
}

fn string(value: &str, start: usize, end: usize) -> Str {
    Str {
        span: span(start, end),
        value: value.into(),
        raw: None,
    }
}

fn number(value: f64, start: usize, end: usize) -> Expr {
    Expr::Lit(Lit::Num(Number {
        span: span(start, end),
        value,
        raw: None,
    }))
}

fn array(items: Vec<Expr>, start: usize, end: usize) -> Expr {
    Expr::Array(ArrayLit {
        span: span(start, end),
        elems: items
            .into_iter()
            .map(|expr| {
                Some(ExprOrSpread {
                    spread: None,
                    expr: Box::new(expr),
                })
            })
            .collect(),
    })
}

/// A value the checker cannot know (a name stands for it, as for any variable).
fn unknown(start: usize, end: usize) -> Expr {
    Expr::Ident(Ident::new_no_ctxt(Atom::from("value"), span(start, end)))
}

/// The program's tokens: names, string and number literals, and operators, with their byte
/// ranges; comments and line structure are dropped.
fn tokenize(program: &str) -> Vec<Spanned<'_>> {
    let bytes = program.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_whitespace() || c == b'\\' {
            i += 1;
            continue;
        }
        if let Some((prefix_len, quote_at)) = string_start(bytes, i) {
            let prefix = &program[i..i + prefix_len];
            let (end, body) = string_end(program, quote_at);
            let plain = !prefix.contains(['f', 'F', 'b', 'B']);
            let raw = prefix.contains(['r', 'R']);
            let value = if plain {
                body.and_then(|b| if raw { Some(b.to_owned()) } else { unescape(b) })
            } else {
                None
            };
            tokens.push(Spanned {
                token: Token::Str(value),
                start,
                end,
            });
            i = end;
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric()
                    || bytes[i] == b'_'
                    || bytes[i] == b'.'
                    || ((bytes[i] == b'+' || bytes[i] == b'-')
                        && matches!(bytes[i - 1], b'e' | b'E')
                        && !program[start..i].starts_with("0x")
                        && !program[start..i].starts_with("0X")))
            {
                i += 1;
            }
            tokens.push(Spanned {
                token: Token::Number(parse_number(&program[start..i])),
                start,
                end: i,
            });
            continue;
        }
        if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 {
            while i < bytes.len()
                && (bytes[i] == b'_' || bytes[i].is_ascii_alphanumeric() || bytes[i] >= 0x80)
            {
                i += 1;
            }
            tokens.push(Spanned {
                token: Token::Name(&program[start..i]),
                start,
                end: i,
            });
            continue;
        }
        let len = if program[i..].starts_with("**") {
            2
        } else {
            // A character, however many bytes it takes.
            program[i..].chars().next().map_or(1, char::len_utf8)
        };
        tokens.push(Spanned {
            token: Token::Op(&program[i..i + len]),
            start,
            end: i + len,
        });
        i += len;
    }
    tokens
}

/// Where a string literal starts at `i`: its prefix's length and where its quote is.
fn string_start(bytes: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    while j < bytes.len()
        && j - i < 2
        && matches!(
            bytes[j],
            b'r' | b'R' | b'b' | b'B' | b'f' | b'F' | b'u' | b'U'
        )
    {
        j += 1;
    }
    if matches!(bytes.get(j), Some(b'\'') | Some(b'"')) {
        // A prefix is a prefix only when nothing of a name comes before it.
        if j > i && i > 0 && (bytes[i - 1] == b'_' || bytes[i - 1].is_ascii_alphanumeric()) {
            return None;
        }
        return Some((j - i, j));
    }
    None
}

/// The end of the string literal whose quote is at `at`, and its body when it is closed.
fn string_end(program: &str, at: usize) -> (usize, Option<&str>) {
    let bytes = program.as_bytes();
    let quote = bytes[at];
    let triple = bytes.get(at + 1) == Some(&quote) && bytes.get(at + 2) == Some(&quote);
    let open = if triple { 3 } else { 1 };
    let mut i = at + open;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' if !triple => return (i, None),
            c if c == quote => {
                if !triple {
                    return (i + 1, program.get(at + 1..i));
                }
                if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                    return (i + 3, program.get(at + 3..i));
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    (bytes.len(), None)
}

/// A string body's value; `None` for an escape not read here (`\N{…}`, octal).
fn unescape(body: &str) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '\n' => {}
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            '0' => out.push('\0'),
            'x' => out.push(hex(&mut chars, 2)?),
            'u' => out.push(hex(&mut chars, 4)?),
            'U' => out.push(hex(&mut chars, 8)?),
            _ => return None,
        }
    }
    Some(out)
}

fn hex(chars: &mut std::str::Chars<'_>, digits: usize) -> Option<char> {
    let text: String = chars.take(digits).collect();
    if text.len() != digits {
        return None;
    }
    char::from_u32(u32::from_str_radix(&text, 16).ok()?)
}

/// A number literal's value; `None` for an imaginary number or anything not read here.
fn parse_number(text: &str) -> Option<f64> {
    let text = text.replace('_', "");
    let lower = text.to_ascii_lowercase();
    let radix = |prefix: &str, radix: u32| {
        lower
            .strip_prefix(prefix)
            .and_then(|digits| u64::from_str_radix(digits, radix).ok())
            .map(|n| n as f64)
    };
    if lower.starts_with("0x") {
        return radix("0x", 16);
    }
    if lower.starts_with("0o") {
        return radix("0o", 8);
    }
    if lower.starts_with("0b") {
        return radix("0b", 2);
    }
    if lower.ends_with('j') {
        return None;
    }
    text.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use codemode_runtime::tools::Schema;
    use serde_json::json;

    fn tools() -> Vec<Namespace> {
        let schema = Schema::foreign(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "mode": {"enum": ["fast", "slow"]},
                "limit": {"type": "integer"}
            },
            "required": ["path"],
            "additionalProperties": false
        }))
        .expect("a schema");
        vec![Namespace {
            global: "tools".into(),
            members: vec!["read".into(), "my-tool".into()],
            schemas: [("read".to_owned(), schema)].into(),
            ..Namespace::default()
        }]
    }

    fn messages(program: &str) -> Vec<String> {
        check(program, &tools())
            .into_iter()
            .map(|p| format!("{}:{} {}", p.line, p.column, p.message))
            .collect()
    }

    #[test]
    fn unknown_tools_and_literal_arguments_the_schema_refuses_are_found() {
        assert_eq!(
            messages("x = 1\nawait tools.raed({'path': 'a'})"),
            [r#"2:13 unknown tool "raed"; did you mean "read"? Known: read, my-tool."#]
        );
        let found =
            messages("r = await tools.read({'path': 1, 'mode': 'quick'})\nawait tools['nope']({})");
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            found[0].starts_with("1:31 read: invalid arguments: \"path\" must be a string"),
            "{found:?}"
        );
        assert!(
            found[1].starts_with("1:42 read: invalid arguments:"),
            "{found:?}"
        );
        assert!(found[2].starts_with("2:13 unknown tool"), "{found:?}");
        // Keyword arguments are the object; no argument is `{}`, which lacks "path".
        assert_eq!(
            messages("await tools.read(path='a', limit=2)"),
            Vec::<String>::new()
        );
        let none = messages("await tools.read()");
        assert_eq!(none.len(), 1, "{none:?}");
        assert!(none[0].contains("path"), "{none:?}");
        assert_eq!(messages("await tools.read(limit='x', path='a')").len(), 1);
    }

    #[test]
    fn what_depends_on_the_programs_data_passes() {
        for program in [
            "await tools.read({'path': p})",
            "await tools.read({'path': f'{d}/x'})",
            "await tools.read({**base, 'mode': 'fast'})",
            "await tools.read({'path': 'a' + b})",
            "await tools.read(args)",
            "await tools.read({k: 'a' for k in ks})",
            "await tools['my-tool']({'anything': [1, 2, (3, 4)]})",
            "# await tools.nope({})\ns = 'tools.nope()'\n'''await tools.nope({})'''",
            "x.tools.nope()",
        ] {
            assert_eq!(messages(program), Vec::<String>::new(), "{program}");
        }
    }

    #[test]
    fn a_namespace_used_any_other_way_is_not_checked() {
        for program in [
            "tools = other\nawait tools.nope({})",
            "def f(tools):\n    return tools.nope({})",
            "t = tools\nawait tools.nope({})",
        ] {
            assert_eq!(messages(program), Vec::<String>::new(), "{program}");
        }
    }

    #[test]
    fn a_last_top_level_assignment_is_found() {
        assert_eq!(
            assigned_last("x = 1\ntotal = x + 1\n"),
            Some((2, "total".into()))
        );
        assert_eq!(assigned_last("t = 0\nt += 5"), Some((2, "t".into())));
        assert_eq!(
            assigned_last("n: int = 3\n# done\n\n"),
            Some((1, "n".into()))
        );
        assert_eq!(
            assigned_last("rows = [\n    1,\n    2,\n]\n"),
            Some((1, "rows".into()))
        );
        assert_eq!(assigned_last("a = 1; b = 2"), Some((1, "b".into())));
        for program in [
            "x = 1\nx",
            "x = 1\nprint(x)",
            "x = 1\nx == 2",
            "for i in range(3):\n    total = i",
            "def f():\n    y = 1",
            "x = 1\nreturn x",
            "",
            "s = '''\ny = 2\n'''\ns",
        ] {
            assert_eq!(assigned_last(program), None, "{program}");
        }
    }

    #[test]
    fn strings_and_numbers_are_read_as_python_writes_them() {
        let tokens = tokenize(r#"'a\n' "b" r'\d' b'x' f'{y}' 0x1F 1_000 2.5e-3 3j"#);
        let kinds: Vec<_> = tokens.into_iter().map(|t| t.token).collect();
        assert_eq!(
            kinds,
            [
                Token::Str(Some("a\n".into())),
                Token::Str(Some("b".into())),
                Token::Str(Some("\\d".into())),
                Token::Str(None),
                Token::Str(None),
                Token::Number(Some(31.0)),
                Token::Number(Some(1000.0)),
                Token::Number(Some(0.0025)),
                Token::Number(None),
            ]
        );
    }
}

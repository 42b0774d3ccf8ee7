//! The program as swc parses it: the body of the async function it runs as, with a way from
//! spans back to the lines and columns the model wrote. One parse serves stripping (`strip`),
//! the checks before a run (`preflight`, the completion value); a failed run's explanation
//! parses the program again.

use swc_common::{BytePos, Span, Spanned};
use swc_ecma_ast::{Decl, Expr, Stmt};
use swc_ecma_parser::{Parser, StringInput, Syntax, TsSyntax};

use crate::strip::{PREFIX, SUFFIX};

/// Spans start at 1: swc treats position 0 as "no position".
pub(crate) const BASE: u32 = 1;

/// Why a program does not parse, in swc's words, and where (a byte offset in the wrapped
/// text, when swc says).
#[derive(Debug, Clone)]
pub struct SyntaxError {
    /// swc's message.
    pub message: String,
    /// Where, as a byte offset in the wrapped text.
    pub at: Option<usize>,
}

/// A parsed program: its statements and the wrapped text their spans index.
pub struct Source {
    /// The wrapped text the spans index (after [`BASE`]).
    wrapped: String,
    /// The program's top-level statements.
    pub(crate) body: Vec<Stmt>,
    /// Byte offsets where the program's lines start (see [`line_starts`]).
    starts: Vec<usize>,
}

impl Source {
    /// Parses `program` as a function body. Any error swc reports refuses it, also one it
    /// could recover from: the first is returned.
    pub fn parse(program: &str) -> Result<Self, SyntaxError> {
        let wrapped = format!("{PREFIX}{program}{SUFFIX}");
        let too_long = || SyntaxError {
            message: "program is too long to parse".into(),
            at: None,
        };
        let end = BytePos(BASE + u32::try_from(wrapped.len()).map_err(|_| too_long())?);
        let input = StringInput::new(&wrapped, BytePos(BASE), end);
        let syntax = Syntax::Typescript(TsSyntax::default());
        let mut parser = Parser::new(syntax, input, None);
        let parsed = parser.parse_script();
        let mut errors = parser.take_errors();
        let script = match parsed {
            Ok(script) if errors.is_empty() => script,
            Ok(_) => return Err(syntax_error(errors.swap_remove(0))),
            Err(error) => return Err(syntax_error(error)),
        };
        // A program with a `}` too many closes the function it is the body of early, and what
        // follows would be neither stripped nor checked: refused at that `}`.
        let Some(Stmt::Decl(Decl::Fn(wrapper))) = script.body.into_iter().next() else {
            return Err(SyntaxError {
                message: "the program does not parse as a function body".into(),
                at: None,
            });
        };
        let closing = (wrapper.function.span.hi.0 as usize).checked_sub(BASE as usize + 1);
        let body = match wrapper.function.body {
            Some(body) if closing == Some(wrapped.len() - 1) => body.stmts,
            _ => {
                return Err(SyntaxError {
                    message: "the program must be the body of one function: this `}` closes the function it is wrapped in".into(),
                    at: closing,
                })
            }
        };
        let starts = line_starts(program_of(&wrapped));
        Ok(Self {
            wrapped,
            body,
            starts,
        })
    }

    /// The wrapped text the spans index (from `BASE`).
    pub fn wrapped(&self) -> &str {
        &self.wrapped
    }

    /// The program as written.
    pub fn program(&self) -> &str {
        program_of(&self.wrapped)
    }

    /// The byte offset in the wrapped text of a 1-based line and column of the program
    /// (columns count characters; lines end as Boa's do, see `line_starts`).
    pub fn offset_of(&self, line: u32, column: u32) -> Option<usize> {
        offset_in(self.program(), &self.starts, line, column).map(|at| PREFIX.len() + at)
    }

    /// The 1-based line and column of a span's start in the program.
    pub fn position(&self, span: Span) -> (u32, u32) {
        self.position_of(span.lo)
    }

    /// The 1-based line and column of a position in the program.
    pub fn position_of(&self, at: BytePos) -> (u32, u32) {
        let program = self.program();
        let offset = ((at.0.saturating_sub(BASE)) as usize)
            .saturating_sub(PREFIX.len())
            .min(program.len());
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let column = program.get(start..offset).map_or(0, |t| t.chars().count());
        (line as u32, column as u32 + 1)
    }

    /// The text a span covers.
    pub fn text(&self, span: Span) -> &str {
        let lo = (span.lo.0.saturating_sub(BASE)) as usize;
        let hi = (span.hi.0.saturating_sub(BASE)) as usize;
        self.wrapped.get(lo..hi).unwrap_or("")
    }

    /// The wrapped text from `at` on.
    pub(crate) fn wrapped_from(&self, at: BytePos) -> Option<&str> {
        self.wrapped.get(at.0.checked_sub(BASE)? as usize..)
    }

    /// The span's position in the wrapped text as a [`BytePos`], for finding nodes at it.
    pub(crate) fn at(offset: usize) -> Option<BytePos> {
        u32::try_from(offset).ok().map(|o| BytePos(BASE + o))
    }
}

/// The byte offset in `text` (whose lines start at `starts`) of a 1-based line and column,
/// columns counting characters.
pub(crate) fn offset_in(text: &str, starts: &[usize], line: u32, column: u32) -> Option<usize> {
    if line == 0 || column == 0 {
        return None;
    }
    let start = *starts.get(line as usize - 1)?;
    let within = text
        .get(start..)?
        .char_indices()
        .nth(column as usize - 1)
        .map(|(i, _)| i)?;
    Some(start + within)
}

/// The expression a TypeScript-only wrapper holds (`x as T`, `x satisfies T`, `x!`, `<T>x`,
/// `f<T>`); the wrapper's value is that expression's.
pub(crate) fn inside_type_wrapper(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::TsAs(e) => Some(&e.expr),
        Expr::TsSatisfies(e) => Some(&e.expr),
        Expr::TsConstAssertion(e) => Some(&e.expr),
        Expr::TsNonNull(e) => Some(&e.expr),
        Expr::TsTypeAssertion(e) => Some(&e.expr),
        Expr::TsInstantiation(e) => Some(&e.expr),
        _ => None,
    }
}

fn syntax_error(error: swc_ecma_parser::error::Error) -> SyntaxError {
    let at = error.span().lo.0.checked_sub(BASE).map(|at| at as usize);
    SyntaxError {
        message: error.kind().msg().into_owned(),
        at,
    }
}

fn program_of(wrapped: &str) -> &str {
    &wrapped[PREFIX.len()..wrapped.len() - SUFFIX.len()]
}

/// Byte offsets where the program's lines start, ending lines where Boa's lexer does: at `\n`,
/// `\r` (`\r\n` counts once), U+2028 and U+2029, inside strings and comments too.
pub(crate) fn line_starts(program: &str) -> Vec<usize> {
    let mut starts = vec![0];
    let mut chars = program.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' => match chars.peek() {
                Some(&(_, '\n')) => {
                    chars.next();
                    i + 2
                }
                _ => i + 1,
            },
            '\n' => i + 1,
            '\u{2028}' | '\u{2029}' => i + 3,
            _ => continue,
        };
        starts.push(end);
    }
    starts
}

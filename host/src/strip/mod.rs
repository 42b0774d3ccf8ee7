//! TypeScript to JavaScript by erasing types (swc's strip-only mode), positions preserved.
//!
//! The program is the *body* of an async function, so it is wrapped in one before stripping
//! (top-level `return` and `await` would not parse otherwise) and the wrapper is sliced back off.
//! Types become spaces, so every line and column of the output is the line and column the model
//! wrote. Syntax that needs code generation (`enum`, runtime `namespace`, parameter properties,
//! `import =`, legacy `<T>x` casts, decorators) is refused with its position, before any sandbox
//! is created.

mod scan;

use std::sync::{Arc, Mutex};

use swc_common::errors::{DiagnosticBuilder, Emitter, Handler};
use swc_common::sync::Lrc;
use swc_common::{SourceMap, GLOBALS};
use swc_ts_fast_strip::{operate, Mode, Options};

/// The function the program is the body of, for every parse of it (the stripper's and
/// `explain`'s), so that top-level `return` and `await` parse.
pub(crate) const PREFIX: &str = "async function __codemode_program__() {\n";
pub(crate) const SUFFIX: &str = "\n}";

/// A program the stripper refused: a syntax error or a construct it cannot erase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripError {
    /// What the stripper refused, in its own words.
    pub message: String,
    /// 1-based, in the program as written (0 when unknown).
    pub line: u32,
    /// 1-based, in characters (0 when unknown).
    pub column: u32,
}

/// One diagnostic: its message and where it points.
type Diagnostic = (String, Option<swc_common::Span>);

#[derive(Clone, Default)]
struct Collected(Arc<Mutex<Vec<Diagnostic>>>);

impl Emitter for Collected {
    fn emit(&mut self, db: &mut DiagnosticBuilder<'_>) {
        let entry = (db.message(), db.span.primary_span());
        if let Ok(mut list) = self.0.lock() {
            list.push(entry);
        }
    }
}

/// Programs nested deeper than this (brackets, braces, parentheses) are refused before parsing.
pub const MAX_NESTING: usize = 10_000;

/// Longest program accepted, in bytes.
pub const MAX_PROGRAM_BYTES: usize = 1024 * 1024;

pub use scan::MAX_LABEL_PAIRS;

/// swc's parser and visitors recurse once per nesting level, and not only on brackets (a run of
/// prefix operators, `a = a = …`, `x => x => …` nest too), at up to about 0.9 KiB of stack per
/// byte of program. A program short enough that even its worst case fits comfortably in an
/// async worker's stack (2 MiB) is parsed inline; anything longer or deeply bracketed is parsed
/// on a thread of its own whose stack is sized for the longest program accepted (reserved, not
/// committed: only the depth a program reaches is touched, and it is returned when the thread
/// ends). At most [`DEEP_PARSES`] such threads run at once.
const INLINE_BYTES: usize = 512;
const INLINE_NESTING: usize = 64;
const DEEP_PARSE_STACK: usize = 2 << 30;
/// Most programs parsed on their own threads at once; more wait their turn.
pub const DEEP_PARSES: usize = 2;

fn refusal(message: String) -> StripError {
    StripError {
        message,
        line: 0,
        column: 0,
    }
}

/// Where a program will be stripped, or why it will not be.
enum Plan {
    Inline,
    OwnThread,
}

/// The limits every program meets before the parser runs: size, bracket nesting, duplicate
/// nested labels (see [`scan`]).
fn plan(program: &str) -> Result<Plan, StripError> {
    if program.len() > MAX_PROGRAM_BYTES {
        return Err(refusal(format!(
            "program is {} bytes; the limit is {MAX_PROGRAM_BYTES}: move data into tool calls",
            program.len()
        )));
    }
    let scanned = scan::scan(program);
    if scanned.label_pairs > MAX_LABEL_PAIRS {
        return Err(refusal(format!(
            "program repeats a label (or object key) inside itself more than {MAX_LABEL_PAIRS} times; a duplicate label is a syntax error: rename it, or flatten the object"
        )));
    }
    if inline_fits(program.len(), scanned.nesting) {
        return Ok(Plan::Inline);
    }
    if scanned.nesting > MAX_NESTING {
        return Err(refusal(format!(
            "program nests brackets {} levels deep; the limit is {MAX_NESTING}: flatten it",
            scanned.nesting
        )));
    }
    Ok(Plan::OwnThread)
}

/// Runs `work` on `program` on a thread of its own with the deep-parse stack, handing the
/// result to `done`; `slot` (a deep-parse permit, if any) is held until the work ends.
fn on_own_thread<T: Send + 'static>(
    program: String,
    slot: Option<tokio::sync::SemaphorePermit<'static>>,
    work: impl FnOnce(&str) -> T + Send + 'static,
    done: impl FnOnce(T) + Send + 'static,
) -> bool {
    let spawned = std::thread::Builder::new()
        .name("codemode-parse".into())
        .stack_size(DEEP_PARSE_STACK)
        .spawn(move || {
            let _slot = slot;
            done(work(&program));
        });
    if let Err(e) = &spawned {
        tracing::error!("cannot start the TypeScript parser: {e}");
    }
    spawned.is_ok()
}

/// Whether swc may walk `program` on an async worker's own stack (see [`INLINE_BYTES`]).
fn fits_inline(program: &str) -> bool {
    inline_fits(program.len(), scan::scan(program).nesting)
}

fn inline_fits(bytes: usize, nesting: usize) -> bool {
    bytes <= INLINE_BYTES && nesting <= INLINE_NESTING
}

/// Runs `work` (a parse or a walk of `program` with swc) where its recursion has room: inline
/// for short programs, else on a thread of its own with the deep-parse stack, at most
/// [`DEEP_PARSES`] at a time, while the caller's task waits without blocking its worker.
/// `None` when no thread could be started.
pub(crate) async fn with_parser_stack<T: Send + 'static>(
    program: &str,
    work: impl FnOnce(&str) -> T + Send + 'static,
) -> Option<T> {
    on_parser_stack(program, fits_inline(program), work).await
}

async fn on_parser_stack<T: Send + 'static>(
    program: &str,
    inline: bool,
    work: impl FnOnce(&str) -> T + Send + 'static,
) -> Option<T> {
    if inline {
        return Some(work(program));
    }
    let slot = DEEP_PARSE_SLOTS.acquire().await.ok()?;
    let (sender, receiver) = tokio::sync::oneshot::channel();
    // The slot goes with the thread: a caller that stops waiting (abort, wall clock) does not
    // free it while the parse still runs, so at most DEEP_PARSES threads ever exist.
    let started = on_own_thread(program.to_owned(), Some(slot), work, move |result| {
        let _ = sender.send(result);
    });
    if !started {
        return None;
    }
    receiver.await.ok()
}

/// swc erases a type with one space per UTF-16 unit, so a character outside the Basic
/// Multilingual Plane in a type (an emoji in a string literal type) becomes two spaces. Boa
/// counts columns in characters: each such pair is made one space again, so that every column
/// after it is still the one the model wrote. Text swc kept is never touched; if the two texts
/// do not line up as expected, the stripped text is returned as it is.
fn one_space_per_character(program: &str, stripped: String) -> String {
    if !program.chars().any(|c| c.len_utf16() == 2) {
        return stripped;
    }
    let out: Vec<char> = stripped.chars().collect();
    let mut fixed = String::with_capacity(stripped.len());
    let mut at = 0;
    for c in program.chars() {
        let Some(&o) = out.get(at) else {
            return stripped;
        };
        if o == c {
            at += 1;
        } else if c.len_utf16() == 2 && o == ' ' && out.get(at + 1) == Some(&' ') {
            at += 2;
        } else {
            at += 1;
        }
        fixed.push(if o == c { c } else { o });
    }
    if at == out.len() {
        fixed
    } else {
        stripped
    }
}

fn parser_failed() -> StripError {
    refusal("the TypeScript parser could not run for this program".into())
}

/// Erases the types of `program` (a function body). Returns JavaScript of the same shape.
/// Blocks the calling thread; async callers use [`strip_types_async`].
pub fn strip_types(program: &str) -> Result<String, StripError> {
    match plan(program)? {
        Plan::Inline => strip_inline(program),
        Plan::OwnThread => {
            let (sender, receiver) = std::sync::mpsc::channel();
            on_own_thread(program.to_owned(), None, strip_inline, move |result| {
                let _ = sender.send(result);
            });
            receiver.recv().unwrap_or_else(|_| Err(parser_failed()))
        }
    }
}

static DEEP_PARSE_SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(DEEP_PARSES);

/// [`strip_types`] for async callers: small programs are stripped at once, larger ones on a
/// thread of their own (at most [`DEEP_PARSES`] at a time) while the caller's task waits
/// without blocking its worker. Dropping the future stops the wait; a parse already started
/// finishes on its thread (its cost is bounded by the limits above).
pub async fn strip_types_async(program: &str) -> Result<String, StripError> {
    strip_types_then(program, |_| ())
        .await
        .map(|(stripped, ())| stripped)
}

/// [`strip_types_async`], then `then` on the program as written (a second walk with swc),
/// in the same trip to a parser stack; `then` runs only when stripping succeeded.
pub(crate) async fn strip_types_then<T: Send + 'static>(
    program: &str,
    then: impl FnOnce(&str) -> T + Send + 'static,
) -> Result<(String, T), StripError> {
    let inline = matches!(plan(program)?, Plan::Inline);
    on_parser_stack(program, inline, move |program| {
        strip_inline(program).map(|stripped| (stripped, then(program)))
    })
    .await
    .unwrap_or_else(|| Err(parser_failed()))
}

fn strip_inline(program: &str) -> Result<String, StripError> {
    let wrapped = format!("{PREFIX}{program}{SUFFIX}");
    let cm: Lrc<SourceMap> = Default::default();
    let collected = Collected::default();
    let handler = Handler::with_emitter(false, false, Box::new(collected.clone()));
    let options = Options {
        module: Some(false),
        filename: Some("program.ts".into()),
        mode: Mode::StripOnly,
        ..Default::default()
    };
    let result = GLOBALS.set(&Default::default(), || {
        operate(&cm, &handler, wrapped, options)
    });
    match result {
        Ok(output) => {
            let mut code = output.code;
            if code.len() >= PREFIX.len() + SUFFIX.len()
                && code.starts_with(PREFIX)
                && code.ends_with(SUFFIX)
            {
                code.truncate(code.len() - SUFFIX.len());
                code.drain(..PREFIX.len());
                Ok(one_space_per_character(program, code))
            } else {
                // Stripping keeps positions, so the wrapper always survives intact; if it did not,
                // refuse rather than run something else.
                Err(StripError {
                    message: "TypeScript stripping changed the program's shape".into(),
                    line: 0,
                    column: 0,
                })
            }
        }
        Err(error) => {
            let diagnostics = collected.0.lock().map(|l| l.clone()).unwrap_or_default();
            let first = diagnostics.into_iter().next();
            let (message, span) = match first {
                Some((message, span)) => (message, span),
                None => (error.message, None),
            };
            let (line, column) = span
                .map(|span| {
                    let loc = cm.lookup_char_pos(span.lo);
                    (loc.line as u32, loc.col.0 as u32 + 1)
                })
                .unwrap_or((0, 0));
            // Line 1 of the wrapped text is the wrapper; a position on it (or past the program)
            // is reported at the nearest program line.
            let program_lines = program.lines().count().max(1) as u32;
            let line = if line == 0 {
                0
            } else {
                (line.saturating_sub(1)).clamp(1, program_lines)
            };
            Err(StripError {
                message: describe(&message),
                line,
                column,
            })
        }
    }
}

fn describe(message: &str) -> String {
    let message = message.trim();
    if message.is_empty() {
        "TypeScript syntax error".into()
    } else {
        message.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_character_in_a_type_stays_one_column() {
        let ts = "let a: \"😀\" | \"x\" = \"😀\"; return a";
        let js = strip_types(ts).unwrap();
        assert_eq!(js.chars().count(), ts.chars().count(), "{js}");
        let column = |text: &str| text[..text.find("return").unwrap()].chars().count();
        assert_eq!(column(&js), column(ts), "{js}");
        assert!(js.contains("= \"😀\";"), "kept text is untouched: {js}");
    }

    #[test]
    fn erases_types_and_keeps_positions() {
        let ts = "const x: number = 1;\ninterface A { b: string }\nreturn x as number;";
        let js = strip_types(ts).expect("erasable");
        assert_eq!(js.len(), ts.len());
        assert_eq!(js.lines().count(), ts.lines().count());
        assert!(js.starts_with("const x"));
        assert!(!js.contains("number"));
        assert!(js.contains("return x"));
    }

    #[test]
    fn top_level_await_and_return_are_allowed() {
        assert!(strip_types("const v = await Promise.resolve(1);\nreturn v;").is_ok());
    }

    #[test]
    fn enums_are_refused_with_their_position() {
        let err = strip_types("const a = 1;\n  enum Color { Red }\nreturn a;").unwrap_err();
        assert!(
            err.message.to_lowercase().contains("enum"),
            "{}",
            err.message
        );
        assert_eq!(err.line, 2);
        assert_eq!(err.column, 3);
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let err = strip_types("const a = 1;\nconst = ;\n").unwrap_err();
        assert_eq!(err.line, 2, "{err:?}");
        assert!(err.column >= 1);
    }

    #[test]
    fn deep_nesting_parses_on_a_big_stack_and_extreme_nesting_is_refused() {
        let deep = format!("return {}1{};", "(".repeat(5_000), ")".repeat(5_000));
        assert!(strip_types(&deep).is_ok());
        let extreme = format!(
            "return {}1{};",
            "[".repeat(MAX_NESTING + 1),
            "]".repeat(MAX_NESTING + 1)
        );
        let err = strip_types(&extreme).unwrap_err();
        assert!(err.message.contains("limit is 10000"), "{}", err.message);
    }

    #[test]
    fn duplicate_nested_labels_are_refused_before_the_parser_spends_quadratic_time() {
        let chain = format!("{};", "a:".repeat(100));
        let err = strip_types(&chain).unwrap_err();
        assert_eq!(
            err.message, "Label a is already declared",
            "a few are the parser's to report"
        );
        for hostile in [
            format!("{};", "a:".repeat(8_000)),
            "a: {".repeat(3_000) + &"}".repeat(3_000),
            format!("if (1) {{}} else {}", "a: if (1) {} else ".repeat(3_000)),
        ] {
            let err = strip_types(&hostile).unwrap_err();
            assert!(err.message.contains("repeats a label"), "{}", err.message);
        }
    }

    #[test]
    fn long_runs_of_prefix_operators_do_not_overflow_the_callers_stack() {
        let program = format!("return {}0;", "!".repeat(200_000));
        let handle = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || strip_types(&program).is_ok())
            .expect("spawn");
        assert!(handle.join().expect("no overflow"));
        let huge = "x".repeat(MAX_PROGRAM_BYTES + 1);
        assert!(strip_types(&huge)
            .unwrap_err()
            .message
            .contains("the limit is"));
    }

    #[test]
    fn namespaces_and_parameter_properties_are_refused() {
        assert!(strip_types("namespace N { export const x = 1 }").is_err());
        assert!(strip_types("class A { constructor(private x: number) {} }").is_err());
        assert!(strip_types("declare namespace D { const x: number }\nreturn 1;").is_ok());
    }
}

//! TypeScript to JavaScript by erasing types, positions preserved.
//!
//! The program is the *body* of an async function, so it is wrapped in one before parsing
//! (top-level `return` and `await` would not parse otherwise) and the wrapper is sliced back off.
//! swc parses it once (`source.rs`); `erase` turns every character of a type into a space, so
//! every line and column of the output is the line and column the model wrote, and the same
//! parse then serves the checks before the run. Syntax that needs code generation (`enum`, a
//! `namespace` with values, parameter properties, `<T>x` casts) is refused with its position,
//! and so are decorators (swc does not parse them here), before any sandbox is created.

mod erase;
mod redeclared;
#[cfg(any(test, feature = "reference"))]
pub mod reference;
mod scan;

use crate::source::{Source, SyntaxError, BASE};

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

/// Programs nested deeper than this (brackets, braces, parentheses) are refused before parsing.
pub const MAX_NESTING: usize = 10_000;

/// Longest program accepted, in bytes.
pub const MAX_PROGRAM_BYTES: usize = 1024 * 1024;

pub use scan::{
    MAX_ANGLE_TRIES, MAX_LABEL_PAIRS, MAX_NESTED_TYPE_ARGUMENT_TRIES, MAX_SPECULATIVE_ANGLES,
};

/// swc's parser and visitors recurse once per nesting level, and not only on brackets (a run of
/// prefix operators, `a = a = …`, `x => x => …` nest too), at up to about 0.9 KiB of stack per
/// byte of program. A program short enough that even its worst case fits comfortably in an
/// async worker's stack (2 MiB) is parsed inline; anything longer or deeply bracketed is parsed
/// on a thread of its own whose stack is sized for the longest program accepted (reserved, not
/// committed: only the depth a program reaches is touched, and it is returned when the thread
/// ends). At most [`DEEP_PARSES`] such threads run at once.
const INLINE_BYTES: usize = 512;
const INLINE_NESTING: usize = 64;
/// Most `<` tries, weighted as for [`MAX_ANGLE_TRIES`], around one point of a program parsed
/// inline. Within the bounds, nested tries still multiply the parse of what they enclose: a
/// 237-byte program nesting six around nine parentheses took 3.4 s of a release build. Such a
/// parse must not hold an async worker, so past a few it goes to a thread of its own, where at
/// most [`DEEP_PARSES`] run at once and a run's wall clock ends its wait. Ordinary annotations
/// stay inline (`Map<string, Array<number>>` weighs four).
const INLINE_ANGLE_TRIES: usize = 4;
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
    if scanned.speculative_angles > MAX_SPECULATIVE_ANGLES {
        return Err(refusal(format!(
            "program has {} type assertions or generic arrow functions (`<T>…`) open at once (in one statement and the brackets it encloses); the limit is {MAX_SPECULATIVE_ANGLES}, past which parsing them takes too long: write assertions as `x as T`, or split the statement",
            scanned.speculative_angles
        )));
    }
    if scanned.nested_type_argument_tries > MAX_NESTED_TYPE_ARGUMENT_TRIES {
        return Err(refusal(format!(
            "program leaves {} `<` open (comparisons, or type arguments) around brackets nested in one another; the limit is {MAX_NESTED_TYPE_ARGUMENT_TRIES}, past which parsing them takes too long: compute the inner parts first, or close the comparisons (`(a < b)`) before the brackets",
            scanned.nested_type_argument_tries
        )));
    }
    if scanned.angle_tries > MAX_ANGLE_TRIES {
        return Err(refusal(format!(
            "program nests type assertions or generic arrow functions (`<T>…`) and `<` left open (comparisons, or type arguments) in one another, {} tries deep counting each `<` after a name twice; the limit is {MAX_ANGLE_TRIES}, past which parsing them takes too long: write assertions as `x as T`, close comparisons in parentheses, or split the statement",
            scanned.angle_tries
        )));
    }
    if inline_fits(program.len(), &scanned) {
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
    inline_fits(program.len(), &scan::scan(program))
}

fn inline_fits(bytes: usize, scanned: &scan::Scan) -> bool {
    bytes <= INLINE_BYTES
        && scanned.nesting <= INLINE_NESTING
        && scanned.angle_tries <= INLINE_ANGLE_TRIES
}

/// Runs `work` (a parse or a walk of `program` with swc) where its recursion has room: inline
/// for short programs, else on a thread of its own with the deep-parse stack, at most
/// [`DEEP_PARSES`] at a time, while the caller's task waits without blocking its worker.
/// `None` when no thread could be started.
pub async fn with_parser_stack<T: Send + 'static>(
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

/// [`strip_types_async`], then `then` on the parsed program (a walk of swc's tree), in the
/// same trip to a parser stack; `then` runs only when stripping succeeded.
pub async fn strip_types_then<T: Send + 'static>(
    program: &str,
    then: impl FnOnce(&Source) -> T + Send + 'static,
) -> Result<(String, T), StripError> {
    let inline = matches!(plan(program)?, Plan::Inline);
    on_parser_stack(program, inline, move |program| {
        parse_and_erase(program).map(|(stripped, source)| (stripped, then(&source)))
    })
    .await
    .unwrap_or_else(|| Err(parser_failed()))
}

fn strip_inline(program: &str) -> Result<String, StripError> {
    parse_and_erase(program).map(|(stripped, _)| stripped)
}

fn parse_and_erase(program: &str) -> Result<(String, Source), StripError> {
    let source = Source::parse(program).map_err(|SyntaxError { message, at }| {
        let message = message.trim();
        let message = if message.is_empty() {
            "TypeScript syntax error".to_owned()
        } else {
            message.to_owned()
        };
        placed(program, message, at)
    })?;
    if let Some((at, name)) = redeclared::first(&source.body) {
        let at = (at.0 as usize).checked_sub(BASE as usize);
        return Err(placed(
            program,
            format!("SyntaxError: Identifier '{name}' has already been declared"),
            at,
        ));
    }
    let mut erased = erase::erase(source.wrapped(), BASE, &source.body).map_err(|refused| {
        placed(
            program,
            refused.construct.message().to_owned(),
            Some(refused.at),
        )
    })?;
    // Only the program's own text is ever edited, so the wrapper survives intact; if it did
    // not, refuse rather than run something else.
    if !(erased.starts_with(PREFIX) && erased[PREFIX.len()..].ends_with(SUFFIX)) {
        return Err(refusal(
            "TypeScript stripping changed the program's shape".into(),
        ));
    }
    erased.truncate(erased.len() - SUFFIX.len());
    erased.drain(..PREFIX.len());
    Ok((erased, source))
}

/// A refusal at byte `at` of the wrapped text, placed as swc places its diagnostics: lines
/// end at `\n`, columns count characters, and a position in the wrapper is moved to the
/// nearest program line.
fn placed(program: &str, message: String, at: Option<usize>) -> StripError {
    let wrapped = format!("{PREFIX}{program}{SUFFIX}");
    let Some(before) = at.and_then(|at| wrapped.get(..at)) else {
        return refusal(message);
    };
    let wrapped_line = before.matches('\n').count() as u32 + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() as u32 + 1;
    let program_lines = program.lines().count().max(1) as u32;
    StripError {
        message,
        line: wrapped_line.saturating_sub(1).clamp(1, program_lines),
        column,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn nested_type_assertions_and_generic_arrows_past_the_limit_are_refused_before_parsing() {
        // Each of these took the parser seconds to minutes (time exponential in the nesting).
        for hostile in [
            "<T><T>(".repeat(16),
            "<T><T><T><T>(".repeat(10),
            "<T>(x: T) => ".repeat(30) + "<T>(",
            "(<T>".repeat(40),
            "<T><T>(<T><T><T><T><T><T><T>(<T><T><T><T><T>(<T><T><T>(<T><T><T><T>(<T><T><T><T><T><T><T>(<T><T><T><T><T>(<T><T><T>(<T><T>!<T><T>!<T><T>(<T><T>!<T><T><T>x = a < b > (c);".to_owned(),
        ] {
            let err = strip_types(&hostile).unwrap_err();
            assert!(
                err.message.contains("type assertions or generic arrow functions"),
                "{}",
                err.message
            );
        }
        // Up to the limit, and any number across statements, they parse.
        let generic: String = (0..40)
            .map(|i| {
                format!("const id{i} = <T,>(x: T): T => x;\nconst n{i} = id{i}(<U,>(u: U) => u);\n")
            })
            .collect();
        assert!(strip_types(&generic).is_ok());
        let nested = format!(
            "const f = {}0;",
            "<T>(x: T) => ".repeat(MAX_SPECULATIVE_ANGLES)
        );
        assert!(strip_types(&nested).is_ok());
    }

    #[test]
    fn short_programs_that_nest_several_angle_tries_are_parsed_off_the_async_workers() {
        let inline = |program: &str| matches!(plan(program), Ok(Plan::Inline));
        assert!(inline(
            "const m: Map<string, Array<number>> = new Map(); return m.size;"
        ));
        assert!(inline("if (a < b && c < d) return [x < y, f<T>(z)];"));
        // strip_differential: 237 bytes within every bound, 3.4 s of a release build.
        let slow = "s<{[A<({[A<({[".repeat(2) + "((((((((() =>+(((";
        assert!(slow.len() < INLINE_BYTES);
        assert!(matches!(plan(&slow), Ok(Plan::OwnThread)));
    }

    #[test]
    fn comparisons_left_open_around_nested_brackets_past_the_limit_are_refused_before_parsing() {
        for hostile in [
            format!("x = {}", "[{[A< mb <n".repeat(8)),
            format!("x = {}", "{[A<".repeat(12)),
            "y <((e=ee(eCCy,yyy".repeat(10),
            // strip_differential: 1.5 s of a release build under the earlier bound of eight.
            "2<{[".repeat(6) + "(r=2<[{[((2<b [[[[(A)[[[Z[(((((((A",
        ] {
            let err = strip_types(&hostile).unwrap_err();
            assert!(err.message.contains("`<` open"), "{}", err.message);
        }
        // The two kinds nested in each other, each within its own bound.
        let mixed = "<T><T>(".repeat(4) + &"y <((e=ee(eCCy,yyy".repeat(5);
        let err = strip_types(&mixed).unwrap_err();
        assert!(err.message.contains("tries deep"), "{}", err.message);
        let keyed = "const o = { [a < b ? 'x' : 'y']: { [c < d ? 'p' : 'q']: 1 } };\nreturn o;";
        assert!(strip_types(keyed).is_ok());
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
    fn a_brace_that_closes_the_wrapper_early_is_refused_where_it_stands() {
        let err = strip_types("return 1 }\nclass X { y: number }\nfunction z() {").unwrap_err();
        assert!(err.message.contains("closes the function"), "{err:?}");
        assert_eq!((err.line, err.column), (1, 10));
    }

    #[test]
    fn namespaces_and_parameter_properties_are_refused() {
        assert!(strip_types("namespace N { export const x = 1 }").is_err());
        assert!(strip_types("class A { constructor(private x: number) {} }").is_err());
        assert!(strip_types("declare namespace D { const x: number }\nreturn 1;").is_ok());
    }
}

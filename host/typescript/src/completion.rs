//! The completion value: a program whose last statement is an expression returns its value
//! (awaited, as any returned promise is), as Node's REPL and Python notebooks show theirs.
//!
//! The program runs as a function body, so this is done in the text: `return ` is written in
//! front of that expression. Only that line changes, and only after the insertion point, so
//! a position the guest reports there is moved back by the inserted length.

use swc_common::Spanned;
use swc_ecma_ast::{Expr, Lit, Stmt};

use codemode_runtime::code::RunResult;

use crate::source::{self, Source};

const RETURN: &str = "return ";

/// Where `return ` goes: the 1-based line and column of the program's last statement when it
/// is an expression (not a directive such as a lone `"use strict"` at the top).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    line: u32,
    column: u32,
}

impl Completion {
    /// Where `source`'s last statement, an expression, begins; `None` when it is no expression.
    pub fn of(source: &Source) -> Option<Self> {
        let Stmt::Expr(last) = source.body.last()? else {
            return None;
        };
        let directive = |stmt: &Stmt| matches!(stmt, Stmt::Expr(e) if matches!(&*e.expr, Expr::Lit(Lit::Str(_))));
        if source.body.iter().all(directive) {
            return None;
        }
        let (line, column) = source.position(last.expr.span());
        Some(Self { line, column })
    }

    /// `program` (the stripped JavaScript, whose lines and columns are the TypeScript's) with
    /// `return ` in front of its last expression; `None` if that place is not in it.
    pub fn apply(self, program: &str) -> Option<String> {
        let starts = source::line_starts(program);
        let at = source::offset_in(program, &starts, self.line, self.column)?;
        let mut out = String::with_capacity(program.len() + RETURN.len());
        out.push_str(&program[..at]);
        out.push_str(RETURN);
        out.push_str(&program[at..]);
        Some(out)
    }

    /// Moves a failure's position on the changed line back to the program as written.
    pub fn restore_position(self, result: &mut RunResult) {
        let Some(error) = &mut result.error else {
            return;
        };
        if error.line != Some(self.line) {
            return;
        }
        if let Some(column) = &mut error.column {
            let inserted = RETURN.len() as u32;
            if *column >= self.column + inserted {
                *column -= inserted;
            } else if *column > self.column {
                *column = self.column;
            }
        }
    }
}

//! The reference the eraser is compared with: swc's own stripper (`swc_ts_fast_strip`, its
//! strip-only mode) on the same wrapped program, and what counts as the same erasure. Used by
//! the eraser's differential tests (`erase/tests.rs`) and, with the feature `reference`, by the
//! fuzz target that compares the two on generated and mutated TypeScript.

use super::{PREFIX, SUFFIX};

/// What swc's stripper makes of `program`, with each type character one space, as the eraser
/// writes it; `None` when it refuses (or fails).
pub fn reference(program: &str) -> Option<String> {
    use swc_common::errors::{EmitterWriter, Handler};
    use swc_common::sync::Lrc;
    use swc_common::{SourceMap, GLOBALS};
    use swc_ts_fast_strip::{operate, Mode, Options};

    let cm: Lrc<SourceMap> = Default::default();
    let quiet = EmitterWriter::new(Box::new(std::io::sink()), None, false, false);
    let handler = Handler::with_emitter(false, false, Box::new(quiet));
    let options = Options {
        module: Some(false),
        mode: Mode::StripOnly,
        ..Default::default()
    };
    let wrapped = format!("{PREFIX}{program}{SUFFIX}");
    let output = GLOBALS
        .set(&Default::default(), || {
            operate(&cm, &handler, wrapped, options)
        })
        .ok()?;
    let code = output.code;
    let body = code.get(PREFIX.len()..code.len().checked_sub(SUFFIX.len())?)?;
    Some(one_space_per_character(program, body))
}

/// swc's stripper writes a space per UTF-16 unit; the eraser, per character.
fn one_space_per_character(program: &str, stripped: &str) -> String {
    let mut out = stripped.chars();
    program
        .chars()
        .map(|c| {
            let o = out.next().unwrap_or(' ');
            if o != c && c.len_utf16() == 2 {
                out.next();
            }
            o
        })
        .collect()
}

/// Whitespace other than line breaks, written as a space: erased whitespace may be kept or
/// blanked, to the same effect.
pub fn normalized(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_whitespace() && !super::erase::is_line_break(c) || c == '\u{feff}' {
                ' '
            } else {
                c
            }
        })
        .collect()
}

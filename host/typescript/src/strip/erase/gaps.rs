//! The tokens between the syntax tree's nodes. swc records modifiers (`public`, `readonly`),
//! markers (`?`, `!`) and some punctuation only as flags or not at all, so the eraser finds
//! them by reading the text between two positions it knows to be token boundaries.
//!
//! Such a gap holds only whitespace, comments, punctuators and words, never a string, a
//! template or a regular expression, so a small scanner reads it exactly.

/// A token in a gap: where it starts and ends (byte offsets in the text), and whether a line
/// ended between the previous token and it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Token {
    pub start: usize,
    pub end: usize,
    pub after_line_break: bool,
}

/// The tokens of `text` from `from` (a token boundary) on, until one starts at or after `to`.
pub(super) fn tokens(text: &str, from: usize, to: usize) -> impl Iterator<Item = Token> + '_ {
    let mut at = from;
    std::iter::from_fn(move || {
        let (start, after_line_break) = skip_trivia(text, at);
        if start >= to.min(text.len()) {
            return None;
        }
        let end = token_end(text, start);
        if end <= start {
            return None;
        }
        at = end;
        Some(Token {
            start,
            end,
            after_line_break,
        })
    })
}

/// The first token at or after `from` (a token boundary), wherever it ends.
pub(super) fn next(text: &str, from: usize) -> Option<Token> {
    tokens(text, from, usize::MAX).next()
}

/// The text of `token`.
pub(super) fn text_of(text: &str, token: Token) -> &str {
    text.get(token.start..token.end).unwrap_or("")
}

/// Whether a line ends anywhere in `text[from..to]`.
pub(super) fn has_line_break(text: &str, from: usize, to: usize) -> bool {
    text.get(from..to)
        .is_some_and(|t| t.contains(['\n', '\r', '\u{2028}', '\u{2029}']))
}

pub(in crate::strip) fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// Skips whitespace and comments from `at`; returns where the next token starts and whether
/// a line ended on the way (inside a block comment too, as the language counts it).
fn skip_trivia(text: &str, mut at: usize) -> (usize, bool) {
    let mut line_break = false;
    loop {
        // Offsets come from spans and this scanner, always on character boundaries; one that
        // is not ends the gap rather than panicking.
        let rest = text.get(at..).unwrap_or("");
        let Some(c) = rest.chars().next() else {
            return (text.len(), line_break);
        };
        if is_line_break(c) {
            line_break = true;
            at += c.len_utf8();
        } else if c.is_whitespace() || c == '\u{feff}' {
            at += c.len_utf8();
        } else if rest.starts_with("//") {
            at += rest.find(is_line_break).unwrap_or(rest.len());
        } else if let Some(comment) = rest.strip_prefix("/*") {
            let Some(close) = comment.find("*/") else {
                return (text.len(), line_break);
            };
            line_break |= comment[..close].contains(is_line_break);
            at += close + 4;
        } else {
            return (at, line_break);
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$' || c == '\\'
}

/// Where the token starting at `start` ends: a word, `=>`, or one punctuator character.
fn token_end(text: &str, start: usize) -> usize {
    let rest = text.get(start..).unwrap_or("");
    let mut chars = rest.char_indices();
    let Some((_, first)) = chars.next() else {
        return start;
    };
    if is_word_char(first) || first == '#' {
        let len = chars
            .find(|&(_, c)| !is_word_char(c))
            .map_or(rest.len(), |(i, _)| i);
        return start + len;
    }
    if rest.starts_with("=>") {
        return start + 2;
    }
    start + first.len_utf8()
}

/// The word that ends right before `at` on the same line, past whitespace and block comments
/// (`return` in `return /* c */ <T>(x) => x`); empty if there is none, or if a line ends first.
pub(super) fn word_before(text: &str, at: usize) -> &str {
    let mut end = at.min(text.len());
    loop {
        let before = text.get(..end).unwrap_or("").trim_end_matches(|c: char| {
            (c.is_whitespace() && !is_line_break(c)) || c == '\u{feff}'
        });
        if let Some(inside) = before.strip_suffix("*/") {
            // Block comments do not nest: the comment opens at the last `/*` before its end.
            match inside.rfind("/*") {
                Some(open) if !inside[open..].contains(is_line_break) => {
                    end = open;
                    continue;
                }
                _ => return "",
            }
        }
        let start = before
            .char_indices()
            .rev()
            .take_while(|&(_, c)| is_word_char(c))
            .last()
            .map_or(before.len(), |(i, _)| i);
        return &before[start..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<&str> {
        tokens(text, 0, text.len())
            .map(|t| text_of(text, t))
            .collect()
    }

    #[test]
    fn reads_words_and_punctuators_past_comments() {
        assert_eq!(
            all("public /* x */ readonly // y\n ? : => #p"),
            ["public", "readonly", "?", ":", "=>", "#p"]
        );
    }

    #[test]
    fn notes_line_breaks_in_whitespace_and_block_comments() {
        let text = "a /*\n*/ b c\r\nd";
        let breaks: Vec<bool> = tokens(text, 0, text.len())
            .map(|t| t.after_line_break)
            .collect();
        assert_eq!(breaks, [false, true, false, true]);
    }

    #[test]
    fn an_unclosed_comment_ends_the_gap() {
        assert_eq!(all("a /* b"), ["a"]);
    }

    #[test]
    fn the_word_before_stops_at_a_line_break() {
        assert_eq!(word_before("x; return  <", 11), "return");
        assert_eq!(word_before("return\n<", 7), "");
        assert_eq!(word_before("return /* a */\u{a0}<", 16), "return");
        assert_eq!(word_before("return /*\n*/ <", 13), "");
    }
}

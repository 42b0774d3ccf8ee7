//! What erasing does to the text: ranges blanked and single characters replaced, applied in
//! one pass that keeps every line and column where it was.

use super::gaps::is_line_break;

/// The edits planned for one text, in byte offsets.
#[derive(Debug, Default)]
pub(super) struct Edits {
    /// Ranges whose characters become spaces (line breaks stay).
    blanks: Vec<(usize, usize)>,
    /// Characters replaced by punctuation that keeps the erased program's meaning (`;`,
    /// `(`, `)`); a replacement wins over a blank that covers it.
    puts: Vec<(usize, char)>,
}

impl Edits {
    pub(super) fn blank(&mut self, start: usize, end: usize) {
        if start < end {
            self.blanks.push((start, end));
        }
    }

    /// Replaces the character at `at` with `c`.
    pub(super) fn put(&mut self, at: usize, c: char) {
        self.puts.push((at, c));
    }

    /// The text with every edit applied. Each character is replaced by exactly one, so columns
    /// (which count characters) do not move.
    pub(super) fn apply(mut self, text: &str) -> String {
        if self.blanks.is_empty() && self.puts.is_empty() {
            return text.to_owned();
        }
        self.blanks.sort_unstable();
        self.puts.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut puts = self.puts.iter().peekable();
        for (start, end) in merged(&self.blanks) {
            // Replacements outside any blank stand alone.
            while let Some(&&(at, c)) = puts.peek() {
                if at >= start {
                    break;
                }
                copied = replace_one(text, &mut out, copied, at, c);
                puts.next();
            }
            let start = start.max(copied);
            let Some(kept) = text.get(copied..start) else {
                continue;
            };
            out.push_str(kept);
            for (i, c) in text.get(start..end).unwrap_or("").char_indices() {
                let at = start + i;
                let mut put = None;
                while let Some(&&(p, r)) = puts.peek() {
                    if p > at {
                        break;
                    }
                    if p == at {
                        put = Some(r);
                    }
                    puts.next();
                }
                out.push(match put {
                    Some(r) => r,
                    None if is_line_break(c) => c,
                    None => ' ',
                });
            }
            copied = end.max(copied);
        }
        for &(at, c) in puts {
            copied = replace_one(text, &mut out, copied, at, c);
        }
        out.push_str(text.get(copied..).unwrap_or(""));
        out
    }
}

/// Copies `text[copied..at]` and writes `c` for the character at `at`; returns where copying
/// goes on.
fn replace_one(text: &str, out: &mut String, copied: usize, at: usize, c: char) -> usize {
    let (Some(kept), Some(old)) = (
        text.get(copied..at),
        text.get(at..).and_then(|t| t.chars().next()),
    ) else {
        return copied;
    };
    out.push_str(kept);
    out.push(c);
    at + old.len_utf8()
}

/// Sorted ranges with the overlapping and touching ones joined.
fn merged(sorted: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(sorted.len());
    for &(start, end) in sorted {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(text: &str, blanks: &[(usize, usize)], puts: &[(usize, char)]) -> String {
        let mut edits = Edits::default();
        for &(s, e) in blanks {
            edits.blank(s, e);
        }
        for &(at, c) in puts {
            edits.put(at, c);
        }
        edits.apply(text)
    }

    #[test]
    fn blanks_keep_line_breaks_and_count_characters() {
        assert_eq!(
            apply("a: T\r\n|é😀 = 1", &[(1, 13)], &[]),
            "a   \r\n    = 1"
        );
    }

    #[test]
    fn overlapping_blanks_join_and_a_replacement_wins() {
        assert_eq!(
            apply("abcdefgh", &[(1, 4), (2, 6)], &[(1, ';')]),
            "a;    gh"
        );
    }

    #[test]
    fn replacements_outside_blanks_stand_alone() {
        assert_eq!(apply("x y z", &[(4, 5)], &[(1, ';'), (2, '(')]), "x;(  ");
    }
}

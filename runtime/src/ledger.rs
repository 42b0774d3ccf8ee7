//! The output ledger: the one place where a run's output bytes are counted (reference §1.7).
//!
//! A run's output is `JSON.stringify(logs)` plus `JSON.stringify(value)` or, on failure,
//! `JSON.stringify(message)`. The count starts at 2 for `[]`; each log entry after the first adds
//! one byte for its comma. Field names and the envelope are free. Binding arguments and
//! resolutions never enter the ledger.

use serde_json::Value;

use crate::json;

/// The smallest cap that can hold anything: `[]` plus `""`.
pub const MIN_OUTPUT_BYTES: u64 = 4;

/// Bytes of `c` inside a JSON string literal.
fn char_cost(c: char) -> u64 {
    json::char_len(c) as u64
}

/// Bytes of `s` as a JSON string literal, quotes included.
pub fn string_cost(s: &str) -> u64 {
    json::string_len(s) as u64
}

/// Bytes of `JSON.stringify(logs)`: `[]`, each entry, and a comma between two.
pub fn logs_cost(logs: &[String]) -> u64 {
    2 + logs.iter().map(|l| string_cost(l)).sum::<u64>() + logs.len().saturating_sub(1) as u64
}

/// Bytes of a finished run's output: its logs, and its value or its error's message.
pub fn result_cost(result: &crate::code::RunResult) -> u64 {
    let outcome = match (&result.value, &result.error) {
        (_, Some(failure)) => string_cost(&failure.message),
        (Some(value), None) => value_cost(value),
        (None, None) => 0,
    };
    logs_cost(&result.logs) + outcome
}

/// Bytes of `JSON.stringify(value)`, without building the text and without recursion.
pub fn value_cost(value: &Value) -> u64 {
    let mut total = 0u64;
    let mut number = String::new();
    // `json::walk` keeps one iterator per open container, not a pointer per element.
    json::walk(value, |v, _| {
        total += match v {
            Value::Null | Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => {
                number.clear();
                json::write_number(n, &mut number);
                number.len() as u64
            }
            Value::String(s) => string_cost(s),
            Value::Array(items) => 2 + items.len().saturating_sub(1) as u64,
            Value::Object(map) => {
                let keys: u64 = map.keys().map(|k| string_cost(k) + 1).sum();
                2 + keys + map.len().saturating_sub(1) as u64
            }
        };
        true
    });
    total
}

/// The longest prefix of `s`, cut between code points, whose JSON string literal (quotes
/// included) costs at most `budget` bytes. `None` when not even `""` fits.
pub fn fitting_prefix(s: &str, budget: u64) -> Option<&str> {
    let mut used = 2u64;
    if used > budget {
        return None;
    }
    for (i, c) in s.char_indices() {
        used += char_cost(c);
        if used > budget {
            return Some(&s[..i]);
        }
    }
    Some(s)
}

/// The message every overflow reports.
pub fn overflow_message(max: u64) -> String {
    format!("outer output exceeded {max} bytes")
}

/// Counts a run's logs as they stream in, against a fixed cap. Serialisable, so that a paused
/// run's count carries over to its resumption.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Ledger {
    max: u64,
    used: u64,
    entries: usize,
    overflowed: bool,
}

/// What happened to one log entry.
#[derive(Debug, PartialEq, Eq)]
pub enum LogAdmission<'a> {
    /// The whole entry fits.
    Whole,
    /// Only this prefix fits; the ledger is now full.
    Prefix(&'a str),
    /// Nothing of it fits; the ledger is now full.
    Nothing,
}

impl Ledger {
    /// An empty ledger (the 2 bytes of `[]` already counted) with a cap of `max` bytes.
    pub fn new(max: u64) -> Self {
        Self {
            max,
            used: 2,
            entries: 0,
            overflowed: false,
        }
    }

    /// The cap, in bytes.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Bytes the logs use so far, `[]` included.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Whether the output has exceeded the cap; the ledger then admits nothing more.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Marks the ledger full (a guest that declares overflow itself is believed).
    pub fn overflow(&mut self) {
        self.overflowed = true;
    }

    fn remaining(&self) -> u64 {
        self.max.saturating_sub(self.used)
    }

    /// Charges one log entry. After an overflow every entry is refused.
    pub fn admit_log<'a>(&mut self, text: &'a str) -> LogAdmission<'a> {
        if self.overflowed {
            return LogAdmission::Nothing;
        }
        let separator = u64::from(self.entries > 0);
        let cost = separator + string_cost(text);
        if cost <= self.remaining() {
            self.used += cost;
            self.entries += 1;
            return LogAdmission::Whole;
        }
        self.overflowed = true;
        match fitting_prefix(text, self.remaining().saturating_sub(separator)) {
            Some(prefix) if !prefix.is_empty() => {
                self.used += separator + string_cost(prefix);
                self.entries += 1;
                LogAdmission::Prefix(prefix)
            }
            _ => LogAdmission::Nothing,
        }
    }

    /// Whether a completion value still fits after the logs.
    pub fn value_fits(&self, value: &Value) -> bool {
        !self.overflowed && value_cost(value) <= self.remaining()
    }

    /// Whether a failure message still fits after the logs.
    pub fn message_fits(&self, message: &str) -> bool {
        !self.overflowed && string_cost(message) <= self.remaining()
    }
}

/// Trims `logs` and `message` so that `JSON.stringify(logs)` plus `JSON.stringify(message)`
/// fits `max`: later log entries go first, and if even no logs leave room, the message itself is
/// cut. This is how an overflow report always fits the cap it reports.
pub fn fit_failure(logs: &mut Vec<String>, message: &mut String, max: u64) {
    let message_cost = string_cost(message);
    while !logs.is_empty() && logs_cost(logs) + message_cost > max {
        let budget = max.saturating_sub(message_cost);
        let before_last = logs_cost(logs)
            - logs.last().map(|l| string_cost(l)).unwrap_or(0)
            - u64::from(logs.len() > 1);
        let separator = u64::from(logs.len() > 1);
        let room = budget.saturating_sub(before_last + separator);
        let last = logs.pop().unwrap_or_default();
        if let Some(prefix) = fitting_prefix(&last, room) {
            if !prefix.is_empty() {
                logs.push(prefix.to_owned());
                break;
            }
        }
    }
    let room = max.saturating_sub(logs_cost(logs));
    if string_cost(message) > room {
        let cut = fitting_prefix(message, room).unwrap_or("").to_owned();
        *message = cut;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn costs_are_the_lengths_json_writes() {
        for text in [
            "",
            "plain",
            "q\"b\\",
            "\u{0}\u{1f}\n\t\r\u{8}\u{c}",
            "é😀",
            "\u{7f}\u{2028}",
        ] {
            let mut written = String::new();
            json::write_string(text, &mut written);
            assert_eq!(string_cost(text), written.len() as u64, "{text:?}");
        }
        let logs = vec!["a".to_owned(), "b\n".to_owned()];
        assert_eq!(logs_cost(&logs), json::to_string(&json!(logs)).len() as u64);
        assert_eq!(logs_cost(&[]), 2);
    }

    #[test]
    fn per_character_costs_match_json_stringify() {
        assert_eq!(string_cost(""), 2);
        assert_eq!(string_cost("€"), 5);
        assert_eq!(string_cost("😀"), 6);
        assert_eq!(string_cost("\"\\"), 6);
        assert_eq!(string_cost("\n\t\u{8}\u{c}\r"), 12);
        assert_eq!(string_cost("\u{1}"), 8);
        assert_eq!(string_cost("\u{1f}"), 8);
        for s in ["a\"b", "\u{0}x", "é€😀", "\u{7f}"] {
            assert_eq!(
                string_cost(s),
                json::to_string(&json!(s)).len() as u64,
                "{s:?}"
            );
        }
    }

    #[test]
    fn value_cost_equals_the_written_length() {
        for v in [
            json!(null),
            json!(true),
            json!(false),
            json!(1e21),
            json!(-1.5),
            json!(123),
            json!([]),
            json!({}),
            json!([1, "two", {"three": [3, null]}, false]),
            json!({"a": 1, "b": {"c": "€"}, "": []}),
        ] {
            assert_eq!(value_cost(&v), json::to_string(&v).len() as u64, "{v}");
        }
    }

    #[test]
    fn euro_return_fits_seven_not_six() {
        // `return "€"`: [] + "€" = 2 + 5.
        assert!(Ledger::new(7).value_fits(&json!("€")));
        assert!(!Ledger::new(6).value_fits(&json!("€")));
    }

    #[test]
    fn log_plus_return_fits_eleven_not_ten() {
        // console.log("abc"); return "xy": 2 + 5 + 4.
        let mut at11 = Ledger::new(11);
        assert_eq!(at11.admit_log("abc"), LogAdmission::Whole);
        assert!(at11.value_fits(&json!("xy")));
        assert!(at11.message_fits("xy"));
        let mut at10 = Ledger::new(10);
        assert_eq!(at10.admit_log("abc"), LogAdmission::Whole);
        assert!(!at10.value_fits(&json!("xy")));
        assert!(!at10.message_fits("xy"));
    }

    #[test]
    fn default_cap_boundary_is_exact() {
        let max = 64 * 1024 * 1024;
        let fits = "x".repeat(67_108_860);
        let over = "x".repeat(67_108_861);
        let ledger = Ledger::new(max);
        assert!(ledger.value_fits(&json!(fits)));
        assert!(!ledger.value_fits(&json!(over)));
        assert_eq!(
            overflow_message(max),
            "outer output exceeded 67108864 bytes"
        );
    }

    #[test]
    fn separators_count_after_the_first_entry() {
        let mut l = Ledger::new(100);
        l.admit_log("a");
        assert_eq!(l.used(), 5);
        l.admit_log("b");
        assert_eq!(l.used(), 9);
    }

    #[test]
    fn an_oversized_entry_keeps_a_code_point_aligned_prefix() {
        let mut l = Ledger::new(2 + 2 + 4 + 1);
        // "😀😀" costs 10; only one emoji (4 bytes) fits beside the quotes.
        assert_eq!(l.admit_log("😀😀"), LogAdmission::Prefix("😀"));
        assert!(l.overflowed());
        assert_eq!(l.admit_log("more"), LogAdmission::Nothing);
    }

    #[test]
    fn escapes_are_never_split() {
        assert_eq!(fitting_prefix("\"\"\"", 5), Some("\""));
        assert_eq!(fitting_prefix("\n\n", 5), Some("\n"));
        assert_eq!(fitting_prefix("x", 1), None);
    }

    #[test]
    fn failures_are_trimmed_to_fit_their_cap() {
        let max = 64;
        let mut logs = vec!["a".repeat(40), "b".repeat(40)];
        let mut message = overflow_message(max);
        fit_failure(&mut logs, &mut message, max);
        let total = 2
            + logs.iter().map(|l| string_cost(l)).sum::<u64>()
            + logs.len().saturating_sub(1) as u64
            + string_cost(&message);
        assert!(total <= max, "{total} > {max}");
        assert_eq!(message, "outer output exceeded 64 bytes");
        assert_eq!(logs.len(), 1);
        assert!(logs[0].starts_with('a'));

        let mut logs = Vec::new();
        let mut message = overflow_message(8);
        fit_failure(&mut logs, &mut message, 8);
        assert_eq!(message, "oute");
    }
}

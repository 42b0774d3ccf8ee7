//! `print` as log entries: one entry per printed line, as `console.log` makes one per call.
//!
//! Monty hands over each argument and each separator and terminator; the text gathers here
//! until a newline ends the line (or the program waits or ends), and then goes to the host,
//! which counts it against the output budget.

use std::borrow::Cow;

use codemode_guest_imports as host;
use monty_types::{MontyException, PrintWriterCallback};

#[derive(Default)]
pub struct Logs {
    line: String,
}

impl Logs {
    /// Sends what has been printed without a newline yet (`print(x, end="")`).
    pub fn flush(&mut self) {
        if !self.line.is_empty() {
            host::send_log(&self.line);
            self.line.clear();
        }
    }
}

impl PrintWriterCallback for Logs {
    fn stdout_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        self.line.push_str(&output);
        Ok(())
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        if end == '\n' {
            host::send_log(&self.line);
            self.line.clear();
        } else {
            self.line.push(end);
        }
        Ok(())
    }
}

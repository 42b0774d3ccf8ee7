//! What codemode reads from a started server: its standard output (JSON-RPC, one message a
//! line) and its standard error (kept as a short tail for error messages). A server is a
//! program codemode does not control, so everything read from it is bounded while it is read,
//! never after: a line of stdout is at most [`MAX_MESSAGE`] bytes (past it the server is cut
//! off), a line of stderr is kept to [`MAX_STDERR_LINE`] bytes (the rest of it is read and
//! dropped), and the tail to [`STDERR_TAIL`] lines and [`STDERR_TAIL_BYTES`] bytes.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

use super::connection::{lock, Child, Health};

/// Longest message (line of stdout) a server may write, rmcp's own limit on every transport:
/// a longer one cuts the server off as a protocol violation.
pub(super) const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// Longest progress notification passed on: only a kilobyte of its message reaches anyone
/// (`connection::MAX_PROGRESS_TEXT`), so a longer one is dropped before rmcp builds it.
const MAX_PROGRESS_NOTIFICATION: usize = 64 * 1024;
/// Lines of a server's stderr kept for error messages.
pub(super) const STDERR_TAIL: usize = 20;
/// Most bytes those lines take together.
pub(super) const STDERR_TAIL_BYTES: usize = 16 * 1024;
/// Longest stderr line kept; the rest of a longer one is read and dropped.
pub(super) const MAX_STDERR_LINE: usize = 1024;

/// What the filter reads of a line: the fields it decides on, borrowed from the line. Every
/// other field is checked as JSON and skipped without being built, so a message costs its
/// text, not the many times more its values would take.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
}

/// Forwards the server's stdout to rmcp line by line while every line is a JSON-RPC message;
/// the first line that is not, or that is longer than [`MAX_MESSAGE`], cuts the server off
/// (rmcp would skip it and leave the call that waited for it hanging). Oversized progress
/// notifications are dropped.
pub(super) async fn pass_json_rpc_only(
    stdout: impl AsyncRead + Unpin,
    mut filtered: tokio::io::DuplexStream,
    health: Arc<Health>,
    child: Child,
) {
    let mut lines = FramedRead::new(stdout, LinesCodec::new_with_max_length(MAX_MESSAGE));
    while let Some(line) = lines.next().await {
        let line = match line {
            Ok(line) => line,
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                health.mark_down(format!(
                    "it wrote a message longer than {} MiB",
                    MAX_MESSAGE / (1024 * 1024)
                ));
                break;
            }
            Err(e) => {
                health.mark_down(format!("it wrote an unreadable line ({e})"));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let envelope = serde_json::from_str::<Envelope<'_>>(&line).ok();
        let Some(envelope) = envelope.filter(|e| e.jsonrpc == "2.0") else {
            let shown: String = line.chars().take(80).collect();
            health.mark_down(format!("it wrote a line that is not JSON-RPC: {shown:?}"));
            break;
        };
        if envelope.method.as_deref() == Some("notifications/progress")
            && line.len() > MAX_PROGRESS_NOTIFICATION
        {
            tracing::debug!(
                bytes = line.len(),
                "an upstream's oversized progress notification was dropped"
            );
            continue;
        }
        // Two writes rather than a newline pushed onto the line, which could copy it whole.
        if filtered.write_all(line.as_bytes()).await.is_err()
            || filtered.write_all(b"\n").await.is_err()
        {
            return;
        }
    }
    // A server that exits closes its output first: give the exit a moment to be seen, so
    // the reason names it.
    for _ in 0..10 {
        if let Ok(Some(status)) = lock(&child).try_wait() {
            health.mark_down(format!("its process exited ({status})"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    health.mark_down("its standard output closed".to_owned());
    let _ = lock(&child).start_kill();
    // Dropping `filtered` ends rmcp's input: every call still waiting fails.
}

/// Keeps the last lines of the server's stderr in `health`, each cut while it is read.
pub(super) async fn keep_stderr_tail(stderr: impl AsyncRead + Unpin, health: Arc<Health>) {
    read_lines_cut(stderr, MAX_STDERR_LINE, |line| health.note_stderr(line)).await;
}

/// Reads `input` to its end (or first error), handing each line to `each`, cut to `max` bytes
/// on a character boundary with `…` after a cut: what a line has past `max` is read and dropped,
/// never kept, so a line of any length costs `max` bytes. A last line without a newline counts.
pub(super) async fn read_lines_cut(
    mut input: impl AsyncRead + Unpin,
    max: usize,
    mut each: impl FnMut(String),
) {
    let mut chunk = vec![0u8; 8 * 1024];
    let mut line: Vec<u8> = Vec::with_capacity(max.min(chunk.len()));
    let mut cut = false;
    let mut finish = |line: &mut Vec<u8>, cut: &mut bool| {
        let mut text = String::from_utf8_lossy(line).into_owned();
        if *cut {
            // A character split by the cut shows as U+FFFD: drop it, then mark the cut.
            if text.ends_with('\u{FFFD}') {
                text.pop();
            }
            text.push('…');
        }
        each(text);
        line.clear();
        *cut = false;
    };
    loop {
        let read = match input.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let mut rest = &chunk[..read];
        loop {
            let end = rest.iter().position(|&b| b == b'\n');
            let part = &rest[..end.unwrap_or(rest.len())];
            let room = max.saturating_sub(line.len());
            line.extend_from_slice(&part[..part.len().min(room)]);
            cut |= part.len() > room;
            match end {
                Some(end) => {
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    finish(&mut line, &mut cut);
                    rest = &rest[end + 1..];
                }
                None => break,
            }
        }
    }
    if !line.is_empty() || cut {
        finish(&mut line, &mut cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &[u8], max: usize) -> Vec<String> {
        let mut lines = Vec::new();
        read_lines_cut(input, max, |line| lines.push(line)).await;
        lines
    }

    #[tokio::test]
    async fn lines_are_cut_while_they_are_read() {
        assert_eq!(
            lines_of(b"one\r\ntwo\n\nthree", 8).await,
            ["one", "two", "", "three"]
        );
        let long = format!("{}\nafter\n", "x".repeat(100_000));
        assert_eq!(lines_of(long.as_bytes(), 5).await, ["xxxxx…", "after"]);
        // A character split by the cut is dropped, not turned into U+FFFD.
        assert_eq!(lines_of("aé€".as_bytes(), 4).await, ["aé…"]);
        assert_eq!(lines_of(b"", 4).await, Vec::<String>::new());
    }
}

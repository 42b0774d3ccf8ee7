//! One `bash -c` per call: nothing carries over from one call to the next. In the foreground
//! the call waits for the command (up to its timeout, then the process group is killed) and
//! returns its output, bounded: the head and the tail are kept, the middle is replaced by a
//! marker. In the background it publishes a job and returns at once.

use std::ffi::OsString;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_runtime::signal::AbortSignal;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;

use crate::stream::complete_utf8;
use crate::subprocess::{Exit, Process, Spawn};
use crate::Exec;

/// Bytes of output kept from the start and from the end of a foreground command.
pub const KEEP_HEAD_BYTES: usize = 32 * 1024;
pub const KEEP_TAIL_BYTES: usize = 32 * 1024;
/// How long the output of a finished command is drained before the call returns (a process
/// that left the group may hold the pipe open forever).
const DRAIN: Duration = Duration::from_millis(500);

/// A call's arguments, checked.
pub struct BashArgs {
    pub command: String,
    pub timeout: Option<Duration>,
    pub workdir: Option<String>,
    pub background: bool,
}

/// Head and tail of a stream, and how much fell between them.
#[derive(Default)]
struct Capture {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    omitted: u64,
}

impl Capture {
    fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < KEEP_HEAD_BYTES {
            let take = (KEEP_HEAD_BYTES - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(KEEP_TAIL_BYTES);
        self.tail.drain(..excess);
        self.omitted += excess as u64;
    }

    fn finish(self) -> (String, bool) {
        let truncated = self.omitted > 0;
        let mut text = if truncated {
            let head_end = complete_utf8(&self.head);
            let tail: Vec<u8> = self.tail.into_iter().collect();
            // Skip a partial character at the tail's start.
            let tail_start = tail
                .iter()
                .take(3)
                .take_while(|b| *b & 0b1100_0000 == 0b1000_0000)
                .count();
            let omitted = self.omitted + (self.head.len() - head_end + tail_start) as u64;
            format!(
                "{}\n[… {omitted} bytes of output omitted …]\n{}",
                String::from_utf8_lossy(&self.head[..head_end]),
                String::from_utf8_lossy(&tail[tail_start..])
            )
        } else {
            let mut all = self.head;
            all.extend(self.tail);
            String::from_utf8_lossy(&all).into_owned()
        };
        text.shrink_to_fit();
        (text, truncated)
    }
}

fn spawn(
    exec: &Exec,
    args: &BashArgs,
) -> Result<(Process, tokio::net::unix::pipe::Receiver), String> {
    let permit = exec.admit()?;
    let workdir = exec.workspace.open(args.workdir.as_deref())?;
    let spawned = Process::spawn(
        Spawn {
            program: &exec.bash,
            args: vec![OsString::from("-c"), OsString::from(&args.command)],
            cwd: workdir.child_path(),
            env: Vec::new(),
        },
        exec.backend.as_ref(),
    );
    // The child changed into the handle before it ran the command.
    drop(workdir);
    let (mut process, output) = spawned?;
    process.hold(permit);
    Ok((process, output))
}

/// Runs `args` in the foreground: `{ output, exitCode, timedOut, truncated }`.
pub(crate) async fn foreground(
    exec: &Exec,
    args: &BashArgs,
    signal: &AbortSignal,
) -> Result<Value, String> {
    if signal.is_aborted() {
        return Err("the call was cancelled before the command started".to_owned());
    }
    let timeout = args
        .timeout
        .unwrap_or(exec.config.default_timeout)
        .min(exec.config.max_timeout);
    let (mut process, mut output) = spawn(exec, args)?;
    let capture = Arc::new(Mutex::new(Capture::default()));
    let mut pump = {
        let capture = capture.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = output.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                capture
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(&buf[..n]);
            }
        })
    };
    enum End {
        Exited(Exit),
        TimedOut,
        Cancelled(String),
    }
    let end = tokio::select! {
        exit = process.wait() => End::Exited(exit),
        () = tokio::time::sleep(timeout) => End::TimedOut,
        reason = signal.aborted() => End::Cancelled(reason),
    };
    let (exit, timed_out) = match end {
        End::Exited(exit) => {
            // What the command left running in its group ends with it.
            process.signal(libc::SIGKILL);
            (exit, false)
        }
        End::TimedOut => (process.terminate(exec.config.grace).await, true),
        End::Cancelled(reason) => {
            process.terminate(exec.config.grace).await;
            pump.abort();
            return Err(format!("the command was stopped: {reason}"));
        }
    };
    if tokio::time::timeout(DRAIN, &mut pump).await.is_err() {
        pump.abort();
    }
    let capture = std::mem::take(&mut *capture.lock().unwrap_or_else(|e| e.into_inner()));
    let (output, truncated) = capture.finish();
    Ok(json!({
        "output": output,
        "exitCode": exit.code,
        "timedOut": timed_out,
        "truncated": truncated,
    }))
}

/// Starts `args` as a background job of `owner`: `{ kind: "background", jobId }`.
pub(crate) async fn background(
    exec: &Exec,
    args: &BashArgs,
    owner: u64,
    signal: &AbortSignal,
) -> Result<Value, String> {
    if signal.is_aborted() {
        return Err("the call was cancelled before the job started".to_owned());
    }
    if let Some(refusal) = exec.jobs.refusal(owner) {
        return Err(refusal);
    }
    let (process, output) = spawn(exec, args)?;
    // Published: from here on only job_kill, the owner's disposal or teardown end it.
    let id = exec
        .jobs
        .publish(owner, &args.command, process, output)
        .await?;
    Ok(json!({ "kind": "background", "jobId": id }))
}

/// The content the model reads: the output, then `[exit code: N]`.
pub fn render(value: &Value) -> String {
    if let Some(id) = value.get("jobId").and_then(Value::as_str) {
        return format!("started background job {id}");
    }
    let output = value.get("output").and_then(Value::as_str).unwrap_or("");
    let mut text = output.to_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if value.get("timedOut") == Some(&Value::Bool(true)) {
        text.push_str("[timed out: the process group was killed]\n");
    }
    match value.get("exitCode").and_then(Value::as_i64) {
        Some(code) => text.push_str(&format!("[exit code: {code}]")),
        None => text.push_str("[exit code: none (killed by a signal)]"),
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_output_keeps_its_head_and_tail_around_a_marker() {
        let mut capture = Capture::default();
        let line = "0123456789".repeat(1000);
        for _ in 0..10 {
            capture.push(line.as_bytes());
        }
        let (text, truncated) = capture.finish();
        assert!(truncated);
        assert!(text.starts_with("0123456789"));
        assert!(text.ends_with("0123456789"));
        assert!(text.contains(&format!(
            "[… {} bytes of output omitted …]",
            100_000 - KEEP_HEAD_BYTES - KEEP_TAIL_BYTES
        )));
        let mut short = Capture::default();
        short.push(b"hi\n");
        assert_eq!(short.finish(), ("hi\n".to_owned(), false));
    }
}

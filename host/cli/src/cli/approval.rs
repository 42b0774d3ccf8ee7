//! `--ask`: approval asked on the controlling terminal, one key per answer: `y` this call, `r`
//! every call of the tool for the rest of this run, `s` for the rest of this invocation; `n`
//! (or nothing) refuses this call, `d` refuses the rest of the run's calls, `D` the rest of
//! the invocation's. Without a terminal (a pipe, CI, a service) the answer is `unavailable`,
//! so the call is denied: asking fails closed.

use std::io::{BufRead, BufReader, Write};

use codemode_runtime::json;
use codemode_runtime::tools::{ApprovalHook, ApprovalOutcome, ApprovalRequest, ApprovalScope};
use futures::future::BoxFuture;
use tokio::sync::oneshot;

/// Longest argument preview shown in a prompt.
const PREVIEW_CHARS: usize = 400;

/// Asks on `/dev/tty`, one question per call.
pub struct TerminalApproval;

impl ApprovalHook for TerminalApproval {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        let mut arguments = json::to_string(&request.arguments);
        if arguments.chars().count() > PREVIEW_CHARS {
            arguments = arguments.chars().take(PREVIEW_CHARS).collect::<String>() + "…";
        }
        let question = format!(
            "codemode: allow tool \"{}\" with {arguments}?\n  y: this call, r: every call this run, s: this session; n: no, d: no for this run, D: no for this session [y/r/s/N/d/D] ",
            request.tool_name
        );
        let (answer, answered) = oneshot::channel();
        // A plain thread, not a blocking-pool task: a read nobody answers must not keep the
        // runtime (and so the process) from shutting down.
        let spawned = std::thread::Builder::new()
            .name("codemode-approval".into())
            .spawn(move || {
                let _ = answer.send(ask(&question));
            });
        Box::pin(async move {
            if spawned.is_err() {
                return ApprovalOutcome::Unavailable;
            }
            tokio::select! {
                outcome = answered => outcome.unwrap_or(ApprovalOutcome::Unavailable),
                _ = request.signal.aborted() => ApprovalOutcome::Cancelled,
            }
        })
    }
}

fn ask(question: &str) -> ApprovalOutcome {
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return ApprovalOutcome::Unavailable;
    };
    let mut out = &tty;
    if out
        .write_all(question.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return ApprovalOutcome::Unavailable;
    }
    let mut line = String::new();
    match BufReader::new(&tty).read_line(&mut line) {
        Ok(0) | Err(_) => ApprovalOutcome::Unavailable,
        Ok(_) => answer(line.trim()),
    }
}

/// The outcome a typed answer means; anything unknown refuses the call alone.
fn answer(typed: &str) -> ApprovalOutcome {
    match typed {
        "y" | "Y" | "yes" | "Yes" => ApprovalOutcome::AllowedOnce,
        "r" | "R" => ApprovalOutcome::AllowedFor(ApprovalScope::Run),
        "s" | "S" => ApprovalOutcome::AllowedFor(ApprovalScope::Session),
        "d" => ApprovalOutcome::RejectedFor(ApprovalScope::Run),
        "D" => ApprovalOutcome::RejectedFor(ApprovalScope::Session),
        _ => ApprovalOutcome::Rejected,
    }
}

/// The approval hook under `--pause-on-ask`: a call that needs an approval pauses the run
/// before it reaches the pipeline, so a call that reaches this hook is one a person approved
/// with `codemode resume --reply ID=true`.
pub struct ApprovedAtResume;

impl ApprovalHook for ApprovedAtResume {
    fn request(&self, _request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        Box::pin(async { ApprovalOutcome::AllowedOnce })
    }
}

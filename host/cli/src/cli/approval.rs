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
        let answered = off_the_runtime("codemode-approval", move || {
            Tty::open()?.line(&question).map(|typed| answer(&typed))
        });
        Box::pin(async move {
            tokio::select! {
                outcome = answered => outcome.unwrap_or(ApprovalOutcome::Unavailable),
                _ = request.signal.aborted() => ApprovalOutcome::Cancelled,
            }
        })
    }
}

/// The controlling terminal, asked a line at a time.
struct Tty {
    out: std::fs::File,
    input: BufReader<std::fs::File>,
}

impl Tty {
    /// `/dev/tty`; `None` without one (a pipe, CI, a service).
    fn open() -> Option<Self> {
        let out = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        let input = BufReader::new(out.try_clone().ok()?);
        Some(Self { out, input })
    }

    /// Shows `prompt` and reads the line typed, trimmed; `None` at its end or on an error.
    fn line(&mut self, prompt: &str) -> Option<String> {
        self.out.write_all(prompt.as_bytes()).ok()?;
        self.out.flush().ok()?;
        let mut text = String::new();
        match self.input.read_line(&mut text) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(text.trim().to_owned()),
        }
    }
}

/// Runs `work` (which reads the terminal) on a plain thread, not a blocking-pool task: a read
/// nobody answers must not keep the runtime (and so the process) from shutting down. Resolves
/// with its result, `None` when it could not start or gave none.
fn off_the_runtime<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> Option<T> + Send + 'static,
) -> impl std::future::Future<Output = Option<T>> {
    let (answer, answered) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = answer.send(work());
        });
    async move {
        spawned.ok()?;
        answered.await.ok().flatten()
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

/// Upstream servers' questions (elicitation) under `codemode run`: asked on the controlling
/// terminal, field by field (Enter takes a field's default), the answers sent back as the
/// server's schema types them. Without a terminal the question is declined.
pub struct TerminalQuestions;

impl codemode_mcp::upstream::Asker for TerminalQuestions {
    fn ask(
        &self,
        _agent: u64,
        server: &str,
        params: rmcp::model::ElicitRequestParams,
    ) -> BoxFuture<'static, rmcp::model::ElicitResult> {
        let server = server.to_owned();
        let answered = off_the_runtime("codemode-question", move || put(&server, &params));
        Box::pin(async move {
            answered
                .await
                .unwrap_or_else(codemode_mcp::upstream::questions::declined)
        })
    }
}

/// Asks `params` on `/dev/tty`; `None` when there is no terminal or the question is not a form.
fn put(
    server: &str,
    params: &rmcp::model::ElicitRequestParams,
) -> Option<rmcp::model::ElicitResult> {
    let rmcp::model::ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = params
    else {
        return None;
    };
    let schema = serde_json::to_value(requested_schema).ok()?;
    let mut tty = Tty::open()?;
    let mut line = |prompt: &str| tty.line(prompt);
    let question: String = message.chars().filter(|c| !c.is_control()).collect();
    let action = line(&format!(
        "codemode: mcp server \"{server}\" asks: {question}\n  answer? [y/N] "
    ))?;
    if !matches!(action.as_str(), "y" | "Y" | "yes") {
        return serde_json::from_value(serde_json::json!({"action": "decline"})).ok();
    }
    let mut content = serde_json::Map::new();
    let properties = schema.get("properties").and_then(|p| p.as_object());
    for (name, field) in properties.into_iter().flatten() {
        let mut value = None;
        for _ in 0..3 {
            let typed = line(&format!("  {}: ", field_prompt(name, field)))?;
            value = field_value(field, &typed);
            if value.is_some() {
                break;
            }
        }
        match value {
            Some(serde_json::Value::Null) => {}
            Some(value) => {
                content.insert(name.clone(), value);
            }
            None => return serde_json::from_value(serde_json::json!({"action": "decline"})).ok(),
        }
    }
    serde_json::from_value(serde_json::json!({"action": "accept", "content": content})).ok()
}

/// `name (what it is, Enter for its default)`.
fn field_prompt(name: &str, field: &serde_json::Value) -> String {
    let text = |key: &str| field.get(key).and_then(|v| v.as_str()).unwrap_or_default();
    let mut about = Vec::new();
    if !text("description").is_empty() {
        about.push(text("description").to_owned());
    }
    match choices(field) {
        Some(choices) => about.push(format!("one of {}", choices.join(", "))),
        None => about.push(text("type").to_owned()),
    }
    if let Some(default) = field.get("default") {
        about.push(format!("Enter for {default}"));
    }
    let label = if text("title").is_empty() {
        name
    } else {
        text("title")
    };
    format!("{label} ({})", about.join("; "))
}

/// A field's allowed values, when it lists them (`enum`, or `oneOf` of `const`s).
fn choices(field: &serde_json::Value) -> Option<Vec<String>> {
    let listed = field
        .get("enum")
        .and_then(|e| e.as_array())
        .cloned()
        .or_else(|| {
            field
                .get("oneOf")
                .and_then(|o| o.as_array())
                .map(|options| {
                    options
                        .iter()
                        .filter_map(|o| o.get("const").cloned())
                        .collect()
                })
        })?;
    Some(
        listed
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
    )
}

/// What `typed` answers for `field`: its default when empty (`Null` without one: left out),
/// `None` when it is not a value of the field's type.
fn field_value(field: &serde_json::Value, typed: &str) -> Option<serde_json::Value> {
    use serde_json::Value;
    if typed.is_empty() {
        return Some(field.get("default").cloned().unwrap_or(Value::Null));
    }
    if let Some(choices) = choices(field) {
        return choices
            .iter()
            .any(|c| c == typed)
            .then(|| Value::String(typed.to_owned()));
    }
    match field.get("type").and_then(|t| t.as_str()) {
        Some("boolean") => match typed {
            "y" | "yes" | "true" => Some(Value::Bool(true)),
            "n" | "no" | "false" => Some(Value::Bool(false)),
            _ => None,
        },
        Some("integer") => typed.parse::<i64>().ok().map(Value::from),
        Some("number") => typed
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        _ => Some(Value::String(typed.to_owned())),
    }
}

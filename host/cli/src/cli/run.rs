//! `codemode run`: one program through the `run_code` tool (every call it makes goes through
//! the tool pipeline), the result for people or as JSON.

use std::io::{IsTerminal, Read, Write};

use codemode_runtime::code::{Resume, RunFailure};
use codemode_runtime::json;
use codemode_runtime::run_code::{self, CodeOutcome, CodeRequest, CodeRun, SubCallRecord};
use codemode_runtime::signal::AbortController;
use codemode_sdk_gen::Language;
use serde_json::{json, Map, Value};

use super::approval::{ApprovedAtResume, TerminalApproval};
use super::session::{Pausing, ToolSession};
use super::{BudgetArgs, RunArgs, ToolArgs, EXIT_OK, EXIT_PAUSED, EXIT_PROGRAM_FAILED, EXIT_USAGE};

fn read_program(args: &RunArgs) -> Result<String, String> {
    match &args.file {
        Some(path) if path.as_os_str() != "-" => std::fs::read_to_string(path)
            .map_err(|e| format!("codemode: cannot read {}: {e}", path.display())),
        _ => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("codemode: cannot read standard input: {e}"))?;
            Ok(text)
        }
    }
}

/// Writes the `--json` document (exactly one object) without copying the value.
fn write_json_document(run: &CodeRun, value: Option<&Value>, out: &mut String) {
    out.push_str("{\"logs\":[");
    for (i, line) in run.logs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json::write_string(line, out);
    }
    out.push(']');
    if let Some(error) = &run.failure {
        out.push_str(",\"error\":");
        json::write(&failure_json(error), out);
    } else if let Some(value) = value {
        out.push_str(",\"result\":");
        json::write(value, out);
    } else if let Some(paused) = &run.paused {
        out.push_str(",\"paused\":");
        json::write(&run_code::paused_json(paused), out);
    }
    if let Some(hint) = &run.hint {
        out.push_str(",\"hint\":");
        json::write_string(hint, out);
    }
    out.push_str(",\"calls\":");
    json::write(&calls_json(&run.calls), out);
    if let Some(fuel) = run.compute_fuel {
        out.push_str(",\"computeFuel\":");
        out.push_str(&fuel.to_string());
    }
    out.push('}');
}

fn calls_json(calls: &[SubCallRecord]) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|call| {
                json!({"subCallId": call.sub_call_id, "tool": call.tool, "outcome": call.outcome.as_str()})
            })
            .collect(),
    )
}

fn failure_json(f: &RunFailure) -> Value {
    let mut e = Map::new();
    e.insert("kind".into(), Value::String(f.kind.as_str().into()));
    e.insert("message".into(), Value::String(f.message.clone()));
    if let Some(cause) = f.cause {
        e.insert("cause".into(), Value::String(cause.as_str().into()));
    }
    if let Some(line) = f.line {
        e.insert("line".into(), line.into());
    }
    if let Some(column) = f.column {
        e.insert("column".into(), column.into());
    }
    Value::Object(e)
}

/// Text a program chose, made safe for a terminal: control characters other than newline and
/// tab (an escape sequence could rewrite the screen or the title, or hide output) are shown as
/// `\u{..}` escapes instead of being sent.
fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return text.into();
    }
    text.chars()
        .map(|c| {
            if unsafe_char(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

fn print_human(run: &CodeRun, value: Option<&Value>, program: &str) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in &run.logs {
        let _ = writeln!(out, "{}", printable(line));
    }
    if let Some(value) = value {
        let _ = writeln!(out, "{}", printable(&run_code::render_value(value)));
    }
    let _ = out.flush();
    if let Some(hint) = &run.hint {
        eprintln!("{}", printable(hint));
    }
    if let Some(paused) = &run.paused {
        let report = run_code::paused_json(paused);
        eprintln!("paused: run {} waits for", paused.run_id);
        for call in report["pending"].as_array().into_iter().flatten() {
            let approval = call.get("approval").is_some_and(|a| a == true);
            // A call that needs a person's input lists its questions, each by key.
            let asks: Vec<String> = call["questions"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(key, question)| {
                    let message = question["message"].as_str().unwrap_or_default();
                    format!("{key}: {message}")
                })
                .collect();
            let waiting = if approval {
                ", waiting for an approval (true or false)".to_owned()
            } else if !asks.is_empty() {
                format!(
                    ", waiting for answers by key ({{\"KEY\": {{\"action\": \"accept\", \"content\": {{…}}}}}}) to {}",
                    asks.join("; ")
                )
            } else {
                String::new()
            };
            eprintln!(
                "  call {}: {}({}){}",
                printable(call["callId"].as_str().unwrap_or_default()),
                printable(call["tool"].as_str().unwrap_or_default()),
                printable(&json::to_string(&call["arguments"])),
                printable(&waiting)
            );
        }
        let first = paused.pending.first().map_or("1", |c| c.call_id.as_str());
        eprintln!(
            "continue it with: codemode resume {} --reply {first}=<JSON> (or --reject {first}=<message>)",
            paused.run_id
        );
    }
    if let Some(error) = &run.failure {
        let color = std::io::stderr().is_terminal();
        let (red, bold, reset) = if color {
            ("\x1b[31m", "\x1b[1m", "\x1b[0m")
        } else {
            ("", "", "")
        };
        let cause = error
            .cause
            .map(|c| format!(", {}", c.as_str()))
            .unwrap_or_default();
        let place = match (error.line, error.column) {
            (Some(l), Some(c)) => format!(" at {l}:{c}"),
            (Some(l), None) => format!(" at line {l}"),
            _ => String::new(),
        };
        eprintln!(
            "{red}{bold}error ({}{cause}){place}:{reset}{red} {}{reset}",
            error.kind,
            printable(&error.message)
        );
        let excerpt = error
            .line
            .and_then(|line| run_code::excerpt(program, line, error.column.unwrap_or(0)));
        if let Some(excerpt) = excerpt {
            // The caret, when there is one, ends the excerpt: it alone is coloured.
            match excerpt.strip_suffix('^') {
                Some(before) => eprintln!("{}{red}^{reset}", printable(before)),
                None => eprintln!("{}", printable(&excerpt)),
            }
        }
    }
}

fn description(args: &RunArgs) -> String {
    match &args.file {
        Some(path) if path.as_os_str() != "-" => format!("Run {}", path.display()),
        _ => "Run the program from standard input".to_owned(),
    }
}

pub async fn run(mut args: RunArgs) -> u8 {
    // A `.py` file is a Python program unless --lang says otherwise.
    if args.budget.lang.is_none()
        && args
            .file
            .as_deref()
            .is_some_and(|path| path.extension().is_some_and(|ext| ext == "py"))
    {
        args.budget.lang = Some(Language::Python);
    }
    let program = match read_program(&args) {
        Ok(p) => p,
        Err(message) => {
            eprintln!("{message}");
            return EXIT_USAGE;
        }
    };
    if args.pause.pause_on_ask && args.tools.ask.is_empty() {
        eprintln!("{}", super::session::PAUSE_ON_ASK_WITHOUT_ASK);
        return EXIT_USAGE;
    }
    let pausing = if args.pause.pause_on.is_empty() && !args.pause.pause_on_ask {
        None
    } else {
        match Pausing::open(&args.pause, &args.tools.ask) {
            Ok(pausing) => Some(pausing),
            Err(message) => {
                eprintln!("{message}");
                return EXIT_USAGE;
            }
        }
    };
    let job = Job {
        program,
        description: description(&args),
        resume: None,
        json: args.json,
        verbose: args.verbose,
    };
    run_job(job, &args.tools, &args.budget, pausing).await
}

/// One `run_code` call: a program, or a paused run to continue.
pub(super) struct Job {
    /// The program (for a resumed run, the one it was paused with, for positions).
    pub program: String,
    pub description: String,
    pub resume: Option<Resume>,
    pub json: bool,
    /// Say on stderr as each call starts and settles.
    pub verbose: bool,
}

/// `--verbose`: each call a program makes, on stderr as it starts and as it settles.
struct CallsOnStderr;

impl codemode_runtime::tools::events::EventSink for CallsOnStderr {
    fn append(&self, event: &codemode_runtime::tools::events::SessionEvent) -> std::io::Result<()> {
        if let Some((_, line)) = event.sub_call_progress() {
            eprintln!("codemode: {}", printable(&line));
        }
        Ok(())
    }
}

/// Runs `job` through `run_code` with the session `tools` name and prints the outcome.
pub(super) async fn run_job(
    job: Job,
    tools: &ToolArgs,
    budget: &BudgetArgs,
    pausing: Option<Pausing>,
) -> u8 {
    let mut session =
        match ToolSession::new(tools, true, codemode_runtime::tools::ToolMode::Code).await {
            Ok(session) => session,
            Err(message) => {
                eprintln!("{message}");
                return EXIT_USAGE;
            }
        };
    if job.verbose {
        session.call_sinks.push(std::sync::Arc::new(CallsOnStderr));
    }
    // Upstream servers' questions go where `--ask` would: the terminal.
    session
        .questions
        .answer_with(std::sync::Arc::new(super::approval::TerminalQuestions));
    let pauses_on_ask = pausing.as_ref().is_some_and(|p| !p.approve_on.is_empty());
    let installed = if pauses_on_ask {
        session.install_run_code(budget, &tools.ask, ApprovedAtResume, pausing)
    } else {
        session.install_run_code(budget, &tools.ask, TerminalApproval, pausing)
    };
    if let Err(message) = installed {
        eprintln!("{message}");
        return EXIT_USAGE;
    }
    let resuming = job.resume.is_some();
    let interrupt = AbortController::new();
    // Unique across processes: the root of every sub-call id and event of this run.
    let call_id = uuid::Uuid::new_v4().to_string();
    let mut request = CodeRequest::new(call_id, job.program, job.description, interrupt.signal())
        .language(budget.language())
        .agent(&session.agent);
    request.resume = job.resume;
    let program = request.program.clone();
    let call = run_code::run(&session.registry, request);
    tokio::pin!(call);
    let outcome = tokio::select! {
        outcome = &mut call => outcome,
        () = super::stop_requested() => {
            interrupt.abort("interrupted");
            call.await
        }
    };
    // Background jobs end with the process that owns them.
    session.shutdown().await;
    let CodeOutcome { result, run } = &outcome;
    let Some(run) = run else {
        // The call ended before a program ran: the pipeline, or the runtime (a resume it
        // refused), turned it away.
        let message = result
            .error()
            .map_or("run_code returned no run", |failure| {
                failure.message.as_str()
            });
        if message.starts_with("codemode:") {
            eprintln!("{message}");
        } else {
            eprintln!("codemode: {message}");
        }
        return if resuming {
            EXIT_USAGE
        } else {
            EXIT_PROGRAM_FAILED
        };
    };
    let value = outcome.value();
    if job.json {
        let mut text = String::new();
        write_json_document(run, value, &mut text);
        println!("{text}");
    } else {
        print_human(run, value, &program);
    }
    let code = if run.failure.is_some() {
        EXIT_PROGRAM_FAILED
    } else if run.paused.is_some() {
        EXIT_PAUSED
    } else {
        EXIT_OK
    };
    // A deep value is dropped without recursion.
    if let Ok(result) = std::sync::Arc::try_unwrap(outcome.result) {
        if let codemode_runtime::tools::ToolOutcome::Success { value, .. } = result.outcome {
            json::drop_deep(value);
        }
    }
    code
}

//! The execution backends behind an agent's most used tools, as ordinary registry tools:
//! `bash` (a fresh `bash -c` per call, in the foreground or as a background job), the jobs
//! tools `job_output`, `job_list` and `job_kill`, and persistent terminals (`terminal_open`,
//! `terminal_send`, `terminal_read`, `terminal_signal`, `terminal_close`, `terminal_list`). Every process is a managed tree
//! ([`subprocess`]) started through a replaceable [`backend::Backend`] (`local`, or `sandbox`
//! which confines it), in a working directory that never leaves the workspace
//! ([`workspace`]).
//!
//! Nothing here is registered unless asked (`codemode run --exec`, `codemode mcp --exec`, or
//! [`register`] from a library).

pub mod backend;
pub mod bash;
mod descriptors;
pub mod environment;
mod error;
pub mod jobs;
pub mod sandbox;
mod signals;
pub mod stream;
pub mod subprocess;
mod supervisor;
pub mod terminal;
pub mod workspace;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use codemode_runtime::tools::schema::dsl::{
    array, boolean, null, number, object, one_of, string, Annotate, Parameters,
};
use codemode_runtime::tools::{
    ContentBlock, RegistrationGuard, Registry, RegistryError, Schema, ToolDefinition, ToolError,
    ToolOutput, ToolRunContext,
};
use serde_json::{json, Value};

use backend::Backend;
use jobs::{JobLimits, Jobs, Owner};
use terminal::{TerminalLimits, Terminals};
use workspace::Workspace;

pub use error::SetupError;

/// Timeouts and limits of the execution tools.
#[derive(Clone, Debug)]
pub struct ExecConfig {
    /// A foreground command's timeout when the call names none.
    pub default_timeout: Duration,
    /// The longest timeout a call may ask for.
    pub max_timeout: Duration,
    /// SIGTERM to SIGKILL when a command is stopped.
    pub grace: Duration,
    pub jobs: JobLimits,
    pub terminals: TerminalLimits,
    /// Commands (foreground, background and terminal shells) running at once across every
    /// owner; past it a call is refused at once.
    pub max_processes: usize,
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            grace: Duration::from_secs(2),
            jobs: JobLimits::default(),
            terminals: TerminalLimits::default(),
            max_processes: 128,
        }
    }
}

/// The execution runtime: the workspace, the backend, `bash` itself, and the jobs.
pub struct Exec {
    pub workspace: Workspace,
    pub backend: Arc<dyn Backend>,
    pub bash: PathBuf,
    pub config: ExecConfig,
    pub jobs: Arc<Jobs>,
    pub terminals: Arc<Terminals>,
    running: Arc<tokio::sync::Semaphore>,
}

impl Exec {
    /// An execution runtime over `root` on `backend`; `Err` says what is missing.
    pub fn new(
        root: &Path,
        backend: Arc<dyn Backend>,
        config: ExecConfig,
    ) -> Result<Arc<Self>, SetupError> {
        let workspace = Workspace::new(root)?;
        let bash = subprocess::which("bash").map_err(|reason| SetupError::MissingProgram {
            name: "bash".to_owned(),
            reason,
        })?;
        let jobs = Jobs::new(config.jobs.clone());
        let terminals = Terminals::new(config.terminals.clone());
        let running = Arc::new(tokio::sync::Semaphore::new(config.max_processes));
        Ok(Arc::new(Self {
            workspace,
            backend,
            bash,
            config,
            jobs,
            terminals,
            running,
        }))
    }

    /// A place among the commands running at once, or why there is none.
    fn admit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, String> {
        self.running.clone().try_acquire_owned().map_err(|_| {
            format!(
                "{} commands are already running across all sessions, the most this server allows; wait for one to finish (or kill a job) and try again",
                self.config.max_processes
            )
        })
    }

    /// Ends every job and terminal of `owner` (an agent scope that is going away).
    pub async fn dispose_owner(&self, owner: Owner) {
        self.jobs.dispose_owner(owner).await;
        self.terminals.dispose_owner(owner).await;
    }

    /// Ends every job and terminal (terminate then wait): call before the process exits.
    pub async fn shutdown(&self) {
        self.jobs.shutdown().await;
        self.terminals.shutdown().await;
    }
}

/// The owner of what a call starts: its agent scope.
fn owner(ctx: &ToolRunContext) -> Owner {
    ctx.agent().map_or(0, |agent| agent.id())
}

fn schema(result: Result<Schema, codemode_runtime::tools::SchemaError>) -> Schema {
    // Every schema here is a literal of the DSL, checked by the registration test.
    result.unwrap_or_else(|_| Schema::empty_parameters())
}

fn text(content: String) -> Result<Vec<ContentBlock>, ToolError> {
    Ok(vec![ContentBlock::text(content)])
}

fn json_render(_args: &Value, value: &Value) -> Result<Vec<ContentBlock>, ToolError> {
    text(codemode_runtime::json::to_string(value))
}

/// A non-negative whole number of milliseconds or bytes, when given.
fn count(args: &Value, name: &str) -> Result<Option<u64>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0 && n.fract() == 0.0 && *n <= 9.0e15)
            .map(|n| Some(n as u64))
            .ok_or_else(|| {
                ToolError::invalid_arguments(format!("\"{name}\" must be a whole number ≥ 0"))
            }),
    }
}

fn job_id(args: &Value) -> String {
    args.get("jobId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn exit_code() -> codemode_runtime::tools::schema::dsl::OneOfSpec {
    one_of(number(), null())
}

fn bash_tool(exec: Arc<Exec>) -> ToolDefinition {
    let parameters = Parameters::new()
        .required("command", string().description("The bash command to execute."))
        .required(
            "description",
            string().description("Clear, concise description of what this command does in active voice, 5-10 words (shown in the UI). Examples: \"ls\" → \"List files in current directory\"; \"git status\" → \"Show working tree status\"; \"npm install\" → \"Install package dependencies\"."),
        )
        .optional(
            "timeoutMs",
            number().description("Timeout in milliseconds. The executor applies its configured default and cap, and kills the command on expiry."),
        )
        .optional(
            "workdir",
            string().description("Working directory for this command. Defaults to the session workspace; a relative path is resolved against it."),
        )
        .optional(
            "run_in_background",
            boolean().description("Run in the background and return a job id immediately (collect with job_output, stop with job_kill). No timeout applies."),
        );
    let finished = object(false)
        .required("output", string())
        .required("exitCode", exit_code())
        .required("timedOut", boolean())
        .required("truncated", boolean());
    let started = object(false)
        .required("kind", string().constant("background"))
        .required("jobId", string());
    ToolDefinition::builder("bash")
        .description(format!(
            "Run a bash command. Each call runs in a new shell: nothing (cwd, variables, functions) carries over between calls, so pass workdir instead of using cd. Output is stdout and stderr interleaved, cut in the middle past {} KiB. Backend: {}.",
            (bash::KEEP_HEAD_BYTES + bash::KEEP_TAIL_BYTES) / 1024,
            exec.backend.name()
        ))
        .parameters(schema(Schema::parameters(parameters)))
        .output(ToolOutput::new(
            schema(Schema::value(one_of(finished, started))),
            |_args, value| text(bash::render(value)),
        ))
        .present_call(|args| {
            Some(json!({
                "card": "terminal",
                "command": args.get("command").cloned().unwrap_or(Value::Null),
                "description": args.get("description").cloned().unwrap_or(Value::Null),
            }))
        })
        .execute(move |args, ctx| {
            let exec = exec.clone();
            async move {
                let timeout = match count(&args, "timeoutMs")? {
                    Some(0) => return Err(ToolError::invalid_arguments("\"timeoutMs\" must be positive")),
                    other => other.map(Duration::from_millis),
                };
                let call = bash::BashArgs {
                    command: args
                        .get("command")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    timeout,
                    workdir: args
                        .get("workdir")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    background: args.get("run_in_background") == Some(&Value::Bool(true)),
                };
                let result = if call.background {
                    bash::background(&exec, &call, owner(&ctx), ctx.signal()).await
                } else {
                    bash::foreground(&exec, &call, ctx.signal()).await
                };
                result.map_err(ToolError::new)
            }
        })
        .build()
}

fn job_output_tool(exec: Arc<Exec>) -> ToolDefinition {
    let parameters = Parameters::new()
        .required("jobId", string().description("The job, as bash returned it."))
        .optional(
            "offset",
            number().description("Read from this byte offset (0 re-reads what is still retained); by default, from where the last read ended."),
        )
        .optional(
            "waitMs",
            number().description(format!(
                "When there is no new output yet, wait up to this long for some (at most {} ms).",
                exec.config.jobs.max_wait.as_millis()
            )),
        );
    let value = object(false)
        .required("output", string())
        .required("offset", number())
        .required("running", boolean())
        .required("exitCode", exit_code());
    ToolDefinition::builder("job_output")
        .description("Read a background job's output (stdout and stderr interleaved) from an offset; returns the offset to continue from.")
        .parameters(schema(Schema::parameters(parameters)))
        .output(ToolOutput::new(schema(Schema::value(value)), |_args, value| {
            let output = value.get("output").and_then(Value::as_str).unwrap_or("");
            let state = match (value.get("running"), value.get("exitCode")) {
                (Some(Value::Bool(true)), _) => "[running]".to_owned(),
                (_, Some(Value::Number(code))) => format!("[exit code: {code}]"),
                _ => "[exit code: none (killed by a signal)]".to_owned(),
            };
            let offset = value.get("offset").cloned().unwrap_or(Value::Null);
            text(format!("{output}{}{state} [offset: {offset}]", if output.is_empty() || output.ends_with('\n') { "" } else { "\n" }))
        }))
        .concurrency_safe(|_| true)
        .execute(move |args, ctx| {
            let exec = exec.clone();
            async move {
                let offset = count(&args, "offset")?;
                let wait = Duration::from_millis(count(&args, "waitMs")?.unwrap_or(0));
                let read = exec
                    .jobs
                    .output(owner(&ctx), &job_id(&args), offset, wait, ctx.signal())
                    .await
                    .map_err(ToolError::new)?;
                Ok(json!({
                    "output": read.slice.text,
                    "offset": read.slice.next,
                    // Until its output is all read: a reader stops at `running: false`.
                    "running": !read.finished,
                    "exitCode": read.exit.and_then(|e| e.code),
                }))
            }
        })
        .build()
}

fn job_list_tool(exec: Arc<Exec>) -> ToolDefinition {
    let job = object(false)
        .required("jobId", string())
        .required("command", string())
        .required("running", boolean())
        .required("exitCode", exit_code());
    ToolDefinition::builder("job_list")
        .description("List this agent's background jobs, oldest first.")
        .parameters(schema(Schema::parameters(Parameters::new())))
        .output(ToolOutput::new(
            schema(Schema::value(object(false).required("jobs", array(job)))),
            json_render,
        ))
        .concurrency_safe(|_| true)
        .execute(move |_args, ctx| {
            let exec = exec.clone();
            async move {
                let jobs: Vec<Value> = exec
                    .jobs
                    .list(owner(&ctx))
                    .into_iter()
                    .map(|job| {
                        json!({
                            "jobId": job.id,
                            "command": job.command,
                            "running": job.exit.is_none(),
                            "exitCode": job.exit.and_then(|e| e.code),
                        })
                    })
                    .collect();
                Ok(json!({ "jobs": jobs }))
            }
        })
        .build()
}

fn job_kill_tool(exec: Arc<Exec>) -> ToolDefinition {
    ToolDefinition::builder("job_kill")
        .description("Stop a background job and its whole process group (SIGTERM, then SIGKILL after a grace period).")
        .parameters(schema(Schema::parameters(
            Parameters::new().required("jobId", string()),
        )))
        .output(ToolOutput::new(
            schema(Schema::value(
                object(false)
                    .required("jobId", string())
                    .required("killed", boolean()),
            )),
            json_render,
        ))
        .execute(move |args, ctx| {
            let exec = exec.clone();
            async move {
                let id = job_id(&args);
                let killed = exec
                    .jobs
                    .kill(owner(&ctx), &id)
                    .await
                    .map_err(ToolError::new)?;
                Ok(json!({ "jobId": id, "killed": killed }))
            }
        })
        .build()
}

fn terminal_id_parameters() -> Parameters {
    Parameters::new().required(
        "terminalId",
        string().description("The terminal, as terminal_open returned it."),
    )
}

fn terminal_id(args: &Value) -> String {
    args.get("terminalId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A terminal size from `name`, within 1..=1000, or `default`.
fn size(args: &Value, name: &str, default: u16) -> Result<u16, ToolError> {
    match count(args, name)? {
        None => Ok(default),
        Some(n) if (1..=1000).contains(&n) => Ok(n as u16),
        Some(_) => Err(ToolError::invalid_arguments(format!(
            "\"{name}\" must be between 1 and 1000"
        ))),
    }
}

fn terminal_tools(exec: &Arc<Exec>) -> Vec<ToolDefinition> {
    let open = {
        let exec = exec.clone();
        ToolDefinition::builder("terminal_open")
            .description("Open a persistent terminal (an interactive bash on a pseudo-terminal) whose state (cwd, variables, running programs) lasts across calls; use it for multi-step or interactive work, bash for one-off commands.")
            .parameters(schema(Schema::parameters(
                Parameters::new()
                    .optional("cwd", string().description("Working directory, relative to the workspace."))
                    .optional("cols", number().description("Columns (default 120)."))
                    .optional("rows", number().description("Rows (default 40).")),
            )))
            .output(ToolOutput::new(
                schema(Schema::value(object(false).required("terminalId", string()))),
                json_render,
            ))
            .execute(move |args, ctx| {
                let exec = exec.clone();
                async move {
                    let cols = size(&args, "cols", 120)?;
                    let rows = size(&args, "rows", 40)?;
                    let cwd = args.get("cwd").and_then(Value::as_str);
                    let id = exec
                        .terminals
                        .open(&exec, owner(&ctx), cwd, cols, rows)
                        .await
                        .map_err(ToolError::new)?;
                    Ok(json!({ "terminalId": id }))
                }
            })
            .build()
    };
    let send = {
        let exec = exec.clone();
        ToolDefinition::builder("terminal_send")
            .description("Type input into a terminal (end a command with \\n to run it).")
            .parameters(schema(Schema::parameters(
                terminal_id_parameters().required("input", string()),
            )))
            .output(ToolOutput::new(
                schema(Schema::value(
                    object(false)
                        .required("terminalId", string())
                        .required("bytes", number()),
                )),
                json_render,
            ))
            .execute(move |args, ctx| {
                let exec = exec.clone();
                async move {
                    let id = terminal_id(&args);
                    let input = args.get("input").and_then(Value::as_str).unwrap_or("");
                    let bytes = exec
                        .terminals
                        .send(owner(&ctx), &id, input)
                        .await
                        .map_err(ToolError::new)?;
                    Ok(json!({ "terminalId": id, "bytes": bytes }))
                }
            })
            .build()
    };
    let read = {
        let exec = exec.clone();
        ToolDefinition::builder("terminal_read")
            .description("Read a terminal's output from an offset; returns the offset to continue from.")
            .parameters(schema(Schema::parameters(
                terminal_id_parameters()
                    .optional("offset", number().description("Read from this byte offset (0: from the start of the scrollback); by default, from where the last read ended."))
                    .optional("waitMs", number().description("When there is no new output yet, wait up to this long for some (at most 60000 ms).")),
            )))
            .output(ToolOutput::new(
                schema(Schema::value(
                    object(false)
                        .required("output", string())
                        .required("offset", number())
                        .required("exited", boolean()),
                )),
                |_args, value| {
                    let output = value.get("output").and_then(Value::as_str).unwrap_or("");
                    let exited = value.get("exited") == Some(&Value::Bool(true));
                    text(format!(
                        "{output}{}",
                        if exited { "\n[the terminal's shell has exited]" } else { "" }
                    ))
                },
            ))
            .concurrency_safe(|_| true)
            .execute(move |args, ctx| {
                let exec = exec.clone();
                async move {
                    let offset = count(&args, "offset")?;
                    let wait = Duration::from_millis(count(&args, "waitMs")?.unwrap_or(0))
                        .min(Duration::from_secs(60));
                    let (slice, exited) = exec
                        .terminals
                        .read(owner(&ctx), &terminal_id(&args), offset, wait, ctx.signal())
                        .await
                        .map_err(ToolError::new)?;
                    Ok(json!({ "output": slice.text, "offset": slice.next, "exited": exited }))
                }
            })
            .build()
    };
    let signal = {
        let exec = exec.clone();
        ToolDefinition::builder("terminal_signal")
            .description("Send a signal to the program running in the foreground of a terminal (SIGINT is Ctrl-C).")
            .parameters(schema(Schema::parameters(terminal_id_parameters().required(
                "signal",
                string().enum_values(terminal::SIGNALS.iter().map(|(name, _)| *name)),
            ))))
            .output(ToolOutput::new(
                schema(Schema::value(
                    object(false)
                        .required("terminalId", string())
                        .required("delivered", boolean()),
                )),
                json_render,
            ))
            .execute(move |args, ctx| {
                let exec = exec.clone();
                async move {
                    let id = terminal_id(&args);
                    let name = args.get("signal").and_then(Value::as_str).unwrap_or("");
                    let delivered = exec
                        .terminals
                        .signal(owner(&ctx), &id, name)
                        .map_err(ToolError::new)?;
                    Ok(json!({ "terminalId": id, "delivered": delivered }))
                }
            })
            .build()
    };
    let close = {
        let exec = exec.clone();
        ToolDefinition::builder("terminal_close")
            .description("Close a terminal and end everything running in it.")
            .parameters(schema(Schema::parameters(terminal_id_parameters())))
            .output(ToolOutput::new(
                schema(Schema::value(
                    object(false)
                        .required("terminalId", string())
                        .required("closed", boolean()),
                )),
                json_render,
            ))
            .execute(move |args, ctx| {
                let exec = exec.clone();
                async move {
                    let id = terminal_id(&args);
                    exec.terminals
                        .close(owner(&ctx), &id)
                        .await
                        .map_err(ToolError::new)?;
                    Ok(json!({ "terminalId": id, "closed": true }))
                }
            })
            .build()
    };
    let list = {
        let exec = exec.clone();
        let entry = object(false)
            .required("terminalId", string())
            .required("cwd", string())
            .required("running", boolean());
        ToolDefinition::builder("terminal_list")
            .description("List this agent's open terminals, oldest first.")
            .parameters(schema(Schema::parameters(Parameters::new())))
            .output(ToolOutput::new(
                schema(Schema::value(
                    object(false).required("terminals", array(entry)),
                )),
                json_render,
            ))
            .concurrency_safe(|_| true)
            .execute(move |_args, ctx| {
                let exec = exec.clone();
                async move {
                    let terminals: Vec<Value> = exec
                        .terminals
                        .list(owner(&ctx))
                        .into_iter()
                        .map(|t| json!({ "terminalId": t.id, "cwd": t.cwd, "running": t.running }))
                        .collect();
                    Ok(json!({ "terminals": terminals }))
                }
            })
            .build()
    };
    vec![open, send, read, signal, close, list]
}

/// The execution tools over `exec`.
pub fn definitions(exec: &Arc<Exec>) -> Vec<ToolDefinition> {
    let mut tools = vec![
        bash_tool(exec.clone()),
        job_output_tool(exec.clone()),
        job_list_tool(exec.clone()),
        job_kill_tool(exec.clone()),
    ];
    tools.extend(terminal_tools(exec));
    tools
}

/// Registers the execution tools over `exec` in `registry`'s global layer.
pub fn register(registry: &Registry, exec: &Arc<Exec>) -> Result<RegistrationGuard, RegistryError> {
    registry.register_all(definitions(exec), None)
}

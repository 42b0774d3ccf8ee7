//! Upstream MCP servers: each is started over stdio (in its own process group, killed with
//! codemode), and each of its tools becomes a registry tool `mcp__<server>__<tool>` whose calls
//! go through the whole pipeline before they reach the server.
//!
//! What a program receives from a call: for a tool that declares an `outputSchema`, its
//! `structuredContent` (or, failing that, its text content parsed as JSON), validated against
//! that schema; for any other tool, its text content, a string. Images in a result are handed to
//! the loop as a deferred context (so `run_code` attaches them after the run); an `isError`
//! result is a tool failure whose message is the result's text.
//!
//! A server that exits, or that writes anything but JSON-RPC on stdout, is cut off: its
//! in-flight calls fail and later calls fail at once, each with an error naming the server.
//! A call the program abandons (its signal fires) is dropped, which sends the server the MCP
//! cancellation notification.

use std::collections::{BTreeMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_runtime::json;
use codemode_runtime::tools::{
    ContentBlock, ContextMessage, ContextSource, Schema, ToolDefinition, ToolError, ToolOutput,
    ToolRunContext,
};
use futures::StreamExt;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::codec::{FramedRead, LinesCodec};
use tracing::Instrument;

/// Longest line an upstream may write (rmcp's own default).
const MAX_LINE: usize = 16 * 1024 * 1024;
/// Lines of an upstream's stderr kept for error messages.
const STDERR_TAIL: usize = 20;
/// How long an upstream may take to start and list its tools.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How to start one upstream server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSpec {
    /// The server's name: tools are registered as `mcp__<name>__<tool>`.
    pub name: String,
    /// The program to run.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
}

/// Why an upstream server cannot be configured or started.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// A server name outside `[A-Za-z0-9_-]+` (it becomes part of tool names).
    #[error("mcp server name {name:?} must be letters, digits, `_` or `-`")]
    Name {
        /// The name as given.
        name: String,
    },
    /// A `--mcp NAME=COMMAND` flag that does not parse.
    #[error("--mcp {flag}: {problem}")]
    Flag {
        /// The flag (or, once it parsed that far, the server's name).
        flag: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A `{"mcpServers": …}` configuration that does not have that shape.
    #[error("{at}{problem}")]
    Config {
        /// Where (`mcpServers.NAME: `), empty for the whole file.
        at: String,
        /// What is wrong there.
        problem: String,
    },
    /// The server's command could not be spawned.
    #[error("mcp server \"{name}\" could not start `{command}`: {source}")]
    Spawn {
        /// The server.
        name: String,
        /// Its command.
        command: String,
        /// Why it could not be spawned.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// The server started but did not complete the handshake and list its tools.
    #[error("mcp server \"{name}\" did not start: {reason}{stderr_tail}")]
    Handshake {
        /// The server.
        name: String,
        /// What went wrong (its exit, a protocol error, no answer in time).
        reason: String,
        /// The last lines it wrote to stderr, as `; its stderr ended with: …`, or empty.
        stderr_tail: String,
    },
}

fn check_name(name: &str) -> Result<(), UpstreamError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(UpstreamError::Name {
            name: name.to_owned(),
        })
    }
}

fn flag_error(flag: &str, problem: impl Into<String>) -> UpstreamError {
    UpstreamError::Flag {
        flag: flag.to_owned(),
        problem: problem.into(),
    }
}

fn config_error(name: Option<&str>, problem: impl Into<String>) -> UpstreamError {
    UpstreamError::Config {
        at: name.map_or_else(String::new, |name| format!("mcpServers.{name}: ")),
        problem: problem.into(),
    }
}

impl UpstreamSpec {
    /// Parses `NAME=COMMAND`, the command split as a shell would (quotes respected, nothing
    /// expanded).
    pub fn from_flag(flag: &str) -> Result<Self, UpstreamError> {
        let Some((name, command)) = flag.split_once('=') else {
            return Err(flag_error(&format!("{flag:?}"), "expected NAME=COMMAND"));
        };
        check_name(name)?;
        let words = shlex::split(command)
            .ok_or_else(|| flag_error(name, format!("unbalanced quotes in {command:?}")))?;
        let mut words = words.into_iter();
        let Some(program) = words.next() else {
            return Err(flag_error(name, "the command is empty"));
        };
        Ok(Self {
            name: name.to_owned(),
            command: program,
            args: words.collect(),
            env: BTreeMap::new(),
        })
    }

    /// Reads the `{"mcpServers": {NAME: {command, args?, env?}}}` file MCP clients use.
    pub fn from_config(text: &str) -> Result<Vec<Self>, UpstreamError> {
        let config: Value =
            serde_json::from_str(text).map_err(|e| config_error(None, format!("not JSON: {e}")))?;
        let Some(servers) = config.get("mcpServers").and_then(Value::as_object) else {
            return Err(config_error(
                None,
                "expected an object with an \"mcpServers\" object",
            ));
        };
        let mut specs = Vec::new();
        for (name, entry) in servers {
            check_name(name)?;
            let field = |key: &str| entry.get(key);
            let Some(command) = field("command").and_then(Value::as_str) else {
                return Err(config_error(Some(name), "\"command\" must be a string"));
            };
            let args = match field("args") {
                None => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| a.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| config_error(Some(name), "\"args\" must be strings"))?,
                Some(_) => return Err(config_error(Some(name), "\"args\" must be an array")),
            };
            let env = match field("env") {
                None => BTreeMap::new(),
                Some(Value::Object(vars)) => vars
                    .iter()
                    .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect::<Option<BTreeMap<_, _>>>()
                    .ok_or_else(|| config_error(Some(name), "\"env\" values must be strings"))?,
                Some(_) => return Err(config_error(Some(name), "\"env\" must be an object")),
            };
            specs.push(Self {
                name: name.clone(),
                command: command.to_owned(),
                args,
                env,
            });
        }
        Ok(specs)
    }
}

/// Why a server stopped answering, once it has.
#[derive(Default)]
struct Health {
    down: Mutex<Option<String>>,
    stderr: Mutex<VecDeque<String>>,
}

impl Health {
    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn down(&self) -> Option<String> {
        Self::lock(&self.down).clone()
    }

    fn mark_down(&self, reason: String) {
        let mut down = Self::lock(&self.down);
        if down.is_none() {
            tracing::warn!("an upstream mcp server is down: {reason}");
            *down = Some(reason);
        }
    }

    fn stderr_tail(&self) -> String {
        let tail = Self::lock(&self.stderr);
        if tail.is_empty() {
            String::new()
        } else {
            let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
            format!("; its stderr ended with: {}", lines.join(" | "))
        }
    }
}

/// A running upstream server and the tools it listed.
pub struct Upstream {
    name: String,
    service: RunningService<RoleClient, ()>,
    health: Arc<Health>,
    child: Arc<Mutex<Box<dyn ChildWrapper>>>,
    tools: Vec<rmcp::model::Tool>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        // The whole process group: a server started through `npx` or a shell has children.
        let _ = Health::lock(&self.child).start_kill();
    }
}

impl Upstream {
    /// Starts `spec` and lists its tools, within `timeout`.
    pub async fn start(spec: &UpstreamSpec, timeout: Duration) -> Result<Self, UpstreamError> {
        let name = spec.name.clone();
        let mut command = CommandWrap::with_new(&spec.command, |c| {
            // codemode's own secrets are not the server's (its configuration may still pass
            // them explicitly).
            c.args(&spec.args)
                .env_remove(super::server::TOKEN_ENV)
                .env_remove(crate::durable::KEY_ENV)
                .envs(&spec.env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        });
        command.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let mut child = command.spawn().map_err(|source| UpstreamError::Spawn {
            name: name.clone(),
            command: spec.command.clone(),
            source: Arc::new(source),
        })?;
        let (Some(stdin), Some(stdout), stderr) = (
            child.stdin().take(),
            child.stdout().take(),
            child.stderr().take(),
        ) else {
            return Err(UpstreamError::Handshake {
                name,
                reason: "no stdio pipes".to_owned(),
                stderr_tail: String::new(),
            });
        };
        let health = Arc::new(Health::default());
        let child = Arc::new(Mutex::new(child));
        if let Some(stderr) = stderr {
            tokio::spawn(keep_stderr_tail(stderr, health.clone()));
        }
        let (reader, filtered) = tokio::io::duplex(64 * 1024);
        tokio::spawn(pass_json_rpc_only(
            stdout,
            filtered,
            health.clone(),
            child.clone(),
        ));
        let started = tokio::time::timeout(timeout, async {
            let service = ().serve((reader, stdin)).await.map_err(|e| e.to_string())?;
            let tools = service.list_all_tools().await.map_err(|e| e.to_string())?;
            Ok::<_, String>((service, tools))
        })
        .await;
        let failure = |why: String| {
            let reason = health.down().unwrap_or(why);
            let _ = Health::lock(&child).start_kill();
            UpstreamError::Handshake {
                name: name.clone(),
                reason,
                stderr_tail: health.stderr_tail(),
            }
        };
        let (service, tools) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(why)) => return Err(failure(why)),
            Err(_) => return Err(failure(format!("no answer within {timeout:?}"))),
        };
        tokio::spawn(watch_exit(child.clone(), health.clone()));
        Ok(Self {
            name,
            service,
            health,
            child,
            tools,
        })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the server still answers (it has not exited, closed its output or broken the
    /// protocol), as a check that outlives this handle: for a metrics scrape.
    pub fn liveness(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let health = self.health.clone();
        move || health.down().is_none()
    }

    /// The registry name of one of its tools.
    pub fn tool_name(&self, tool: &str) -> String {
        format!("mcp__{}__{tool}", self.name)
    }

    /// One definition per listed tool, and a note for each tool left out (a schema the
    /// validator cannot compile).
    pub fn definitions(&self) -> (Vec<ToolDefinition>, Vec<String>) {
        let mut definitions = Vec::new();
        let mut notes = Vec::new();
        for tool in &self.tools {
            match self.definition(tool) {
                Ok(definition) => definitions.push(definition),
                Err(why) => notes.push(format!(
                    "mcp server \"{}\": tool \"{}\" left out: {why}",
                    self.name, tool.name
                )),
            }
        }
        (definitions, notes)
    }

    fn definition(&self, tool: &rmcp::model::Tool) -> Result<ToolDefinition, String> {
        let input = Value::Object((*tool.input_schema).clone());
        let parameters = Schema::foreign(input).map_err(|e| format!("input schema: {e}"))?;
        let structured = tool.output_schema.is_some();
        let output = match &tool.output_schema {
            Some(schema) => Schema::foreign(Value::Object((**schema).clone()))
                .map_err(|e| format!("output schema: {e}"))?,
            None => Schema::raw(serde_json::json!({"type": "string"}))
                .map_err(|e| format!("output schema: {e}"))?,
        };
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or_default()
            .to_owned();
        let call = Call {
            server: self.name.clone(),
            tool: tool.name.to_string(),
            peer: self.service.peer().clone(),
            health: self.health.clone(),
            structured,
        };
        let call = Arc::new(call);
        let mut builder = ToolDefinition::builder(self.tool_name(&tool.name))
            .description(description)
            .parameters(parameters)
            .output(ToolOutput::new(output, |_, value| {
                Ok(vec![ContentBlock::text(match value {
                    Value::String(text) => text.clone(),
                    other => json::to_string(other),
                })])
            }))
            .execute(move |args, ctx| {
                let call = call.clone();
                async move { call.run(&args, &ctx).await }
            });
        if read_only {
            // Only a server's own `readOnlyHint` makes its calls overlap; anything else may
            // have side effects and runs alone.
            builder = builder.concurrency_safe(|_| true);
        }
        Ok(builder.build())
    }
}

/// What one tool's calls need.
struct Call {
    server: String,
    tool: String,
    peer: Peer<RoleClient>,
    health: Arc<Health>,
    structured: bool,
}

impl Call {
    fn unavailable(&self, why: &str) -> ToolError {
        ToolError::new(format!(
            "mcp server \"{}\" is unavailable: {why}",
            self.server
        ))
    }

    async fn run(&self, args: &Value, ctx: &ToolRunContext) -> Result<Value, ToolError> {
        if let Some(why) = self.health.down() {
            return Err(self.unavailable(&why));
        }
        let mut params = CallToolRequestParams::new(self.tool.clone());
        if let Value::Object(arguments) = args {
            // Validated against the tool's schema, whose nesting the validator caps.
            params = params.with_arguments(arguments.clone());
        }
        // The request's own span, inside the sub-call's; the server continues the trace from
        // the context it finds in `_meta`.
        let span = tracing::info_span!(
            "mcp_request",
            otel.name = format!("tools/call {}", self.tool),
            otel.kind = "client",
            mcp.method.name = "tools/call",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %self.tool,
            network.transport = "pipe",
            codemode.mcp.server = %self.server,
            "error.type" = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        super::trace::inject(&span, &mut params);
        // Dropping the request on cancellation sends the server `notifications/cancelled`.
        let answer = tokio::select! {
            answer = self.peer.call_tool(params).instrument(span.clone()) => answer,
            reason = ctx.signal().aborted() => {
                span.record("error.type", "cancelled");
                return Err(ToolError::new(format!(
                    "call to mcp server \"{}\" cancelled: {reason}",
                    self.server
                )))
            }
        };
        let result = match answer {
            Ok(result) => result,
            Err(error) => {
                span.record("error.type", "unavailable");
                span.record("otel.status_code", "ERROR");
                let why = self.health.down().unwrap_or_else(|| error.to_string());
                return Err(self.unavailable(&why));
            }
        };
        if result.is_error == Some(true) {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "ERROR");
        }
        let result = serde_json::to_value(&result)
            .map_err(|e| ToolError::new(format!("mcp server \"{}\": {e}", self.server)))?;
        self.value_of(result, ctx)
    }

    /// The program's value of a `tools/call` result; images go to the loop.
    fn value_of(&self, result: Value, ctx: &ToolRunContext) -> Result<Value, ToolError> {
        let mut texts = Vec::new();
        let mut images = Vec::new();
        for block in result
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => texts.push(
                    block
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                ),
                Some("image") => images.push(ContentBlock::Image {
                    data: block
                        .get("data")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    mime_type: block
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                }),
                // Resource links, embedded resources, audio: their JSON, as text.
                _ => texts.push(json::to_string(block)),
            }
        }
        let text = texts.join("\n");
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(ToolError::new(if text.is_empty() {
                format!("mcp tool \"{}\" reported an error", self.tool)
            } else {
                text
            }));
        }
        if !images.is_empty() {
            ctx.defer_context(ContextMessage {
                content: images,
                source: ContextSource {
                    kind: "tool".into(),
                    plugin: Some("mcp".into()),
                    form: None,
                    summary: Some(format!("{} image", ctx.name())),
                },
            });
        }
        if !self.structured {
            return Ok(Value::String(text));
        }
        if let Some(structured) = result.get("structuredContent") {
            return Ok(json::clone_deep(structured));
        }
        json::parse(text.as_bytes()).map_err(|e| {
            ToolError::new(format!(
                "mcp tool \"{}\" declares an output schema but answered neither structured content nor JSON text: {e}",
                self.tool
            ))
        })
    }
}

/// Forwards the server's stdout to rmcp line by line while every line is a JSON-RPC message;
/// the first line that is not cuts the server off (rmcp would skip it and leave the call that
/// waited for it hanging).
async fn pass_json_rpc_only(
    stdout: impl tokio::io::AsyncRead + Unpin,
    mut filtered: tokio::io::DuplexStream,
    health: Arc<Health>,
    child: Arc<Mutex<Box<dyn ChildWrapper>>>,
) {
    let mut lines = FramedRead::new(stdout, LinesCodec::new_with_max_length(MAX_LINE));
    while let Some(line) = lines.next().await {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                health.mark_down(format!("it wrote an unreadable line ({e})"));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let is_json_rpc = serde_json::from_str::<Value>(&line)
            .ok()
            .is_some_and(|v| v.get("jsonrpc").and_then(Value::as_str) == Some("2.0"));
        if !is_json_rpc {
            let shown: String = line.chars().take(80).collect();
            health.mark_down(format!("it wrote a line that is not JSON-RPC: {shown:?}"));
            break;
        }
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        if filtered.write_all(&bytes).await.is_err() {
            return;
        }
    }
    // A server that exits closes its output first: give the exit a moment to be seen, so
    // the reason names it.
    for _ in 0..10 {
        if let Ok(Some(status)) = Health::lock(&child).try_wait() {
            health.mark_down(format!("its process exited ({status})"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    health.mark_down("its standard output closed".to_owned());
    let _ = Health::lock(&child).start_kill();
    // Dropping `filtered` ends rmcp's input: every call still waiting fails.
}

async fn keep_stderr_tail(stderr: impl tokio::io::AsyncRead + Unpin, health: Arc<Health>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut tail = Health::lock(&health.stderr);
        if tail.len() == STDERR_TAIL {
            tail.pop_front();
        }
        tail.push_back(line.chars().take(500).collect());
    }
}

/// Notes the server's exit, so calls after it fail at once with its status.
async fn watch_exit(child: Arc<Mutex<Box<dyn ChildWrapper>>>, health: Arc<Health>) {
    loop {
        let status = Health::lock(&child).try_wait();
        match status {
            Ok(Some(status)) => {
                health.mark_down(format!("its process exited ({status})"));
                return;
            }
            Ok(None) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(_) => return,
        }
    }
}

/// Starts every server at once; the ones that fail are reported, the rest serve.
pub async fn start_all(specs: &[UpstreamSpec]) -> (Vec<Upstream>, Vec<UpstreamError>) {
    let started = futures::future::join_all(
        specs
            .iter()
            .map(|spec| Upstream::start(spec, STARTUP_TIMEOUT)),
    )
    .await;
    let mut upstreams = Vec::new();
    let mut failures = Vec::new();
    for outcome in started {
        match outcome {
            Ok(upstream) => upstreams.push(upstream),
            Err(failure) => failures.push(failure),
        }
    }
    (upstreams, failures)
}

//! Session events a host persists to replay what happened: `tool/call` and `tool/result` for
//! top-level calls, and the `tool/code-dispatch-start` / `tool/code-dispatch` pair that the
//! `run_code` tool appends for each sub-call. [`JsonlWriter`] writes one JSON object per line.
//!
//! Lines are written with the iterative JSON writer, so arguments of any depth are persisted
//! without recursion; reading back uses `serde_json`'s parser and its nesting limit (128), so
//! deeper lines are refused with an error rather than overflowing.

use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use super::content::ContentBlock;
use super::registry::{RegistrationGuard, Registry};
use super::result::ToolFailure;
use crate::json;

/// One persisted event. `time` is milliseconds since the Unix epoch.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionEvent {
    /// A top-level call started (`tool/call`).
    ToolCall {
        /// When the call started.
        time: u64,
        /// The call's id.
        call_id: String,
        /// The id of the top-level call it belongs to.
        root_call_id: String,
        /// The tool's name.
        name: String,
        /// The snapshotted arguments.
        arguments: Arc<Value>,
        /// The calling agent scope's id.
        agent: Option<u64>,
    },
    /// A top-level call's final result (`tool/result`).
    ToolResult {
        /// When the result was final.
        time: u64,
        /// The call's id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// Whether the result is an error.
        is_error: bool,
        /// The final content shown to the model.
        content: Vec<ContentBlock>,
        /// The structured failure, for error results.
        error: Option<ToolFailure>,
        /// The result's metadata, if any.
        meta: Option<Value>,
        /// Milliseconds from the call's start to its final result.
        duration_ms: u64,
    },
    /// A `run_code` sub-call started (before its pre-execute stage).
    CodeDispatchStart {
        /// When the sub-call started.
        time: u64,
        /// The id of the top-level call the program runs under.
        root_call_id: String,
        /// The id of the `run_code` call that made the sub-call.
        parent_call_id: String,
        /// The sub-call's id.
        sub_call_id: String,
        /// The called tool's name.
        name: String,
        /// The sub-call's arguments.
        arguments: Arc<Value>,
    },
    /// A `run_code` sub-call settled, with its complete content.
    CodeDispatch {
        /// When the sub-call settled.
        time: u64,
        /// The id of the top-level call the program runs under.
        root_call_id: String,
        /// The id of the `run_code` call that made the sub-call.
        parent_call_id: String,
        /// The sub-call's id.
        sub_call_id: String,
        /// The called tool's name.
        name: String,
        /// The sub-call's arguments.
        arguments: Arc<Value>,
        /// Whether the sub-call failed.
        is_error: bool,
        /// The sub-call's final content.
        content: Vec<ContentBlock>,
        /// Milliseconds from the sub-call's start to its commit.
        duration_ms: u64,
    },
}

/// Whole milliseconds since `start`.
pub fn elapsed_ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

enum Field<'a> {
    Str(&'a str),
    Json(&'a Value),
    Bool(bool),
    Num(u64),
    Serde(String),
}

fn write_object(fields: &[(&str, Field<'_>)]) -> String {
    let mut line = String::from("{");
    for (index, (key, field)) in fields.iter().enumerate() {
        if index > 0 {
            line.push(',');
        }
        json::write_string(key, &mut line);
        line.push(':');
        match field {
            Field::Str(s) => json::write_string(s, &mut line),
            Field::Json(v) => json::write(v, &mut line),
            Field::Bool(b) => line.push_str(if *b { "true" } else { "false" }),
            Field::Num(n) => line.push_str(&n.to_string()),
            Field::Serde(s) => line.push_str(s),
        }
    }
    line.push('}');
    line
}

fn serde_text<T: serde::Serialize>(value: &T) -> String {
    // Content blocks and failures are flat records of strings; serializing them cannot fail.
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

impl SessionEvent {
    /// For a program's call starting or settling: its id, and a line that says so as it
    /// happens (`call echo started (c1:code:2)`, `call echo resolved in 3 ms (c1:code:2)`).
    pub fn sub_call_progress(&self) -> Option<(&str, String)> {
        match self {
            SessionEvent::CodeDispatchStart {
                sub_call_id, name, ..
            } => Some((sub_call_id, format!("call {name} started ({sub_call_id})"))),
            SessionEvent::CodeDispatch {
                sub_call_id,
                name,
                is_error,
                duration_ms,
                ..
            } => {
                let outcome = if *is_error { "rejected" } else { "resolved" };
                Some((
                    sub_call_id,
                    format!("call {name} {outcome} in {duration_ms} ms ({sub_call_id})"),
                ))
            }
            _ => None,
        }
    }

    /// The event's `type` tag.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionEvent::ToolCall { .. } => "tool/call",
            SessionEvent::ToolResult { .. } => "tool/result",
            SessionEvent::CodeDispatchStart { .. } => "tool/code-dispatch-start",
            SessionEvent::CodeDispatch { .. } => "tool/code-dispatch",
        }
    }

    /// The event as one compact JSON object (no trailing newline).
    pub fn to_json_line(&self) -> String {
        let kind = Field::Str(self.kind());
        match self {
            SessionEvent::ToolCall {
                time,
                call_id,
                root_call_id,
                name,
                arguments,
                agent,
            } => {
                let mut fields = vec![
                    ("type", kind),
                    ("time", Field::Num(*time)),
                    ("callId", Field::Str(call_id)),
                    ("rootCallId", Field::Str(root_call_id)),
                    ("name", Field::Str(name)),
                    ("arguments", Field::Json(arguments)),
                ];
                if let Some(agent) = agent {
                    fields.push(("agent", Field::Num(*agent)));
                }
                write_object(&fields)
            }
            SessionEvent::ToolResult {
                time,
                call_id,
                name,
                is_error,
                content,
                error,
                meta,
                duration_ms,
            } => {
                let mut fields = vec![
                    ("type", kind),
                    ("time", Field::Num(*time)),
                    ("durationMs", Field::Num(*duration_ms)),
                    ("callId", Field::Str(call_id)),
                    ("name", Field::Str(name)),
                    ("isError", Field::Bool(*is_error)),
                    ("content", Field::Serde(serde_text(content))),
                ];
                if let Some(error) = error {
                    fields.push(("error", Field::Serde(serde_text(error))));
                }
                if let Some(meta) = meta {
                    fields.push(("meta", Field::Json(meta)));
                }
                write_object(&fields)
            }
            SessionEvent::CodeDispatchStart {
                time,
                root_call_id,
                parent_call_id,
                sub_call_id,
                name,
                arguments,
            } => write_object(&[
                ("type", kind),
                ("time", Field::Num(*time)),
                ("rootCallId", Field::Str(root_call_id)),
                ("parentCallId", Field::Str(parent_call_id)),
                ("subCallId", Field::Str(sub_call_id)),
                ("name", Field::Str(name)),
                ("arguments", Field::Json(arguments)),
            ]),
            SessionEvent::CodeDispatch {
                time,
                root_call_id,
                parent_call_id,
                sub_call_id,
                name,
                arguments,
                is_error,
                content,
                duration_ms,
            } => write_object(&[
                ("type", kind),
                ("time", Field::Num(*time)),
                ("durationMs", Field::Num(*duration_ms)),
                ("rootCallId", Field::Str(root_call_id)),
                ("parentCallId", Field::Str(parent_call_id)),
                ("subCallId", Field::Str(sub_call_id)),
                ("name", Field::Str(name)),
                ("arguments", Field::Json(arguments)),
                ("isError", Field::Bool(*is_error)),
                ("content", Field::Serde(serde_text(content))),
            ]),
        }
    }

    /// Parses one line written by [`SessionEvent::to_json_line`].
    pub fn from_json_line(line: &str) -> Result<Self, io::Error> {
        let parsed: Value = serde_json::from_str(line).map_err(invalid)?;
        let Value::Object(mut map) = parsed else {
            return Err(invalid("event is not an object"));
        };
        let kind = take_string(&mut map, "type")?;
        let time = map.get("time").and_then(Value::as_u64).unwrap_or(0);
        let duration_ms = map.get("durationMs").and_then(Value::as_u64).unwrap_or(0);
        Ok(match kind.as_str() {
            "tool/call" => SessionEvent::ToolCall {
                time,
                call_id: take_string(&mut map, "callId")?,
                root_call_id: take_string(&mut map, "rootCallId")?,
                name: take_string(&mut map, "name")?,
                arguments: Arc::new(map.remove("arguments").unwrap_or(Value::Null)),
                agent: map.get("agent").and_then(Value::as_u64),
            },
            "tool/result" => SessionEvent::ToolResult {
                time,
                call_id: take_string(&mut map, "callId")?,
                name: take_string(&mut map, "name")?,
                is_error: map.get("isError").and_then(Value::as_bool).unwrap_or(false),
                content: take_serde(&mut map, "content")?.unwrap_or_default(),
                error: take_serde(&mut map, "error")?,
                meta: map.remove("meta"),
                duration_ms,
            },
            "tool/code-dispatch-start" => SessionEvent::CodeDispatchStart {
                time,
                root_call_id: take_string(&mut map, "rootCallId")?,
                parent_call_id: take_string(&mut map, "parentCallId")?,
                sub_call_id: take_string(&mut map, "subCallId")?,
                name: take_string(&mut map, "name")?,
                arguments: Arc::new(map.remove("arguments").unwrap_or(Value::Null)),
            },
            "tool/code-dispatch" => SessionEvent::CodeDispatch {
                time,
                root_call_id: take_string(&mut map, "rootCallId")?,
                parent_call_id: take_string(&mut map, "parentCallId")?,
                sub_call_id: take_string(&mut map, "subCallId")?,
                name: take_string(&mut map, "name")?,
                arguments: Arc::new(map.remove("arguments").unwrap_or(Value::Null)),
                is_error: map.get("isError").and_then(Value::as_bool).unwrap_or(false),
                content: take_serde(&mut map, "content")?.unwrap_or_default(),
                duration_ms,
            },
            other => return Err(invalid(format!("unknown event type {other:?}"))),
        })
    }
}

fn invalid(error: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error.to_string())
}

fn take_string(map: &mut Map<String, Value>, key: &str) -> Result<String, io::Error> {
    match map.remove(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(invalid(format!("event field {key:?} must be a string"))),
    }
}

fn take_serde<T: serde::de::DeserializeOwned>(
    map: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<T>, io::Error> {
    map.remove(key)
        .map(|v| serde_json::from_value(v).map_err(invalid))
        .transpose()
}

/// Where session events go.
pub trait EventSink: Send + Sync + 'static {
    /// Persists one event, in the order events are appended.
    fn append(&self, event: &SessionEvent) -> io::Result<()>;
}

/// Hands every event to each of several sinks, in order; the first error is returned once all
/// have had it.
pub struct Fanout(pub Vec<Arc<dyn EventSink>>);

impl EventSink for Fanout {
    fn append(&self, event: &SessionEvent) -> io::Result<()> {
        let mut outcome = Ok(());
        for sink in &self.0 {
            if let Err(error) = sink.append(event) {
                if outcome.is_ok() {
                    outcome = Err(error);
                }
            }
        }
        outcome
    }
}

/// Writes one event per line to any writer (a file, a buffer).
pub struct JsonlWriter<W: Write + Send + 'static> {
    out: Mutex<W>,
}

impl<W: Write + Send + 'static> JsonlWriter<W> {
    /// A writer that appends to `out`.
    pub fn new(out: W) -> Self {
        Self {
            out: Mutex::new(out),
        }
    }

    /// Gives back the underlying writer (for example a buffer to inspect).
    pub fn into_inner(self) -> W {
        self.out
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<W: Write + Send + 'static> EventSink for JsonlWriter<W> {
    fn append(&self, event: &SessionEvent) -> io::Result<()> {
        let mut line = event.to_json_line();
        line.push('\n');
        let mut out = self
            .out
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        out.write_all(line.as_bytes())?;
        out.flush()
    }
}

/// Reads every event of a JSONL stream (blank lines are skipped).
pub fn read_jsonl(reader: impl BufRead) -> io::Result<Vec<SessionEvent>> {
    let mut events = Vec::new();
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        events.push(SessionEvent::from_json_line(&line)?);
    }
    Ok(events)
}

/// Records `tool/call` and `tool/result` for every top-level call (nested calls are the
/// `run_code` tool's to log as code dispatches). Sink failures are logged, never propagated.
pub fn record(registry: &Registry, sink: Arc<dyn EventSink>) -> RegistrationGuard {
    let calls = sink.clone();
    let on_call = registry.on_call(move |call| {
        if call.parent().is_some() {
            return;
        }
        let event = SessionEvent::ToolCall {
            time: now_ms(),
            call_id: call.call_id().to_owned(),
            root_call_id: call.root_call_id().to_owned(),
            name: call.name().to_owned(),
            arguments: call.arguments().clone(),
            agent: call.agent().map(|a| a.id()),
        };
        if let Err(error) = calls.append(&event) {
            tracing::warn!(
                "tool \"{}\" ({}): event sink failed: {error}",
                call.name(),
                call.call_id()
            );
        }
    });
    let on_result = registry.on_result(move |call, result| {
        if call.parent().is_some() {
            return Ok(());
        }
        let event = SessionEvent::ToolResult {
            time: now_ms(),
            call_id: call.call_id().to_owned(),
            name: call.name().to_owned(),
            is_error: result.is_error(),
            content: result.content.clone(),
            error: result.error().cloned(),
            meta: result.meta.as_ref().map(crate::json::clone_deep),
            duration_ms: elapsed_ms(call.started()),
        };
        sink.append(&event)
            .map_err(|e| super::error::ToolError::new(format!("event sink failed: {e}")))
    });
    on_call.merge(on_result)
}

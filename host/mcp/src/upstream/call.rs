//! A call of an upstream server's tool: over whichever connection is current, in a span of its
//! own whose context travels in `_meta`, with the server's progress passed on to the client of
//! the call it belongs to, and its result turned into the program's value.

use std::sync::Arc;

use codemode_runtime::json;
use codemode_runtime::tools::{
    ContentBlock, ContextMessage, ContextSource, ToolError, ToolRunContext,
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, ContentBlock as Block, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::connection::PROGRESS_QUEUE;
use super::Link;

/// A request in flight: should the call end before its answer (cancelled, or dropped), the
/// server is sent `notifications/cancelled`.
struct Abandoned {
    peer: rmcp::service::Peer<rmcp::service::RoleClient>,
    /// `None` once answered.
    id: Option<rmcp::model::RequestId>,
    reason: String,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let cancelled =
            CancelledNotificationParam::new(Some(id), Some(std::mem::take(&mut self.reason)));
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.notify_cancelled(cancelled).await;
            });
        }
    }
}

/// What one tool's calls need.
pub(super) struct Call {
    pub(super) link: Arc<Link>,
    pub(super) tool: String,
    pub(super) structured: bool,
}

impl Call {
    fn unavailable(&self, why: &str) -> ToolError {
        ToolError::new(format!(
            "mcp server \"{}\" is unavailable: {why}",
            self.link.server()
        ))
    }

    pub(super) async fn run(&self, args: &Value, ctx: &ToolRunContext) -> Result<Value, ToolError> {
        // The server's questions during this call go to this call's agent.
        let _calling = ctx.agent().map(|agent| {
            self.link
                .client
                .questions
                .calling(self.link.server(), agent.id())
        });
        let connection = self.link.connection();
        if let Some(why) = connection.health.down() {
            return Err(self.unavailable(&self.link.explain(why)));
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
            network.transport = self.link.network_transport(),
            codemode.mcp.server = %self.link.server(),
            "error.type" = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        crate::trace::inject(&span, &mut params);
        let peer = connection.service.peer().clone();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let sent = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .instrument(span.clone())
            .await;
        let handle = match sent {
            Ok(handle) => handle,
            Err(error) => return Err(self.failed(&span, &connection, &error.to_string())),
        };
        // The server's progress reaches the client of the call this one belongs to, if it
        // asked for progress.
        let _route = crate::progress::sender_for(ctx.call_id()).map(|to| {
            let (tx, mut rx) = mpsc::channel::<String>(PROGRESS_QUEUE);
            let server = self.link.server().to_owned();
            tokio::spawn(async move {
                while let Some(message) = rx.recv().await {
                    let _ = to.try_send(format!("{server}: {message}"));
                }
            });
            self.link
                .progress()
                .route(handle.progress_token.clone(), tx)
        });
        let mut abandoned = Abandoned {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            reason: "the call was abandoned".to_owned(),
        };
        let answer = tokio::select! {
            answer = handle.await_response().instrument(span.clone()) => answer,
            reason = ctx.signal().aborted() => {
                span.record("error.type", "cancelled");
                abandoned.reason = reason.to_string();
                return Err(ToolError::new(format!(
                    "call to mcp server \"{}\" cancelled: {reason}",
                    self.link.server()
                )))
            }
        };
        abandoned.id = None;
        let result = match answer {
            Ok(ServerResult::CallToolResult(result)) => result,
            Ok(_) => {
                return Err(self.failed(
                    &span,
                    &connection,
                    "it answered tools/call with something else than a tool result",
                ))
            }
            Err(error) => return Err(self.failed(&span, &connection, &error.to_string())),
        };
        if result.is_error == Some(true) {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "ERROR");
        }
        self.value_of(result, ctx)
    }

    /// The error of a call the connection failed: why the server is down, if it is.
    fn failed(
        &self,
        span: &tracing::Span,
        connection: &super::connection::Connection,
        error: &str,
    ) -> ToolError {
        span.record("error.type", "unavailable");
        span.record("otel.status_code", "ERROR");
        let why = match connection.health.down() {
            Some(why) => self.link.explain(why),
            None => error.to_owned(),
        };
        self.unavailable(&why)
    }

    /// The program's value of a `tools/call` result; images go to the loop. The result is taken
    /// apart, not copied: its texts, images and structured content become the value as they are.
    fn value_of(&self, result: CallToolResult, ctx: &ToolRunContext) -> Result<Value, ToolError> {
        let CallToolResult {
            content,
            structured_content,
            is_error,
            ..
        } = result;
        let mut texts = Vec::new();
        let mut images = Vec::new();
        for block in content {
            match block {
                Block::Text(text) => texts.push(text.text),
                Block::Image(image) => images.push(ContentBlock::Image {
                    data: image.data,
                    mime_type: image.mime_type,
                }),
                // Resource links, embedded resources, audio: their JSON, as text.
                other => texts.push(
                    serde_json::to_value(&other)
                        .map(|block| json::to_string(&block))
                        .unwrap_or_default(),
                ),
            }
        }
        // One block (the usual answer) is the text itself, not a copy joined from one part.
        let text = if texts.len() == 1 {
            texts.pop().unwrap_or_default()
        } else {
            texts.join("\n")
        };
        if is_error == Some(true) {
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
        if let Some(structured) = structured_content {
            return Ok(structured);
        }
        json::parse(text.as_bytes()).map_err(|e| {
            ToolError::new(format!(
                "mcp tool \"{}\" declares an output schema but answered neither structured content nor JSON text: {e}",
                self.tool
            ))
        })
    }
}

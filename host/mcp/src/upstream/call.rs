//! A call of an upstream server's tool: over whichever connection is current, in a span of its
//! own whose context travels in `_meta`, with the server's progress passed on to the client of
//! the call it belongs to, and its result turned into the program's value.

use std::sync::Arc;

use codemode_runtime::json;
use codemode_runtime::tools::{
    ContentBlock, ContextMessage, ContextSource, InputAnswers, ToolError, ToolRunContext,
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, ContentBlock as Block, InputRequest, InputRequests, InputResponses,
    ServerResult, DEFAULT_MRTR_MAX_ROUNDS,
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

/// Why an attempt at a call failed.
enum Failure {
    /// The call's error.
    Tool(ToolError),
    /// The server refused the authorization of the connection, with this challenge.
    Refused(Arc<super::connection::Connection>, String),
}

impl From<ToolError> for Failure {
    fn from(error: ToolError) -> Self {
        Self::Tool(error)
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
        match self.attempt(args, ctx).await {
            Err(Failure::Refused(connection, challenge)) => {
                // The server refused the call's authorization (a token it no longer takes, a
                // scope it lacks): authorized again, the call is made once more.
                self.link
                    .reauthorize(&connection, &challenge)
                    .await
                    .map_err(ToolError::new)?;
                match self.attempt(args, ctx).await {
                    Err(Failure::Refused(..)) => Err(ToolError::new(format!(
                        "mcp server \"{}\" refused the call's authorization again after codemode authorized again; run `{}` with the scopes it needs",
                        self.link.server(),
                        self.link.client.authorization.login_command(self.link.server())
                    ))),
                    Err(Failure::Tool(error)) => Err(error),
                    Ok(value) => Ok(value),
                }
            }
            Err(Failure::Tool(error)) => Err(error),
            Ok(value) => Ok(value),
        }
    }

    /// One attempt at the call, over the current connection.
    async fn attempt(&self, args: &Value, ctx: &ToolRunContext) -> Result<Value, Failure> {
        let connection = self.link.connection();
        if let Some(why) = connection.health.down() {
            return Err(self.unavailable(&self.link.explain(why)).into());
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
        // A 2026-07-28 server may answer that it needs input first (its questions), then be
        // asked again with the answers and the state it gave, a bounded number of rounds.
        // A call made again after its run paused for the questions carries their answers.
        let mut rounds = 0;
        if let Some(answers) = ctx.answers() {
            rounds = resume_with(&mut params, answers);
        }
        let result = loop {
            match self
                .exchange(&connection, params.clone(), &span, ctx)
                .await?
            {
                ServerResult::CallToolResult(result) => break result,
                ServerResult::InputRequiredResult(required) if rounds < DEFAULT_MRTR_MAX_ROUNDS => {
                    rounds += 1;
                    let requests = required.input_requests.unwrap_or_default();
                    let asks = requests
                        .values()
                        .any(|r| matches!(r, InputRequest::Elicitation(_)));
                    let defers = ctx
                        .agent()
                        .is_some_and(|agent| self.link.client.questions.defers(agent.id()));
                    if asks && defers {
                        let needs =
                            self.deferred(requests, required.request_state, rounds, args)?;
                        return Err(Failure::Tool(needs));
                    }
                    params.input_responses = Some(self.answer(requests).await?);
                    params.request_state = required.request_state;
                }
                ServerResult::InputRequiredResult(_) => {
                    span.record("error.type", "unavailable");
                    return Err(self
                        .unavailable(&format!(
                            "it asked for input more than {DEFAULT_MRTR_MAX_ROUNDS} times for one call"
                        ))
                        .into());
                }
                _ => {
                    span.record("error.type", "unavailable");
                    return Err(self
                        .unavailable(
                            "it answered tools/call with something else than a tool result",
                        )
                        .into());
                }
            }
        };
        if result.is_error == Some(true) {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "ERROR");
        }
        self.value_of(result, ctx).map_err(Failure::from)
    }

    /// Sends `params` once and waits for the server's answer, which the call's signal may
    /// abandon.
    async fn exchange(
        &self,
        connection: &Arc<super::connection::Connection>,
        params: CallToolRequestParams,
        span: &tracing::Span,
        ctx: &ToolRunContext,
    ) -> Result<ServerResult, Failure> {
        let peer = connection.service.peer().clone();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let sent = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .instrument(span.clone())
            .await;
        let handle = match sent {
            Ok(handle) => handle,
            Err(error) => return Err(self.failed(span, connection, &error)),
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
                )).into())
            }
        };
        abandoned.id = None;
        answer.map_err(|error| self.failed(span, connection, &error))
    }

    /// The failure that pauses the run for a server's questions, with what the call made
    /// again needs: the server's state, the answers given already (roots) and the rounds
    /// spent.
    fn deferred(
        &self,
        requests: InputRequests,
        request_state: Option<String>,
        rounds: usize,
        args: &Value,
    ) -> Result<ToolError, Failure> {
        let mut questions = std::collections::BTreeMap::new();
        let mut answered = serde_json::Map::new();
        for (key, request) in requests {
            match request {
                InputRequest::Elicitation(question) => {
                    let params = serde_json::to_value(question.params).map_err(|e| {
                        self.unavailable(&format!("its question {key:?} could not be kept: {e}"))
                    })?;
                    questions.insert(key, params);
                }
                InputRequest::ListRoots(_) => {
                    answered.insert(key, serde_json::json!({"roots": []}));
                }
                _ => return Err(self.no_sampling().into()),
            }
        }
        let count = questions.len();
        let message = format!(
            "mcp server \"{}\" needs answers to {count} question(s) before tool \"{}\" can finish, and this run could not pause to ask them",
            self.link.server(),
            self.tool
        );
        let state = serde_json::json!({
            "requestState": request_state,
            "answered": answered,
            "rounds": rounds,
        });
        Ok(ToolError::needs_input(
            message,
            codemode_runtime::tools::NeedsInput {
                questions,
                state,
                arguments: json::clone_deep(args),
            },
        ))
    }

    fn no_sampling(&self) -> ToolError {
        ToolError::new(format!(
            "mcp server \"{}\" asked for a model's completion (sampling) to answer tool \"{}\", which codemode does not give",
            self.link.server(),
            self.tool
        ))
    }

    /// The answers to a server's input requests: its questions put to the person behind the
    /// call (as during a call, `questions.rs`), no roots; a request for a model's completion
    /// (sampling) fails the call, as codemode gives none.
    async fn answer(&self, requests: InputRequests) -> Result<InputResponses, Failure> {
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let response = match request {
                InputRequest::Elicitation(question) => {
                    let answer = self
                        .link
                        .client
                        .questions
                        .ask(self.link.server(), question.params)
                        .await;
                    serde_json::to_value(answer).unwrap_or(Value::Null)
                }
                InputRequest::ListRoots(_) => serde_json::json!({"roots": []}),
                _ => return Err(self.no_sampling().into()),
            };
            responses.insert(key, response);
        }
        Ok(responses)
    }

    /// The error of a call the connection failed: why the server is down, if it is; a
    /// refusal of the call's authorization, if the server says so.
    fn failed(
        &self,
        span: &tracing::Span,
        connection: &Arc<super::connection::Connection>,
        error: &rmcp::service::ServiceError,
    ) -> Failure {
        span.record("error.type", "unavailable");
        span.record("otel.status_code", "ERROR");
        if let Some(challenge) = error.auth_challenge() {
            return Failure::Refused(connection.clone(), challenge.to_owned());
        }
        let why = match connection.health.down() {
            Some(why) => self.link.explain(why),
            None => error.to_string(),
        };
        self.unavailable(&why).into()
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

/// Sets `params` up as the call made again with `answers` to the questions its run paused for
/// (see `Call::deferred`); the rounds spent before.
fn resume_with(params: &mut CallToolRequestParams, answers: &InputAnswers) -> usize {
    let mut responses: InputResponses = answers
        .responses
        .iter()
        .map(|(key, answer)| (key.clone(), json::clone_deep(answer)))
        .collect();
    if let Some(Value::Object(answered)) = answers.state.get("answered") {
        for (key, answer) in answered {
            responses
                .entry(key.clone())
                .or_insert_with(|| json::clone_deep(answer));
        }
    }
    params.input_responses = Some(responses);
    params.request_state = answers
        .state
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_owned);
    answers
        .state
        .get("rounds")
        .and_then(Value::as_u64)
        .and_then(|rounds| usize::try_from(rounds).ok())
        .unwrap_or(0)
}

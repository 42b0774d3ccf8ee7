//! `codemode mcp`: an MCP server whose `run_code` tool runs programs against the registry's
//! tools (upstream MCP servers, the built-ins), every call through the pipeline.
//!
//! `run_code`'s description carries the instructions and the SDK of every tool a program may
//! call; past the SDK budget it carries one line per tool instead, and `search_tools` returns
//! the typed declarations of the tools that match. Under `--mode both` the upstream tools are
//! listed natively beside it (and still go through the pipeline).
//!
//! Each MCP session is an agent scope of its own; `--ask` approvals go to the session's client
//! as an elicitation when its protocol allows a server-to-client request (2025-11-25 and
//! earlier) and it declared the capability; otherwise the approval is unavailable, so denied.
//! A server that keeps paused runs ([`Served::keep_paused_runs`]) instead lets a run pause at
//! its approvals and pausing calls: a client of 2026-07-28 gets the questions in an
//! input-required result whose `requestState` names the run, and its retry resumes the run on
//! whichever replica receives it; an older client is asked on its session and the run resumes
//! at once.
//! A `requestState` is bound to the client it was issued to and to the call's arguments: the
//! transport names the client by putting a [`Principal`] in the request's extensions (the HTTP
//! server's gate does: the bearer token's, else the session's); a request without one is
//! anonymous. The runs a call pauses count against that client's quota in the store.
//! A client's cancellation aborts the call; a progress token gets a notification every second
//! while the call runs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

use codemode_runtime::code::Resume;
use codemode_runtime::run_code::prompt::{run_code_description, sdk_tools, SEARCH_TOOLS_NAME};
use codemode_runtime::run_code::{self, is_sub_call_id, CodeRequest, CodeRun, Flavor};
use codemode_runtime::signal::AbortController;
use codemode_runtime::tools::plugins::policy::Policy;
use codemode_runtime::tools::{
    AgentScope, ApprovalHook, ApprovalOutcome, ApprovalRequest, ApprovalScope, ContentBlock,
    RegistrationGuard, Registry, ToolExecutionInput, ToolExecutionResult, RUN_CODE_NAME,
};
use codemode_sdk_gen::{render_declarations, Language, ToolSchema};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, DiscoverResult,
    ElicitRequestParams, ElicitationAction, GetTaskParams, GetTaskResult, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool, UpdateTaskParams,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{discovery, input};
use codemode_durable::Principal;
use codemode_host::{Durability, Readiness};

/// The environment variable that holds the HTTP server's bearer token when
/// `--auth-token-file` is not given. A secret of codemode's own: no upstream server gets it.
pub const TOKEN_ENV: &str = "CODEMODE_MCP_TOKEN";
/// How often a long call reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How the server presents its tools.
#[derive(Debug, Clone)]
pub struct Presentation {
    /// List the upstream tools natively beside `run_code`.
    pub native_tools: bool,
    /// Past this many (estimated) tokens of SDK, switch to progressive discovery.
    pub sdk_budget: usize,
    /// The `run_code` texts for the runtime's language.
    pub flavor: &'static Flavor,
}

/// What every session shares.
pub struct Served {
    registry: Registry,
    presentation: Presentation,
    /// What clients are told, remade when the tools change.
    listing: RwLock<Arc<Listing>>,
    /// The client of each live session, by the session's agent id, for approvals.
    peers: Mutex<HashMap<u64, Weak<ClientSlot>>>,
    /// The sandbox's preparation, when it runs in the background: calls that wait on it are
    /// told so through their progress token.
    readiness: Mutex<Option<Readiness>>,
    /// Told the agent id of each session that ends (its jobs and terminals end with it).
    session_end: Mutex<Option<SessionEndHook>>,
    /// Where runs that pause are kept, when they may pause.
    pausing: OnceLock<ServedPausing>,
    /// The agents whose clients are asked in input-required results (2026-07-28) while a
    /// call of theirs runs, with how many such calls: upstream servers' questions during
    /// those calls pause the run.
    asked_by_pausing: Mutex<HashMap<u64, usize>>,
    /// How long calls run before they become tasks, and where tasks are kept.
    tasks: OnceLock<ServedTasks>,
    /// `search_tools` registered for programs, while discovery is on.
    searching: Mutex<Option<RegistrationGuard>>,
    /// No notification can reach a client (a stateless server): `tools.listChanged` is not
    /// offered.
    unannounced: std::sync::atomic::AtomicBool,
}

/// How a server turns long calls into tasks (the MCP tasks extension).
pub struct ServedTasks {
    /// Where tasks are kept (shared by every replica).
    pub durability: Durability,
    /// A `run_code` call still running after this long becomes a task.
    pub after: Duration,
    /// How often the process running a task renews its lease in the store; a task whose lease
    /// has not been renewed for [`LEASE_PERIODS`] of these is reported failed by any replica.
    pub lease: Duration,
}

/// How long a task runs without its lease being renewed (in periods of its lease, as the
/// process running it set it) before it counts as stopped.
pub const LEASE_PERIODS: u32 = super::tasks::LEASE_PERIODS;

/// How often a task's lease is renewed unless the server says otherwise.
pub const DEFAULT_TASK_LEASE: Duration = Duration::from_secs(5);

/// The client a request comes from: the [`Principal`] its transport put in its extensions,
/// else the anonymous one.
pub(super) fn principal(context: &RequestContext<RoleServer>) -> Principal {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
        .unwrap_or_else(Principal::anonymous)
}

/// How a server's runs pause: what `run_code` was installed with.
pub struct ServedPausing {
    /// The store paused runs are kept in (shared by every replica).
    pub durability: Durability,
    /// Approvals pause their run (`run_code`'s `approve_on` is the `--ask` tools).
    pub approvals: bool,
}

/// What runs when a session ends, with the session's agent id.
pub type SessionEndHook = Arc<dyn Fn(u64) + Send + Sync>;

fn tool(name: &str, description: String, input: Value, output: Option<Value>) -> Option<Tool> {
    let mut tool = json!({"name": name, "description": description, "inputSchema": input});
    if let Some(output) = output {
        tool["outputSchema"] = output;
    }
    serde_json::from_value(tool).ok()
}

/// What clients are told: `run_code` (with the SDK or, past the budget, a list and
/// `search_tools`) and, with `--mode both`, the tools themselves.
pub(super) struct Listing {
    tools: Vec<Tool>,
    native: HashSet<String>,
    /// The SDK's tools, when the description only lists them.
    discovery: Option<Vec<ToolSchema>>,
}

impl Listing {
    /// The tools `search_tools` searches, when discovery is on.
    pub(super) fn discovery(&self) -> Option<&[ToolSchema]> {
        self.discovery.as_deref()
    }

    fn new(registry: &Registry, sdk_tools: Vec<ToolSchema>, presentation: &Presentation) -> Self {
        let flavor = presentation.flavor;
        let (description, progressive) =
            run_code_description(flavor, &sdk_tools, presentation.sdk_budget);
        let mut tools = Vec::new();
        tools.extend(tool(
            RUN_CODE_NAME,
            description,
            flavor.parameters(),
            Some(json!({
                "type": "object",
                "properties": {
                    "logs": {"type": "array", "items": {"type": "string"}},
                    "result": {},
                    "hint": {"type": "string"},
                },
                "required": ["logs"],
            })),
        ));
        if progressive {
            tools.extend(tool(
                SEARCH_TOOLS_NAME,
                format!("Find the tools a `run_code` program can call: returns the typed {} declarations of the tools whose name or description match the query, best first. Programs can call it too, as `tools.{SEARCH_TOOLS_NAME}({{ query, limit? }})`.", flavor.language.title()),
                discovery::parameters(),
                None,
            ));
        }
        let mut native = HashSet::new();
        if presentation.native_tools {
            for schema in &sdk_tools {
                let Some(definition) = registry.get(&schema.name, None) else {
                    continue;
                };
                let output = definition
                    .output()
                    .map(|o| o.schema().json().clone())
                    .filter(|s| s.get("type").and_then(Value::as_str) == Some("object"));
                if let Some(listed) = tool(
                    &schema.name,
                    schema.description.clone().unwrap_or_default(),
                    schema.parameters.clone(),
                    output,
                ) {
                    native.insert(schema.name.clone());
                    tools.push(listed);
                }
            }
        }
        Self {
            tools,
            native,
            discovery: progressive.then_some(sdk_tools),
        }
    }
}

impl Served {
    /// The shared state for a registry whose `run_code` is installed; `sdk_tools` are the
    /// tools a program may call (the policy applied).
    pub fn new(
        registry: Registry,
        sdk_tools: Vec<ToolSchema>,
        presentation: &Presentation,
    ) -> Arc<Self> {
        let listing = Listing::new(&registry, sdk_tools, presentation);
        let served = Arc::new(Self {
            registry,
            presentation: presentation.clone(),
            listing: RwLock::new(Arc::new(listing)),
            peers: Mutex::new(HashMap::new()),
            readiness: Mutex::new(None),
            session_end: Mutex::new(None),
            pausing: OnceLock::new(),
            asked_by_pausing: Mutex::new(HashMap::new()),
            tasks: OnceLock::new(),
            searching: Mutex::new(None),
            unannounced: std::sync::atomic::AtomicBool::new(false),
        });
        served.offer_search();
        served
    }

    /// Registers `search_tools` for programs while the listing uses discovery, and removes
    /// it when it no longer does.
    fn offer_search(self: &Arc<Self>) {
        let on = self.listing().discovery.is_some();
        let mut searching = self.searching.lock().unwrap_or_else(|p| p.into_inner());
        if !on {
            *searching = None;
        } else if searching.is_none() {
            match self
                .registry
                .register(discovery::definition(Arc::downgrade(self)), None)
            {
                Ok(guard) => *searching = Some(guard),
                Err(e) => tracing::warn!("programs cannot call {SEARCH_TOOLS_NAME}: {e}"),
            }
        }
    }

    /// Says that no notification reaches this server's clients (`--stateless`: every request
    /// stands alone), so that it does not offer `tools.listChanged`.
    pub fn without_notifications(&self) {
        self.unannounced
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The language programs and declarations are written in.
    pub(super) fn language(&self) -> Language {
        self.presentation.flavor.language
    }

    /// Makes `run_code` calls of clients that declared the tasks extension tasks once they
    /// run longer than `tasks.after`. Set once; later calls are ignored.
    pub fn run_tasks(&self, tasks: ServedTasks) {
        let _ = self.tasks.set(tasks);
    }

    pub(super) fn task_store(&self) -> Option<&ServedTasks> {
        self.tasks.get()
    }

    /// Tells clients of another list of tools a program may call (an upstream server's
    /// changed): what they are told is made again, and every live session gets
    /// `notifications/tools/list_changed`.
    pub fn tools_changed(self: &Arc<Self>, sdk_tools: Vec<ToolSchema>) {
        let listing = Listing::new(&self.registry, sdk_tools, &self.presentation);
        *self.listing.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(listing);
        self.offer_search();
        let peers: Vec<Peer<RoleServer>> = self
            .peers()
            .values()
            .filter_map(Weak::upgrade)
            .filter_map(|slot| slot.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .collect();
        for peer in peers {
            tokio::spawn(async move {
                let _ = peer.notify_tool_list_changed().await;
            });
        }
    }

    pub(super) fn listing(&self) -> Arc<Listing> {
        self.listing
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Tells the server that its runs pause into a store (`run_code` was installed with
    /// `pausing`'s pausing tools): pauses become questions to the client,
    /// and answers resume the runs. Set once; later calls are ignored.
    pub fn keep_paused_runs(&self, pausing: ServedPausing) {
        let _ = self.pausing.set(pausing);
    }

    /// Tells the server that the sandbox is being prepared in the background (see
    /// [`codemode_host::PreparingRuntime`]).
    pub fn preparing(&self, readiness: Readiness) {
        *self.readiness.lock().unwrap_or_else(|p| p.into_inner()) = Some(readiness);
    }

    /// Whether runs can start at once: no preparation, or a finished one.
    pub fn is_ready(&self) -> bool {
        self.readiness
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_none_or(Readiness::is_ready)
    }

    /// Runs `hook` with the agent id of every session that ends.
    pub fn on_session_end(&self, hook: SessionEndHook) {
        *self.session_end.lock().unwrap_or_else(|p| p.into_inner()) = Some(hook);
    }

    /// The tools a client sees.
    pub fn tools(&self) -> Vec<Tool> {
        self.listing().tools.clone()
    }

    fn peers(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<ClientSlot>>> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client of the session whose agent is `agent`, while the session lives.
    fn client(&self, agent: u64) -> Option<Peer<RoleServer>> {
        let slot = self.peers().get(&agent).and_then(Weak::upgrade)?;
        let peer = slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
        peer
    }

    /// Whether `agent`'s client is asked in input-required results during a call now.
    fn asked_by_pausing(&self, agent: u64) -> bool {
        self.asked_by_pausing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&agent)
    }

    /// The client of `agent`'s session, when it declared that it answers elicitations.
    fn elicitable_client(&self, agent: u64) -> Option<Peer<RoleServer>> {
        self.client(agent).filter(|peer| {
            peer.peer_info()
                .is_some_and(|info| info.capabilities.elicitation.is_some())
        })
    }

    /// A new session: its own agent scope.
    pub fn session(self: &Arc<Self>) -> Session {
        let agent = AgentScope::root();
        let client: Arc<ClientSlot> = Arc::default();
        let mut peers = self.peers();
        peers.retain(|_, slot| slot.strong_count() > 0);
        peers.insert(agent.id(), Arc::downgrade(&client));
        drop(peers);
        let end = Arc::new(SessionEnd {
            served: Arc::downgrade(self),
            agent: agent.id(),
        });
        Session {
            served: self.clone(),
            agent,
            client,
            _end: end,
        }
    }
}

/// Dropped with a session's last clone: tells the session-end hook.
struct SessionEnd {
    served: Weak<Served>,
    agent: u64,
}

impl Drop for SessionEnd {
    fn drop(&mut self) {
        let Some(served) = self.served.upgrade() else {
            return;
        };
        let hook = served
            .session_end
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(self.agent);
        }
    }
}

type ClientSlot = Mutex<Option<Peer<RoleServer>>>;

/// One client's session (clones share it).
#[derive(Clone)]
pub struct Session {
    served: Arc<Served>,
    agent: AgentScope,
    client: Arc<ClientSlot>,
    _end: Arc<SessionEnd>,
}

/// Our content blocks as MCP content.
fn content_json(blocks: &[ContentBlock]) -> Vec<Value> {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => json!({"type": "text", "text": text}),
            ContentBlock::Image { data, mime_type } => {
                json!({"type": "image", "data": data, "mimeType": mime_type})
            }
        })
        .collect()
}

/// The MCP answer for a finished call: its content, the images it deferred, and for a
/// success with an object value, that value as structured content.
fn call_result(result: &ToolExecutionResult) -> Result<CallToolResult, McpError> {
    let mut content = content_json(&result.content);
    for context in &result.additional_contexts {
        let images: Vec<ContentBlock> = context
            .content
            .iter()
            .filter(|b| matches!(b, ContentBlock::Image { .. }))
            .cloned()
            .collect();
        content.extend(content_json(&images));
    }
    // `resultType` tells a 2026-07-28 client this is the answer, not a question; rmcp drops it
    // for older clients.
    let mut answer =
        json!({"resultType": "complete", "content": content, "isError": result.is_error()});
    if let Some(value @ Value::Object(_)) = result.value() {
        answer["structuredContent"] = value.clone();
    }
    serde_json::from_value(answer)
        .map_err(|e| McpError::internal_error(format!("codemode: {e}"), None))
}

impl Session {
    pub(super) fn served(&self) -> &Arc<Served> {
        &self.served
    }

    /// Keeps the session's client (the first one seen), for its notifications and questions.
    fn remember_client(&self, peer: &Peer<RoleServer>) {
        self.client
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| peer.clone());
    }

    async fn search(&self, arguments: &Value) -> Result<CallToolResult, McpError> {
        let listing = self.served.listing();
        let tools = listing.discovery().unwrap_or_default();
        let (query, found) = discovery::found(tools, arguments)
            .map_err(|message| McpError::invalid_params(message, None))?;
        let found: Vec<ToolSchema> = found.into_iter().cloned().collect();
        let text = if found.is_empty() {
            format!("No tool matches {query:?}. The tools are listed in run_code's description.")
        } else {
            render_declarations(&found, self.served.language())
        };
        Ok(CallToolResult::success(vec![
            rmcp::model::ContentBlock::text(text),
        ]))
    }

    async fn execute(
        &self,
        name: String,
        arguments: Value,
        context: &RequestContext<RoleServer>,
        resume: Option<Resume>,
        abort: &CancellationToken,
    ) -> (Arc<ToolExecutionResult>, Option<CodeRun>) {
        // Unique across processes and replicas: the root of every sub-call id and event.
        let call_id = uuid::Uuid::new_v4().to_string();
        let span = tracing::info_span!(
            "mcp_request",
            otel.name = format!("tools/call {name}"),
            otel.kind = "server",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = %name,
            jsonrpc.request.id = %context.id,
            codemode.call.id = %call_id,
            "error.type" = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let headers = context
            .extensions
            .get::<http::request::Parts>()
            .map(|parts| &parts.headers);
        super::trace::adopt_parent(&span, &context.meta.0 .0, headers);
        let started = Instant::now();
        let (result, run) = self
            .call(
                call_id.clone(),
                name.clone(),
                arguments,
                context,
                resume,
                abort,
            )
            .instrument(span.clone())
            .await;
        if result.is_error() {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "ERROR");
        }
        tracing::info!(
            parent: &span,
            call = %call_id,
            tool = %name,
            is_error = result.is_error(),
            duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "tools/call answered"
        );
        (result, run)
    }

    /// `run_code`: a new run, or with a `requestState` the paused run it names, resumed with
    /// the answers; a client that declared tasks gets a task for a call that outlives the
    /// server's threshold.
    async fn run_code(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let resume = match request.request_state.as_deref() {
            None => None,
            Some(state) => Some(self.resumption(
                state,
                request.input_responses.as_ref(),
                &principal(context),
                &arguments,
            )?),
        };
        let tasks = self.served.tasks.get().filter(|_| {
            context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks())
        });
        match tasks {
            Some(tasks) => {
                super::tasks::answer_or_task(
                    self.clone(),
                    tasks,
                    arguments,
                    resume,
                    context.clone(),
                )
                .await
            }
            None => self.answer(arguments, resume, context, &context.ct).await,
        }
    }

    /// Runs `run_code` with `arguments` (continuing `resume`'s run) until it ends, or pauses
    /// for a client of 2026-07-28; `abort` ends the run. A run that pauses is put to the client
    /// as questions.
    pub(super) async fn answer(
        &self,
        arguments: Value,
        mut resume: Option<Resume>,
        context: &RequestContext<RoleServer>,
        abort: &CancellationToken,
    ) -> Result<CallToolResponse, McpError> {
        // A client of 2026-07-28 is asked in input-required results: upstream servers'
        // questions during this call pause the run to reach it.
        let _asked = (self.served.pausing.get().is_some()
            && context
                .protocol_version()
                .is_some_and(|version| !version.has_initialize()))
        .then(|| AskedByPausing::note(&self.served, self.agent.id()));
        loop {
            let (result, run) = self
                .execute(
                    RUN_CODE_NAME.to_owned(),
                    arguments.clone(),
                    context,
                    resume.take(),
                    abort,
                )
                .await;
            let pausing = self.served.pausing.get();
            let pause = pausing
                .and_then(|_| run.as_ref()?.paused.as_ref())
                .map(input::paused);
            let (Some(pausing), Some(pause)) = (pausing, pause) else {
                return Ok(CallToolResponse::Complete(call_result(&result)?));
            };
            let questions = input::questions(&pause);
            if context
                .protocol_version()
                .is_some_and(|version| !version.has_initialize())
            {
                let state =
                    pausing
                        .durability
                        .reference(&pause.run_id, &principal(context), &arguments);
                return Ok(CallToolResponse::InputRequired(input::input_required(
                    &questions, state,
                )?));
            }
            let Some(answers) = self.ask_on_session(context, questions).await else {
                let text = input::unanswerable(&pause);
                return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                    rmcp::model::ContentBlock::text(text),
                ])));
            };
            let replies = input::replies(&answers)?;
            // An approval answered for the session holds for this session's later runs too.
            for (tool, allowed) in input::for_the_session(&pause, &replies) {
                self.served
                    .registry
                    .remember_approval(&self.agent, tool, allowed);
            }
            resume = Some(Resume {
                run_id: pause.run_id,
                replies,
            });
        }
    }

    /// The resumption a retried call asks for: the run its `requestState` names, once it is
    /// found issued to `principal` for these `arguments`, with the replies its answers give.
    pub(super) fn resumption(
        &self,
        state: &str,
        answers: Option<&rmcp::model::InputResponses>,
        principal: &Principal,
        arguments: &Value,
    ) -> Result<Resume, McpError> {
        let Some(pausing) = self.served.pausing.get() else {
            return Err(McpError::invalid_params(
                "requestState: this server does not pause runs, so it made no requestState",
                None,
            ));
        };
        let run_id = pausing
            .durability
            .run_of(state, principal, arguments)
            .map_err(|e| McpError::invalid_params(format!("requestState: {e}"), None))?;
        let replies = match answers {
            Some(answers) => input::replies(answers)?,
            None => Vec::new(),
        };
        Ok(Resume { run_id, replies })
    }

    /// Asks an older client each question on its session (elicitation), in turn; `None` when
    /// it cannot be asked (no session, or no elicitation capability).
    async fn ask_on_session(
        &self,
        context: &RequestContext<RoleServer>,
        questions: BTreeMap<String, Value>,
    ) -> Option<rmcp::model::InputResponses> {
        let supports = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        if !supports {
            return None;
        }
        let mut answers = rmcp::model::InputResponses::new();
        for (key, params) in questions {
            let params: ElicitRequestParams = serde_json::from_value(params).ok()?;
            let answer = tokio::select! {
                answer = context.peer.create_elicitation(params) => answer.ok()?,
                () = context.ct.cancelled() => return None,
            };
            answers.insert(key, serde_json::to_value(answer).ok()?);
        }
        Some(answers)
    }

    /// Runs one call through the pipeline, ending it when the client cancels and reporting
    /// progress to a client that asked for it (also while the sandbox is still being prepared).
    /// A `run_code` call whose program and description are text goes typed (continuing
    /// `resume`'s run) and gives its run back too; any other call goes as the client made it.
    async fn call(
        &self,
        call_id: String,
        name: String,
        arguments: Value,
        context: &RequestContext<RoleServer>,
        resume: Option<Resume>,
        abort: &CancellationToken,
    ) -> (Arc<ToolExecutionResult>, Option<CodeRun>) {
        let offered = call_id.clone();
        let controller = AbortController::new();
        let text = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let typed = match (name == RUN_CODE_NAME, text("code"), text("description")) {
            (true, Some(program), Some(description)) => {
                let mut request =
                    CodeRequest::new(call_id.clone(), program, description, controller.signal())
                        .language(self.served.language())
                        .agent(&self.agent);
                request.resume = resume;
                Some(request)
            }
            _ => None,
        };
        let registry = &self.served.registry;
        let execution: futures::future::BoxFuture<'_, _> = match typed {
            Some(request) => Box::pin(async move {
                let outcome = run_code::run(registry, request).await;
                (outcome.result, outcome.run)
            }),
            None => {
                let input = ToolExecutionInput::new(call_id, name, arguments, controller.signal())
                    .agent(&self.agent);
                Box::pin(async move { (registry.execute(input).await, None) })
            }
        };
        // The runs this call pauses are the client's, for its quota.
        let execution = codemode_durable::pausing_for(principal(context), execution);
        tokio::pin!(execution);
        let progress = context.meta.get_progress_token();
        // What the upstream servers this call reaches report, when the client listens.
        let (_listening, mut upstream) = match progress {
            Some(_) => {
                let (listening, messages) = super::progress::listen(&offered);
                (Some(listening), Some(messages))
            }
            None => (None, None),
        };
        let started = Instant::now();
        // Progress must grow with each notification.
        let mut last = 0.0f64;
        let mut report = |value: f64| {
            last = value.max(last + 0.001);
            last
        };
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let cancelled = abort.clone();
        let result = loop {
            let (value, message) = tokio::select! {
                result = &mut execution => break result,
                () = cancelled.cancelled(), if !controller.is_aborted() => {
                    controller.abort("cancelled by the client");
                    continue;
                }
                Some(message) = async { upstream.as_mut()?.recv().await }, if upstream.is_some() => {
                    (started.elapsed().as_secs_f64(), message)
                }
                _ = ticks.tick(), if progress.is_some() => {
                    let seconds = started.elapsed().as_secs_f64().floor();
                    let message = if self.served.is_ready() {
                        format!("running for {seconds}s")
                    } else {
                        format!("waiting {seconds}s for the sandbox to be prepared for first use (about ten seconds, once per machine and version)")
                    };
                    (seconds, message)
                }
            };
            if let Some(token) = progress.clone() {
                let param =
                    ProgressNotificationParam::new(token, report(value)).with_message(message);
                let _ = context.peer.notify_progress(param).await;
            }
        };
        // What came in as the call ended (its last calls settling) still goes before the answer.
        if let (Some(token), Some(messages)) = (progress, upstream.as_mut()) {
            while let Ok(message) = messages.try_recv() {
                let value = report(started.elapsed().as_secs_f64());
                let param =
                    ProgressNotificationParam::new(token.clone(), value).with_message(message);
                let _ = context.peer.notify_progress(param).await;
            }
        }
        result
    }
}

impl ServerHandler for Session {
    /// What `initialize` answers. `tools.listChanged` only where the notification can reach
    /// the client: a session's stream, not a stateless server.
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = if self.served.tasks.get().is_some() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build()
        } else {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        };
        if self
            .served
            .unannounced
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            if let Some(tools) = capabilities.tools.as_mut() {
                tools.list_changed = None;
            }
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("codemode", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Call `run_code` with a {} program that calls the tools its description declares; only what the program prints or returns comes back.",
                self.served.language().title()
            ))
    }

    /// What `server/discover` answers (2026-07-28 clients): no `tools.listChanged`, since such
    /// a client hears of changes only through `subscriptions/listen`, which this server does
    /// not serve.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        let mut info = self.get_info();
        if let Some(tools) = info.capabilities.tools.as_mut() {
            tools.list_changed = None;
        }
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // A client that lists the tools hears when they change, whether or not it calls one.
        self.remember_client(&context.peer);
        Ok(ListToolsResult::with_all_items(self.served.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.remember_client(&context.peer);
        let name = request.name.to_string();
        if name == RUN_CODE_NAME {
            return self.run_code(request, &context).await;
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let listing = self.served.listing();
        let result = if name == SEARCH_TOOLS_NAME && listing.discovery.is_some() {
            self.search(&arguments).await?
        } else if listing.native.contains(&name) {
            let (result, _) = self
                .execute(name, arguments, &context, None, &context.ct)
                .await;
            call_result(&result)?
        } else {
            return Err(McpError::invalid_params(
                format!("unknown tool \"{name}\""),
                None,
            ));
        };
        Ok(CallToolResponse::Complete(result))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        super::tasks::get(&self.served, &request.task_id, &principal(&context)).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        super::tasks::update(
            self.clone(),
            &request.task_id,
            request.input_responses,
            context,
        )
        .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        super::tasks::cancel(&self.served, &request.task_id, &principal(&context)).await
    }
}

/// `--ask` over MCP: an elicitation to the client of the session that made the call; or, where
/// approvals pause runs, the approval the answer that resumed the run already gave.
pub struct ElicitApproval(pub Weak<Served>);

impl ApprovalHook for ElicitApproval {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        let served = self.0.upgrade();
        let approvals_pause = served
            .as_ref()
            .and_then(|served| served.pausing.get())
            .is_some_and(|pausing| pausing.approvals);
        if approvals_pause && is_sub_call_id(&request.call_id) {
            // A program's calls of the `--ask` tools pause its run before they reach the
            // pipeline; one that reaches it was approved in the answer that resumed the run.
            return Box::pin(std::future::ready(ApprovalOutcome::AllowedOnce));
        }
        let peer = served.and_then(|served| served.elicitable_client(request.agent.id()));
        Box::pin(async move {
            let Some(peer) = peer else {
                return ApprovalOutcome::Unavailable;
            };
            let arguments = codemode_runtime::json::to_string(&request.arguments);
            let shown: String = arguments.chars().take(400).collect();
            let params: Result<ElicitRequestParams, _> = serde_json::from_value(json!({
                "mode": "form",
                "message": format!("Allow tool \"{}\" with {shown}?", request.tool_name),
                "requestedSchema": {"type": "object", "properties": {
                    "scope": crate::input::SCOPE_FIELD.clone(),
                }},
            }));
            let Ok(params) = params else {
                return ApprovalOutcome::Unavailable;
            };
            tokio::select! {
                answer = peer.create_elicitation(params) => match answer {
                    Ok(result) => match (result.action, answered_scope(result.content.as_ref())) {
                        // A scope this version cannot read decides nothing beyond the call.
                        (ElicitationAction::Accept, Ok(Some(scope))) => ApprovalOutcome::AllowedFor(scope),
                        (ElicitationAction::Accept, _) => ApprovalOutcome::AllowedOnce,
                        (ElicitationAction::Decline, Ok(Some(scope))) => ApprovalOutcome::RejectedFor(scope),
                        (ElicitationAction::Decline, _) => ApprovalOutcome::Rejected,
                        (ElicitationAction::Cancel, _) => ApprovalOutcome::Cancelled,
                        // An answer this version does not know cannot approve anything.
                        _ => ApprovalOutcome::Unavailable,
                    },
                    Err(_) => ApprovalOutcome::Unavailable,
                },
                _ = request.signal.aborted() => ApprovalOutcome::Cancelled,
            }
        })
    }
}

/// An agent noted in [`Served::asked_by_pausing`] until this drops.
struct AskedByPausing {
    served: Arc<Served>,
    agent: u64,
}

impl AskedByPausing {
    fn note(served: &Arc<Served>, agent: u64) -> Self {
        *served
            .asked_by_pausing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(agent)
            .or_default() += 1;
        Self {
            served: served.clone(),
            agent,
        }
    }
}

impl Drop for AskedByPausing {
    fn drop(&mut self) {
        let mut asked = self
            .served
            .asked_by_pausing
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(count) = asked.get_mut(&self.agent) {
            *count -= 1;
            if *count == 0 {
                asked.remove(&self.agent);
            }
        }
    }
}

/// Upstream servers' questions under `codemode mcp`: an elicitation to the client of the
/// session whose call the question came during, when the client declared the capability and
/// its protocol allows a server-to-client request during a call; a client of 2026-07-28 whose
/// runs pause gets them in an input-required result, the run paused meanwhile (see
/// [`crate::upstream::Asker::defers`]); otherwise declined.
pub struct ForwardQuestions(pub Arc<std::sync::OnceLock<Weak<Served>>>);

impl crate::upstream::Asker for ForwardQuestions {
    fn defers(&self, agent: u64) -> bool {
        self.0
            .get()
            .and_then(Weak::upgrade)
            .is_some_and(|served| served.asked_by_pausing(agent))
    }

    fn ask(
        &self,
        agent: u64,
        _server: &str,
        params: ElicitRequestParams,
    ) -> BoxFuture<'static, rmcp::model::ElicitResult> {
        let peer = self
            .0
            .get()
            .and_then(Weak::upgrade)
            .and_then(|served| served.elicitable_client(agent));
        Box::pin(async move {
            let Some(peer) = peer else {
                return crate::upstream::questions::declined();
            };
            peer.create_elicitation(params)
                .await
                .unwrap_or_else(|_| crate::upstream::questions::declined())
        })
    }
}

/// The `scope` an approval's answer names (`None`: this call only).
fn answered_scope(content: Option<&Value>) -> Result<Option<ApprovalScope>, String> {
    match content.and_then(|c| c.get("scope")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(scope)) => ApprovalScope::parse(scope),
        Some(other) => Err(format!("scope must be a string, not {other}")),
    }
}

/// The policy-filtered SDK tools of a registry scope.
pub fn permitted_tools(registry: &Registry, policy: &Policy) -> Vec<ToolSchema> {
    let mut tools = sdk_tools(registry, None);
    // `search_tools` is how programs find these tools, not one of them.
    tools.retain(|t| policy.permits(&t.name) && t.name != SEARCH_TOOLS_NAME);
    tools
}

//! A Code Mode registry over the real wasm runtime, with recording of everything a test wants
//! to look at: session events, run reports, tool call order and concurrency.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_host::{Budgets, WasmCodeRuntime};
use codemode_runtime::code::RunResult;
use codemode_runtime::run_code::{self, RunCodeConfig, SubCallRecord};
use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::events::{self, EventSink, SessionEvent};
use codemode_runtime::tools::schema::dsl::json as any_json;
use codemode_runtime::tools::{
    AgentScope, ContentBlock, RegistrationGuard, Registry, Schema, ToolDefinition, ToolError,
    ToolExecutionInput, ToolExecutionResult, ToolMode, ToolOutput, ToolRunContext, RUN_CODE_NAME,
};
use codemode_sdk_gen::Language;
use serde_json::{json, Value};

/// Session events kept in memory.
#[derive(Default)]
pub struct EventLog(Mutex<Vec<SessionEvent>>);

impl EventSink for EventLog {
    fn append(&self, event: &SessionEvent) -> std::io::Result<()> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

impl EventLog {
    pub fn all(&self) -> Vec<SessionEvent> {
        self.0.lock().unwrap().clone()
    }

    /// `type subCallId` (or `type callId`) of every event, in order.
    pub fn summary(&self) -> Vec<String> {
        self.all()
            .iter()
            .map(|event| match event {
                SessionEvent::ToolCall { call_id, .. }
                | SessionEvent::ToolResult { call_id, .. } => {
                    format!("{} {call_id}", event.kind())
                }
                SessionEvent::CodeDispatchStart { sub_call_id, .. } => {
                    format!("start {sub_call_id}")
                }
                SessionEvent::CodeDispatch {
                    sub_call_id,
                    is_error,
                    ..
                } => format!(
                    "settle {sub_call_id}{}",
                    if *is_error { " error" } else { "" }
                ),
            })
            .collect()
    }
}

/// What `on_run` saw of one run.
pub struct Report {
    pub result: RunResult,
    pub sub_calls: Vec<SubCallRecord>,
}

/// Records the order of tool activity and how many bodies ran at once.
#[derive(Default)]
pub struct Probe {
    log: Mutex<Vec<String>>,
    running: AtomicUsize,
    peak: AtomicUsize,
    noted: tokio::sync::Notify,
}

impl Probe {
    pub fn note(&self, entry: impl Into<String>) {
        self.log.lock().unwrap().push(entry.into());
        self.noted.notify_waiters();
    }

    /// Waits until `entry` is in the log: a handshake with the tools, where a sleep would
    /// only guess how far they got.
    pub async fn noted(&self, entry: &str) {
        loop {
            let noted = self.noted.notified();
            tokio::pin!(noted);
            // Registered before the log is read, so a note made in between still wakes it.
            noted.as_mut().enable();
            if self.log.lock().unwrap().iter().any(|e| e == entry) {
                return;
            }
            noted.await;
        }
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    fn enter(&self, name: &str) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.note(format!("enter {name}"));
    }

    fn exit(&self, name: &str) {
        self.note(format!("exit {name}"));
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A tool with any-JSON output rendered as JSON text, and the given body.
pub fn tool<F, Fut>(name: &str, body: F) -> ToolDefinition
where
    F: Fn(Arc<Value>, ToolRunContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    ToolDefinition::builder(name)
        .description(format!("The {name} tool."))
        .output(ToolOutput::new(
            Schema::value(any_json()).expect("json schema"),
            |_, value| Ok(vec![ContentBlock::text(value.to_string())]),
        ))
        .execute(body)
        .build()
}

/// A tool that notes `enter`/`exit` with `probe`, takes `ms`, and returns `{name}`.
pub fn probed(name: &str, probe: Arc<Probe>, ms: u64, safe: bool) -> ToolDefinition {
    let label = name.to_owned();
    let definition = tool(name, move |_args, ctx| {
        let probe = probe.clone();
        let label = label.clone();
        async move {
            probe.enter(&label);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = ctx.signal().aborted() => {}
            }
            probe.exit(&label);
            Ok(json!({ "name": label }))
        }
    });
    if safe {
        codemode_runtime::tools::ToolDefinitionBuilder::from(definition)
            .concurrency_safe(|_| true)
            .build()
    } else {
        definition
    }
}

/// A Code Mode registry over the real runtime, with `run_code` installed.
pub struct CodeMode {
    pub registry: Registry,
    pub agent: AgentScope,
    pub events: Arc<EventLog>,
    pub reports: Arc<Mutex<Vec<Report>>>,
    guards: Vec<RegistrationGuard>,
}

impl Default for CodeMode {
    fn default() -> Self {
        Self::new()
    }
}

impl CodeMode {
    pub fn new() -> Self {
        Self::with(RunCodeConfig::default(), Budgets::default())
    }

    pub fn with(config: RunCodeConfig, budgets: Budgets) -> Self {
        Self::for_language(Language::TypeScript, config, budgets)
    }

    /// A registry whose `run_code` runs Python programs.
    pub fn python() -> Self {
        Self::for_language(
            Language::Python,
            RunCodeConfig::default(),
            Budgets::default(),
        )
    }

    pub fn for_language(language: Language, config: RunCodeConfig, budgets: Budgets) -> Self {
        let registry = Registry::with_mode(ToolMode::Code);
        let events = Arc::new(EventLog::default());
        let reports: Arc<Mutex<Vec<Report>>> = Arc::default();
        let sink = reports.clone();
        let runtime = Arc::new(WasmCodeRuntime::for_language(language, budgets).expect("runtime"));
        let config = config.events(events.clone()).on_run(move |run| {
            sink.lock().unwrap().push(Report {
                result: RunResult {
                    value: run
                        .result
                        .value
                        .as_ref()
                        .map(codemode_runtime::json::clone_deep),
                    logs: run.result.logs.clone(),
                    error: run.result.error.clone(),
                    calls: Vec::new(),
                    hint: run.result.hint.clone(),
                    paused: run.result.paused.clone(),
                    compute_fuel: run.result.compute_fuel,
                },
                sub_calls: run.sub_calls.to_vec(),
            });
        });
        let installed = run_code::install(&registry, Some(runtime), config).expect("install");
        let recorded = events::record(&registry, events.clone());
        Self {
            registry,
            agent: AgentScope::root(),
            events,
            reports,
            guards: vec![installed, recorded],
        }
    }

    /// Registers `definition` globally for the life of this value.
    pub fn add(&mut self, definition: ToolDefinition) -> &mut Self {
        let guard = self.registry.register(definition, None).expect("register");
        self.guards.push(guard);
        self
    }

    /// Keeps any registration alive for the life of this value.
    pub fn keep(&mut self, guard: RegistrationGuard) -> &mut Self {
        self.guards.push(guard);
        self
    }

    pub fn input(&self, code: &str, signal: AbortSignal) -> ToolExecutionInput {
        ToolExecutionInput::new(
            "call-1",
            RUN_CODE_NAME,
            json!({"code": code, "description": "Test program"}),
            signal,
        )
        .agent(&self.agent)
    }

    /// Runs `code` through `run_code`, called by the agent.
    pub async fn run(&self, code: &str) -> Arc<ToolExecutionResult> {
        self.registry
            .execute(self.input(code, AbortSignal::never()))
            .await
    }

    /// The last run's report.
    pub fn report(&self) -> Report {
        self.reports.lock().unwrap().pop().expect("a run report")
    }
}

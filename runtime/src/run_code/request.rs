//! `run_code` as a typed, in-process call: a program with its language, budgets and
//! resumption in, the run's logs, value or failure, pause and `calls` record out. The CLI, the
//! MCP server and embedders call it alike.
//!
//! The call goes through the registry's pipeline exactly as a model's `run_code` call does
//! (policies, guards, approvals, events see the same call), so what the model would see
//! comes back too ([`CodeOutcome::result`]). What a model's call cannot carry (the resumption,
//! the budgets, the language it was written in) and what its text cannot give back (the typed
//! run) pass through the installed tool's inbox, keyed by the call's id, never through text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};

use codemode_sdk_gen::Language;

use crate::budgets::Budgets;
use crate::code::{PausedRun, Resume, RunFailure};
use crate::signal::AbortSignal;
use crate::tools::{
    AgentScope, Registry, ToolExecutionInput, ToolExecutionResult, ToolFailure, RUN_CODE_NAME,
};

use super::SubCallRecord;

/// One program for `run_code`.
#[derive(Debug, Clone)]
pub struct CodeRequest {
    /// The caller's id for the call: the root of its sub-calls' ids and events.
    pub call_id: String,
    /// The program, the body of an async function. For a resumed run, the program it was
    /// paused with (for positions in what it reports).
    pub program: String,
    /// The language the program is written in; a runtime for another refuses it.
    pub language: Language,
    /// What the program does, in a few words, for people (shown as the call's title).
    pub description: String,
    /// The calling agent, whose tools the program sees; `None` for a host-level call.
    pub agent: Option<AgentScope>,
    /// Budgets for this run, each at most the runtime's; `None`: the runtime's.
    pub budgets: Option<Budgets>,
    /// A paused run to continue instead of starting the program.
    pub resume: Option<Resume>,
    /// Ends the run (its result is then an `abort` failure).
    pub signal: AbortSignal,
}

impl CodeRequest {
    /// A TypeScript program for a host-level call, with the runtime's budgets.
    pub fn new(
        call_id: impl Into<String>,
        program: impl Into<String>,
        description: impl Into<String>,
        signal: AbortSignal,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            program: program.into(),
            language: Language::TypeScript,
            description: description.into(),
            agent: None,
            budgets: None,
            resume: None,
            signal,
        }
    }

    /// Sets [`CodeRequest::language`].
    pub fn language(mut self, language: Language) -> Self {
        self.language = language;
        self
    }

    /// Sets [`CodeRequest::agent`].
    pub fn agent(mut self, agent: &AgentScope) -> Self {
        self.agent = Some(agent.clone());
        self
    }

    /// Sets [`CodeRequest::budgets`].
    pub fn budgets(mut self, budgets: Budgets) -> Self {
        self.budgets = Some(budgets);
        self
    }

    /// Sets [`CodeRequest::resume`].
    pub fn resume(mut self, resume: Resume) -> Self {
        self.resume = Some(resume);
        self
    }
}

/// What a `run_code` call came to.
#[derive(Debug)]
pub struct CodeOutcome {
    /// What the call returned, exactly as a model calling `run_code` sees it.
    pub result: Arc<ToolExecutionResult>,
    /// The run, when one reached the runtime; `None` when the call was turned away before
    /// (a policy, a guard, a denied approval, no runtime, a resume the runtime refused).
    pub run: Option<CodeRun>,
}

impl CodeOutcome {
    /// The value the program returned, if it finished with one.
    pub fn value(&self) -> Option<&Value> {
        let run = self.run.as_ref()?;
        if run.failure.is_some() {
            return None;
        }
        self.result.value()?.get("result")
    }

    /// Why the call was turned away before any program ran, if it was.
    pub fn refusal(&self) -> Option<&ToolFailure> {
        match self.run {
            Some(_) => None,
            None => self.result.error(),
        }
    }
}

/// A run that reached the runtime, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeRun {
    /// What the program printed, one entry per line written.
    pub logs: Vec<String>,
    /// Why the run failed, where, and under what budget; `None` when it finished or paused.
    pub failure: Option<RunFailure>,
    /// A note for the model about the result (for example, a value that was not returned).
    pub hint: Option<String>,
    /// The calls the run waits on, when it paused.
    pub paused: Option<PausedRun>,
    /// Fuel the run burned, where the runtime meters it.
    pub compute_fuel: Option<u64>,
    /// Every call the program made, in submission order, and how each ended: what a retry
    /// would repeat.
    pub calls: Vec<SubCallRecord>,
}

/// Runs `request` through the `run_code` installed on `registry` (see [`super::install`]).
pub async fn run(registry: &Registry, request: CodeRequest) -> CodeOutcome {
    let CodeRequest {
        call_id,
        program,
        language,
        description,
        agent,
        budgets,
        resume,
        signal,
    } = request;
    let inbox = registry
        .code_transport()
        .and_then(|definition| definition.code_inbox.clone());
    let delivery = Arc::new(Delivery::default());
    if let Some(inbox) = &inbox {
        inbox.offer(
            &call_id,
            Typed {
                language,
                budgets,
                resume,
                delivery: delivery.clone(),
            },
        );
    }
    // The call a model would make: the pipeline's policies, guards and events see just that.
    let mut arguments = Map::new();
    arguments.insert("code".to_owned(), Value::String(program));
    arguments.insert("description".to_owned(), Value::String(description));
    let mut input = ToolExecutionInput::new(
        call_id.clone(),
        RUN_CODE_NAME,
        Value::Object(arguments),
        signal,
    );
    input.agent = agent;
    let result = registry.execute(input).await;
    // A call turned away before its body ran never took what was offered.
    if let Some(inbox) = &inbox {
        inbox.withdraw(&call_id);
    }
    let run = delivery.take();
    CodeOutcome { result, run }
}

/// What a typed request adds to the `run_code` call it makes, and where its run is delivered.
pub(crate) struct Typed {
    pub(crate) language: Language,
    pub(crate) budgets: Option<Budgets>,
    pub(crate) resume: Option<Resume>,
    pub(crate) delivery: Arc<Delivery>,
}

/// Where the body of a typed call leaves its run.
#[derive(Default)]
pub(crate) struct Delivery(Mutex<Option<CodeRun>>);

impl Delivery {
    pub(crate) fn deliver(&self, run: CodeRun) {
        *lock(&self.0) = Some(run);
    }

    fn take(&self) -> Option<CodeRun> {
        lock(&self.0).take()
    }
}

/// Typed requests waiting for the `run_code` call they belong to, by call id.
#[derive(Default)]
pub(crate) struct Inbox(Mutex<HashMap<String, Typed>>);

impl Inbox {
    fn offer(&self, call_id: &str, typed: Typed) {
        lock(&self.0).insert(call_id.to_owned(), typed);
    }

    pub(crate) fn take(&self, call_id: &str) -> Option<Typed> {
        lock(&self.0).remove(call_id)
    }

    fn withdraw(&self, call_id: &str) {
        lock(&self.0).remove(call_id);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each lock is held for one map or slot operation: a panic cannot leave it half-updated.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

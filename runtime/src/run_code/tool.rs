//! The `run_code` definition: its schema and texts, its output contract, and the execution of
//! one program (bindings, the run, the drain, the result).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use serde_json::{json, Map, Value};
use tracing::{Instrument, Span};

use codemode_sdk_gen::Language;

use super::request::{CodeRun, Inbox, Typed};
use crate::code::{
    BindingFn, BindingNamespace, BindingRef, BoxFuture, CallFailure, CodeRuntime, ErrorClass,
    InputCalls, PausedRun, Preflight, RunRequest, RunResult,
};
use crate::signal::AbortSignal;
use crate::telemetry;
use crate::tools::error::codes;
use crate::tools::events::elapsed_ms;
use crate::tools::registry::WeakRegistry;
use crate::tools::InputAnswers;
use crate::tools::{
    ContentBlock, Registry, Schema, ToolDefinition, ToolError, ToolMode, ToolOutput,
    ToolRunContext, RUN_CODE_NAME,
};

use super::scheduler::{DriverConfig, Scheduler};
use super::{render, RunCodeConfig, RunCodeError, RunReport};

/// The model-facing texts of `run_code` for one program language.
#[derive(Debug, PartialEq, Eq)]
pub struct Flavor {
    /// The language these texts are for.
    pub language: Language,
    /// The tool's description.
    pub description: &'static str,
    /// The `code` parameter's description.
    pub code_description: &'static str,
}

/// The texts for TypeScript runtimes (and for a registry with no runtime).
pub const TYPESCRIPT_FLAVOR: Flavor = Flavor {
    language: Language::TypeScript,
    description: "Execute a TypeScript program against the available tools. Takes two required arguments: `code`, the BODY of an async function (erasable syntax only; top-level `await` and `return` work), and `description`, a short summary of what the program does. Call tools as `await tools.name(args)` per the declarations in the system prompt. Only what you print or return is program output — curate it. Image-bearing subtool results are attached after the run.",
    code_description: "The program: the body of an async TypeScript function.",
};

/// The texts for Python runtimes.
pub const PYTHON_FLAVOR: Flavor = Flavor {
    language: Language::Python,
    description: "Execute a Python program against the available tools. Takes two required arguments: `code`, the BODY of an async function (top-level `await` and `return` work), and `description`, a short summary of what the program does. Call tools as `await tools.name(args)` per the declarations in the system prompt. Use `print(...)` and/or `return <value>` for program output — curate it. Image-bearing subtool results are attached after the run.",
    code_description: "The program: the body of an async Python function.",
};

/// The `description` parameter's description, the same for every language.
pub const DESCRIPTION_PARAMETER: &str = "Clear, concise description of what this program does in active voice, 5-10 words (shown in the UI). Examples: \"Count TODO markers across packages\"; \"Read failing test and its fixture\"; \"Rename config key in every cordis.yml\".";

impl Flavor {
    /// The texts for programs in `language`.
    pub fn of(language: Language) -> &'static Flavor {
        match language {
            Language::TypeScript => &TYPESCRIPT_FLAVOR,
            Language::Python => &PYTHON_FLAVOR,
        }
    }

    /// The exact parameter schema: `code` and `description`, both required strings, with no
    /// `additionalProperties` key (the parameter root is open).
    pub fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": self.code_description},
                "description": {"type": "string", "description": DESCRIPTION_PARAMETER},
            },
            "required": ["code", "description"],
        })
    }
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "logs": {"type": "array", "items": {"type": "string"}},
            "result": {},
            "hint": {"type": "string"},
            "paused": {
                "type": "object",
                "properties": {
                    "runId": {"type": "string"},
                    "pending": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "callId": {"type": "string"},
                                "tool": {"type": "string"},
                                "arguments": {},
                                "approval": {"type": "boolean"},
                                "questions": {"type": "object"},
                            },
                            "required": ["callId", "tool", "arguments"],
                        },
                    },
                },
                "required": ["runId", "pending"],
            },
        },
        "required": ["logs"],
        "additionalProperties": false,
    })
}

/// `run_code` as a registrable definition.
pub(super) fn definition(
    registry: &Registry,
    runtime: Option<Arc<dyn CodeRuntime>>,
    config: RunCodeConfig,
    flavor: &'static Flavor,
) -> ToolDefinition {
    // Both literals are in the subset (and tested); the fallbacks only keep this total.
    let parameters =
        Schema::raw(flavor.parameters()).unwrap_or_else(|_| Schema::empty_parameters());
    let output = Schema::raw(output_schema()).unwrap_or_else(|_| Schema::empty_parameters());
    let inbox = Arc::new(Inbox::default());
    let shared = Arc::new(Shared {
        registry: registry.downgrade(),
        runtime,
        config,
        inbox: inbox.clone(),
    });
    let mut definition = ToolDefinition::builder(RUN_CODE_NAME)
        .description(flavor.description)
        .parameters(parameters)
        .output(ToolOutput::new(output, |_args, value| {
            let logs: Vec<String> = value
                .get("logs")
                .and_then(Value::as_array)
                .map(|logs| {
                    logs.iter()
                        .filter_map(|l| l.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let mut text = render::output_text(&logs, value.get("result"));
            if let Some(hint) = value.get("hint").and_then(Value::as_str) {
                text.push('\n');
                text.push_str(hint);
            }
            if let Some(paused) = value.get("paused") {
                text.push('\n');
                text.push_str(&render::paused_text(paused));
            }
            Ok(vec![ContentBlock::text(text)])
        }))
        .execute(move |args, ctx| {
            let span = telemetry::run_span(ctx.call_id());
            execute(shared.clone(), args, ctx, span.clone()).instrument(span)
        })
        .present_call(|args| {
            Some(json!({
                "card": "generic",
                "title": args.get("description").cloned().unwrap_or(Value::Null),
                "kind": "execute",
                "rawInput": args.get("code").cloned().unwrap_or(Value::Null),
            }))
        })
        .build();
    definition.code_inbox = Some(inbox);
    definition
}

struct Shared {
    registry: WeakRegistry,
    runtime: Option<Arc<dyn CodeRuntime>>,
    config: RunCodeConfig,
    /// Typed requests ([`super::run`]) waiting for their call.
    inbox: Arc<Inbox>,
}

fn missing_runtime(mode: ToolMode) -> ToolError {
    ToolError::new(RunCodeError::MissingRuntime { mode }.to_string())
}

/// One program: bind the visible tools, run, drain every sub-call, report, shape the value.
async fn execute(
    shared: Arc<Shared>,
    args: Arc<Value>,
    ctx: ToolRunContext,
    span: Span,
) -> Result<Value, ToolError> {
    let started = Instant::now();
    // A typed request for this call, if it came through `run_code::run`.
    let typed = shared.inbox.take(ctx.call_id());
    let code = args.get("code").and_then(Value::as_str).unwrap_or_default();
    let description = args
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if description.trim().is_empty() {
        return Err(ToolError::new(
            "invalid description: expected a non-empty string",
        ));
    }
    let Some(registry) = shared.registry.upgrade() else {
        return Err(ToolError::new("run_code: its registry is gone"));
    };
    let Some(runtime) = shared.runtime.clone() else {
        return Err(missing_runtime(registry.mode_for(ctx.agent())));
    };
    if let Some(typed) = &typed {
        if typed.language != runtime.language() {
            return Err(ToolError::new(format!(
                "run_code: this runtime runs {} programs, not {}",
                runtime.language().title(),
                typed.language.title()
            )));
        }
    }

    let driver_config = DriverConfig {
        registry: registry.clone(),
        max_parallel: shared.config.max_parallel_sub_calls,
        settle_grace: shared.config.settle_grace,
        events: shared.config.events.clone(),
        span: span.clone(),
    };
    let scheduler = Scheduler::new(&ctx, driver_config);
    let definitions = registry.definitions(ctx.agent());
    let visible = || definitions.iter().filter(|d| d.name() != RUN_CODE_NAME);
    let functions: BTreeMap<String, BindingFn> = visible()
        .map(|d| (d.name().to_owned(), binding(scheduler.clone(), d.name())))
        .collect();
    let preflight = shared.config.preflight.then(|| {
        Arc::new(Preflight {
            schemas: visible()
                .map(|d| (BindingRef::new("tools", d.name()), d.parameters().clone()))
                .collect(),
            urls: visible()
                .filter_map(|d| Some((BindingRef::new("tools", d.name()), d.web_fetch()?.clone())))
                .collect(),
        })
    });
    // A program's global `fetch` goes through the first tool that fetches as the Web does.
    let web_fetch = visible()
        .find(|d| d.web_fetch().is_some())
        .map(|d| BindingRef::new("tools", d.name()));
    // A tool whose approval this session already answered for good is not paused for: the
    // pipeline decides its calls from that answer.
    let approve_on: BTreeSet<String> = shared
        .config
        .approve_on
        .iter()
        .filter(|name| {
            ctx.agent()
                .is_none_or(|agent| registry.remembered_approval(agent, name).is_none())
        })
        .cloned()
        .collect();
    drop(definitions);
    drop(registry);
    // The configured tool names, as the members of the `tools` namespace they are bound as.
    let tools = |names: &BTreeSet<String>| -> BTreeSet<BindingRef> {
        names
            .iter()
            .map(|name| BindingRef::new("tools", name))
            .collect()
    };
    let (pause_on, approve_on) = (tools(&shared.config.pause_on), tools(&approve_on));
    // Only a typed request resumes a run or tightens its budgets: a model's call cannot.
    let (resume, budgets, delivery) = match typed {
        Some(Typed {
            resume,
            budgets,
            delivery,
            ..
        }) => (resume, budgets, Some(delivery)),
        None => (None, None, None),
    };
    let request = RunRequest {
        program: code.to_owned(),
        pause_on,
        approve_on,
        resume,
        budgets,
        bindings: vec![BindingNamespace {
            global: "tools".to_owned(),
            functions,
            error_class: Some(ErrorClass {
                name: "ToolCallError".to_owned(),
                member_name_property: "toolName".to_owned(),
            }),
        }],
        signal: Some(scheduler.run_signal()),
        preflight,
        held: Some(scheduler.held()),
        call_caps: shared.config.call_caps.clone(),
        web_fetch,
        input_calls: Some(Arc::new(ToolCalls {
            scheduler: scheduler.clone(),
        })),
    };
    // The run and its scheduler are polled together, in this call's task: sub-calls advance
    // whenever the run yields (mid-computation too), and the scheduler keeps going after the
    // run returned until every call it started has committed.
    let mut run = runtime.run(request);
    let mut outcome = None;
    let sub_calls = std::future::poll_fn(|cx| {
        if outcome.is_none() {
            if let Poll::Ready(done) = run.as_mut().poll(cx) {
                outcome = Some(done);
            }
        }
        scheduler.poll_outer(cx, outcome.is_some())
    })
    .await;
    drop(run);
    let Some(outcome) = outcome else {
        return Err(ToolError::new("run_code: the run ended without a result"));
    };
    let result = outcome.map_err(|rejection| ToolError::new(rejection.to_string()))?;
    telemetry::record_run(&span, &result, sub_calls.len());
    tracing::info!(
        run = ctx.call_id(),
        outcome = telemetry::outcome(&result),
        calls = sub_calls.len(),
        duration_ms = elapsed_ms(started),
        "run finished"
    );
    if let Some(observer) = &shared.config.on_run {
        observer(&RunReport {
            call_id: ctx.call_id(),
            result: &result,
            sub_calls: &sub_calls,
        });
    }
    match delivery {
        None => program_output(result, code, None),
        Some(delivery) => {
            let mut run = CodeRun {
                logs: Vec::new(),
                failure: None,
                hint: None,
                paused: None,
                compute_fuel: result.compute_fuel,
                calls: sub_calls,
            };
            let output = program_output(result, code, Some(&mut run));
            delivery.deliver(run);
            output
        }
    }
}

/// The binding the program calls as `tools[name]`: queue the call, resolve when it commits.
fn binding(scheduler: Arc<Scheduler>, name: &str) -> BindingFn {
    let name = name.to_owned();
    Arc::new(move |arguments, host_signal| {
        match scheduler.submit(&name, arguments, host_signal, None) {
            Ok(call) => Box::pin(async move { call.await.map_err(|failure| failure.message) }),
            Err(message) => Box::pin(std::future::ready(Err(message))),
        }
    })
}

/// The `tools` bindings as calls that can need a person's input: the same queue, with the
/// failure's questions kept and the answers passed on.
struct ToolCalls {
    scheduler: Arc<Scheduler>,
}

impl std::fmt::Debug for ToolCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolCalls")
    }
}

impl InputCalls for ToolCalls {
    fn covers(&self, global: &str, _name: &str) -> bool {
        global == "tools"
    }

    fn call(
        &self,
        (_global, name): (&str, &str),
        arguments: Value,
        signal: AbortSignal,
        answers: Option<Arc<InputAnswers>>,
    ) -> BoxFuture<'static, Result<Value, CallFailure>> {
        match self.scheduler.submit(name, arguments, signal, answers) {
            Ok(call) => Box::pin(call),
            Err(message) => Box::pin(std::future::ready(Err(message.into()))),
        }
    }
}

/// `{logs, result?, hint?}`, or the `CODE_RUN_FAILED` error with the failing line under a caret
/// and the captured output. A typed request's `run` takes the rest of the result (the value
/// stays in the output, where [`super::CodeOutcome::value`] finds it).
fn program_output(
    result: RunResult,
    code: &str,
    run: Option<&mut CodeRun>,
) -> Result<Value, ToolError> {
    let RunResult {
        value,
        logs,
        error,
        hint,
        paused,
        ..
    } = result;
    let Some(run) = run else {
        return shape_output(value, logs, error, hint, paused.as_ref(), code);
    };
    let output = shape_output(
        value,
        logs.clone(),
        error.clone(),
        hint.clone(),
        paused.as_ref(),
        code,
    );
    run.logs = logs;
    run.failure = error;
    run.hint = hint;
    run.paused = paused;
    output
}

fn shape_output(
    value: Option<Value>,
    logs: Vec<String>,
    error: Option<crate::code::RunFailure>,
    hint: Option<String>,
    paused: Option<&PausedRun>,
    code: &str,
) -> Result<Value, ToolError> {
    if let Some(failure) = error {
        let place = match (failure.line, failure.column) {
            (Some(line), column) => render::excerpt(code, line, column.unwrap_or(0))
                .map(|excerpt| format!("\n{excerpt}"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        let captured = if logs.is_empty() {
            String::new()
        } else {
            format!("\nCaptured output:\n{}", logs.join("\n"))
        };
        return Err(ToolError::coded(
            "CodeRunFailedError",
            codes::CODE_RUN_FAILED,
            format!(
                "code run failed ({}): {}{place}{captured}",
                failure.kind, failure.message
            ),
        ));
    }
    let mut output = Map::new();
    output.insert(
        "logs".to_owned(),
        Value::Array(logs.into_iter().map(Value::String).collect()),
    );
    if let Some(value) = value {
        output.insert("result".to_owned(), value);
    }
    if let Some(hint) = hint {
        output.insert("hint".to_owned(), Value::String(hint));
    }
    if let Some(paused) = paused {
        output.insert("paused".to_owned(), paused_json(paused));
    }
    Ok(Value::Object(output))
}

/// `{runId, pending: [{callId, tool, arguments, approval?, questions?}]}`: the pending calls named as
/// tools, the vocabulary of the SDK the program was written against.
pub fn paused_json(paused: &PausedRun) -> Value {
    let pending = paused
        .pending
        .iter()
        .map(|call| {
            let tool = if call.global == "tools" {
                call.name.clone()
            } else {
                format!("{}.{}", call.global, call.name)
            };
            let arguments = crate::json::clone_deep(&call.arguments);
            let mut entry = json!({"callId": call.call_id, "tool": tool, "arguments": arguments});
            if call.approval {
                entry["approval"] = Value::Bool(true);
            }
            if let Some(questions) = &call.questions {
                let questions = questions
                    .iter()
                    .map(|(key, question)| (key.clone(), crate::json::clone_deep(question)))
                    .collect();
                entry["questions"] = Value::Object(questions);
            }
            entry
        })
        .collect();
    json!({"runId": paused.run_id, "pending": Value::Array(pending)})
}

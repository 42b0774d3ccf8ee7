//! `run_code` calls as tasks (the MCP tasks extension, `io.modelcontextprotocol/tasks`), for
//! clients that declare it: a call still running after the server's threshold is answered with
//! a task, and its run goes on in this process, its status and result kept in the state store
//! so that `tasks/get`, `tasks/update` and `tasks/cancel` work on any replica.
//!
//! A task's document (`durable::Durability::keep_task`, sealed: the store shows its size, no
//! more) holds what the protocol shows (status, times, the result, the questions of a paused
//! run) and what only codemode reads: the `requestState` of a paused run and the call's
//! arguments (to resume it on an update), the client it belongs to (an owner id: only that
//! client gets, answers or cancels it; to any other it does not exist), and a cancellation
//! asked for. The process running the task polls its document for that request, and renews
//! the task's lease (`Durability::keep_lease`) every lease period; a task still `working`
//! whose lease is older than [`LEASE_PERIODS`] periods of it is reported `failed` by any
//! replica, its process gone. A finished run does not overwrite a task cancelled or failed
//! meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use codemode_runtime::code::Resume;
use rmcp::model::{CallToolResponse, CreateTaskResult, GetTaskResult, InputResponses};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::{json, Map, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::server::{principal, Served, ServedTasks, Session};
use codemode_durable::Principal;

/// How often the process running a task looks for a cancellation, and how often clients are
/// told to poll.
const POLL: Duration = Duration::from_millis(500);

/// How many lease periods a task may go without a renewal before it counts as stopped: one
/// late renewal (a slow store, a busy process) is not a dead process.
pub const LEASE_PERIODS: u32 = 3;

type Work = JoinHandle<Result<CallToolResponse, McpError>>;

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn internal(why: impl std::fmt::Display) -> McpError {
    McpError::internal_error(format!("codemode: {why}"), None)
}

fn joined(
    outcome: Result<Result<CallToolResponse, McpError>, tokio::task::JoinError>,
) -> Result<CallToolResponse, McpError> {
    outcome.unwrap_or_else(|e| Err(internal(format!("the run's task failed: {e}"))))
}

/// Runs the call; should it outlive `tasks.after`, answers with a task instead and lets it
/// run on.
pub(super) async fn answer_or_task(
    session: Session,
    tasks: &ServedTasks,
    arguments: Value,
    resume: Option<Resume>,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let abort = CancellationToken::new();
    let detached = Arc::new(AtomicBool::new(false));
    // The client going away ends the call, until it is a task.
    {
        let (abort, gone, detached) = (abort.clone(), context.ct.clone(), detached.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = gone.cancelled() => if !detached.load(Ordering::SeqCst) {
                    abort.cancel();
                },
                () = abort.cancelled() => {}
            }
        });
    }
    let owner = tasks.durability.owner_of(&principal(&context));
    let mut work = spawn(&session, arguments.clone(), resume, context, abort.clone());
    tokio::select! {
        done = &mut work => {
            // Ends the watcher above; the run is over.
            abort.cancel();
            return joined(done);
        }
        () = tokio::time::sleep(tasks.after) => {}
    }
    detached.store(true, Ordering::SeqCst);
    let durability = &tasks.durability;
    let task_id = codemode_durable::new_run_id().map_err(internal)?;
    let created = now();
    let document = json!({
        "taskId": task_id,
        "status": "working",
        "statusMessage": "the program is running",
        "createdAt": created,
        "lastUpdatedAt": created,
        "ttlMs": u64::try_from(durability.time_to_live().as_millis()).unwrap_or(u64::MAX),
        "pollIntervalMs": u64::try_from(POLL.as_millis()).unwrap_or(u64::MAX),
        "arguments": arguments,
        "owner": owner,
    });
    // The lease before the document: no replica sees the task working without one.
    let kept = match renew(durability, &task_id, tasks.lease).await {
        Ok(()) => durability.keep_task(&task_id, &document).await,
        Err(why) => Err(why),
    };
    if let Err(why) = kept {
        // Without a task to point at, the call is answered when it ends, as any other.
        tracing::warn!("{why}; the call is answered when it ends");
        detached.store(false, Ordering::SeqCst);
        let done = work.await;
        abort.cancel();
        return joined(done);
    }
    tokio::spawn(finish(
        tasks.durability.clone(),
        tasks.lease,
        task_id,
        work,
        abort,
    ));
    let mut created = public(&document);
    created.insert("resultType".into(), json!("task"));
    serde_json::from_value::<CreateTaskResult>(Value::Object(created))
        .map(CallToolResponse::Task)
        .map_err(internal)
}

/// Starts `session`'s call on its own, so that it may outlive the request.
fn spawn(
    session: &Session,
    arguments: Value,
    resume: Option<Resume>,
    context: RequestContext<RoleServer>,
    abort: CancellationToken,
) -> Work {
    let session = session.clone();
    tokio::spawn(async move { session.answer(arguments, resume, &context, &abort).await })
}

/// Renews task `task_id`'s lease: this process runs it, and will again within `period`.
async fn renew(
    durability: &codemode_host::Durability,
    task_id: &str,
    period: Duration,
) -> Result<(), codemode_durable::StoreError> {
    let lease = json!({
        "renewedAtMs": codemode_durable::unix_ms(SystemTime::now()),
        "periodMs": u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
    });
    durability.keep_lease(task_id, &lease).await
}

/// Whether a task's status is final: nothing the run does changes it any more.
fn ended(task: &Value) -> bool {
    matches!(status(task), "completed" | "failed" | "cancelled")
}

/// Waits for the task's run, renewing its lease every `lease`, ending the run if a
/// cancellation is asked for meanwhile (or another replica found the task stopped), and keeps
/// its outcome.
async fn finish(
    durability: codemode_host::Durability,
    lease: Duration,
    task_id: String,
    mut work: Work,
    abort: CancellationToken,
) {
    let mut renewals = tokio::time::interval_at(tokio::time::Instant::now() + lease, lease);
    renewals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let outcome = loop {
        tokio::select! {
            done = &mut work => break joined(done),
            _ = renewals.tick() => {
                if let Err(why) = renew(&durability, &task_id, lease).await {
                    tracing::warn!("could not renew the lease of task {task_id}: {why}");
                }
            }
            () = tokio::time::sleep(POLL) => {
                let stop = durability
                    .task(&task_id)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|task| {
                        task.get("cancelRequested") == Some(&Value::Bool(true)) || ended(&task)
                    });
                if stop {
                    abort.cancel();
                }
            }
        }
    };
    abort.cancel();
    let Ok(Some(mut task)) = durability.task(&task_id).await else {
        tracing::warn!("task {task_id} is gone from the store; its outcome is dropped");
        return;
    };
    if ended(&task) {
        return;
    }
    let fields = match outcome {
        Ok(CallToolResponse::Complete(result)) => match serde_json::to_value(&result) {
            Ok(result) => {
                json!({"status": "completed", "statusMessage": "the program ended", "result": result})
            }
            Err(e) => failed(&internal(e)),
        },
        Ok(CallToolResponse::InputRequired(asked)) => json!({
            "status": "input_required",
            "statusMessage": "the run paused: answer its questions with tasks/update",
            "inputRequests": asked.input_requests,
            "requestState": asked.request_state,
        }),
        Ok(_) => failed(&internal("the run answered with a task of its own")),
        Err(error) => failed(&error),
    };
    restate(&mut task, fields);
    if let Err(why) = durability.keep_task(&task_id, &task).await {
        tracing::warn!("{why}; the outcome of task {task_id} is lost");
    }
}

fn failed(error: &McpError) -> Value {
    json!({
        "status": "failed",
        "statusMessage": error.message,
        "error": {"code": error.code.0, "message": error.message},
    })
}

/// What the protocol shows of a task's document: everything but codemode's own fields.
fn public(task: &Value) -> Map<String, Value> {
    let mut shown = task.as_object().cloned().unwrap_or_default();
    for own in ["arguments", "requestState", "cancelRequested", "owner"] {
        shown.remove(own);
    }
    shown
}

fn tasks_of(served: &Served) -> Result<&ServedTasks, McpError> {
    served.task_store().ok_or_else(|| {
        McpError::invalid_params(
            "this server runs no tasks (start it with --task-after-ms)",
            None,
        )
    })
}

/// Task `task_id`'s document as `principal` may see it: a task of another client is one it
/// cannot tell from a task that never existed. A task still `working` whose lease lapsed is
/// failed here, for every replica.
async fn document(
    tasks: &ServedTasks,
    task_id: &str,
    principal: &Principal,
) -> Result<Value, McpError> {
    let durability = &tasks.durability;
    let found = match durability.task(task_id).await {
        Ok(found) => found,
        Err(why) => return Err(McpError::invalid_params(why.to_string(), None)),
    };
    let owner = durability.owner_of(principal);
    let Some(mut task) =
        found.filter(|task| task.get("owner").and_then(Value::as_str) == Some(owner.as_str()))
    else {
        return Err(McpError::invalid_params(
            format!("no task {task_id}: it never existed, or it expired"),
            None,
        ));
    };
    if status(&task) == "working" {
        if let Some(lapsed) = lapsed(durability, task_id).await {
            let message = format!(
                "the process running this task stopped (its lease lapsed at {lapsed}); its run is lost: call run_code again"
            );
            restate(
                &mut task,
                json!({"status": "failed", "statusMessage": message, "error": {"code": -32603, "message": message}}),
            );
            // Kept, so that every replica says the same from now on; should the write fail,
            // the next reader finds the lease lapsed all the same.
            if let Err(why) = durability.keep_task(task_id, &task).await {
                tracing::warn!("{why}");
            }
        }
    }
    Ok(task)
}

/// When task `task_id`'s lease lapsed (RFC 3339), if it has: its last renewal is more than
/// [`LEASE_PERIODS`] of the renewing process's periods old, or there is none. `None` also
/// when the lease cannot be read: a store that fails is no proof that a process died.
async fn lapsed(durability: &codemode_host::Durability, task_id: &str) -> Option<String> {
    let now = codemode_durable::unix_ms(SystemTime::now());
    let lease = match durability.lease(task_id).await {
        Ok(Some(lease)) => lease,
        // Written before the document says `working`: none means a process that stopped
        // before it got that far, or a lease swept away with its expired task.
        Ok(None) => return Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string()),
        Err(why) => {
            tracing::warn!("{why}");
            return None;
        }
    };
    let field = |name: &str| lease.get(name).and_then(Value::as_u64);
    let (Some(renewed), Some(period)) = (field("renewedAtMs"), field("periodMs")) else {
        return None;
    };
    let until = renewed.saturating_add(period.saturating_mul(u64::from(LEASE_PERIODS)));
    (now > until).then(|| {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(until);
        humantime::format_rfc3339_seconds(at).to_string()
    })
}

fn status(task: &Value) -> &str {
    task.get("status")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `tasks/get`.
pub(super) async fn get(
    served: &Served,
    task_id: &str,
    principal: &Principal,
) -> Result<GetTaskResult, McpError> {
    let tasks = tasks_of(served)?;
    let task = document(tasks, task_id, principal).await?;
    let mut shown = public(&task);
    shown.insert("resultType".into(), json!("complete"));
    serde_json::from_value(Value::Object(shown)).map_err(internal)
}

/// `tasks/update`: the answers to a paused task's questions resume its run, here.
pub(super) async fn update(
    session: Session,
    task_id: &str,
    answers: InputResponses,
    context: RequestContext<RoleServer>,
) -> Result<(), McpError> {
    let served = session.served().clone();
    let tasks = tasks_of(&served)?;
    let principal = principal(&context);
    let mut task = document(tasks, task_id, &principal).await?;
    if status(&task) != "input_required" {
        return Err(McpError::invalid_params(
            format!("task {task_id} is {}, not waiting for input", status(&task)),
            None,
        ));
    }
    let state = task
        .get("requestState")
        .and_then(Value::as_str)
        .ok_or_else(|| internal(format!("task {task_id} waits for input but names no run")))?
        .to_owned();
    let arguments = task.get("arguments").cloned().unwrap_or(Value::Null);
    let resume = session.resumption(&state, Some(&answers), &principal, &arguments)?;
    restate(
        &mut task,
        json!({"status": "working", "statusMessage": "the program is running"}),
    );
    renew(&tasks.durability, task_id, tasks.lease)
        .await
        .map_err(internal)?;
    tasks
        .durability
        .keep_task(task_id, &task)
        .await
        .map_err(internal)?;
    let abort = CancellationToken::new();
    // The run goes on past this request: the request's context only says how to ask again.
    let work = spawn(&session, arguments, Some(resume), context, abort.clone());
    tokio::spawn(finish(
        tasks.durability.clone(),
        tasks.lease,
        task_id.to_owned(),
        work,
        abort,
    ));
    Ok(())
}

/// A task's new state: `fields` replace what it said, what it asked is dropped (a question is
/// never valid past a change of state), and the time of the change is stamped.
fn restate(task: &mut Value, fields: Value) {
    if let (Value::Object(task), Value::Object(fields)) = (task, fields) {
        task.remove("inputRequests");
        task.remove("requestState");
        task.extend(fields);
        task.insert("lastUpdatedAt".into(), json!(now()));
    }
}

/// `tasks/cancel`: the task ends as cancelled; the process running it ends its run.
pub(super) async fn cancel(
    served: &Served,
    task_id: &str,
    principal: &Principal,
) -> Result<(), McpError> {
    let tasks = tasks_of(served)?;
    let mut task = document(tasks, task_id, principal).await?;
    let current = status(&task).to_owned();
    if ended(&task) {
        return Err(McpError::invalid_params(
            format!("task {task_id} already ended ({current})"),
            None,
        ));
    }
    restate(
        &mut task,
        json!({"status": "cancelled", "statusMessage": "cancelled by the client", "cancelRequested": true}),
    );
    tasks
        .durability
        .keep_task(task_id, &task)
        .await
        .map_err(internal)
}

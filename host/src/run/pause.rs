//! Pause and restore: a paused run's memory, globals and host side written to its record, and
//! a fresh instance made to continue it.

use std::time::Instant;

use codemode_runtime::code::{
    BindingRef, FailureCause, FailureKind, PausedRun, PendingCall, RunFailure,
};
use codemode_runtime::json;
use codemode_runtime::signal::AbortSignal;
use serde_json::Value;
use wasmtime::{InstancePre, Store};

use crate::config::Budgets;
use crate::durable::{record, KeepError};

use super::outcome::failure_from_stop;
use super::{Keeping, Resumed};
use crate::store::{record_name, OpenCall, PausingCall, PendingInput, RunState, Stop};
use codemode_runtime::tools::InputAnswers;

/// Writes the paused run in `store` down and reports what it waits on.
pub(super) async fn pause(
    store: &mut Store<RunState>,
    instance: wasmtime::Instance,
    keeping: &Keeping<'_>,
    budgets: &Budgets,
    fuel_spent: u64,
) -> Result<(PausedRun, u64), KeepError> {
    use crate::durable::record::{GlobalValue, Header, SavedBudgets, SavedGlobal};
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| "worker error: the sandbox module has no memory to keep".to_owned())?;
    let data = memory.data(&*store);
    let memory_bytes = data.len() as u64;
    let runs = crate::durable::memory::diff(&keeping.image.bytes, data);
    let names: Vec<String> = instance
        .module(&*store)
        .exports()
        .map(|e| e.name().to_owned())
        .filter(|name| name.starts_with(codemode_rewrite::globals::EXPORT_PREFIX))
        .collect();
    let mut globals = Vec::with_capacity(names.len());
    for name in names {
        let Some(global) = instance.get_global(&mut *store, &name) else {
            continue;
        };
        let value = match global.get(&mut *store) {
            wasmtime::Val::I32(x) => GlobalValue::I32(x),
            wasmtime::Val::I64(x) => GlobalValue::I64(x),
            wasmtime::Val::F32(x) => GlobalValue::F32(x),
            wasmtime::Val::F64(x) => GlobalValue::F64(x),
            _ => return Err(format!("worker error: global {name} cannot be kept").into()),
        };
        globals.push(SavedGlobal { name, value });
    }
    let state = store.data();
    let header = Header {
        run_id: crate::durable::new_run_id()?,
        guest: keeping.guest.to_owned(),
        image: keeping.image.digest.clone(),
        paused_at_ms: crate::durable::unix_ms(std::time::SystemTime::now()),
        program: keeping.program.to_owned(),
        budgets: SavedBudgets::from(budgets),
        fuel_spent,
        wall_spent_ns: state.started.elapsed().as_nanos() as u64,
        memory_bytes,
        globals,
        host: state.host_state(),
    };
    let bytes = keeping.durability.keep(&header, &runs).await?;
    let mut pending = Vec::with_capacity(header.host.pending.len());
    for call in &header.host.pending {
        // Written by `json::to_string` at the call: parses back.
        let arguments = json::parse(call.arguments.as_bytes()).unwrap_or(Value::Null);
        // Written by `json::to_string` when the call was kept: an object, parses back.
        let questions =
            call.input
                .as_ref()
                .map(|input| match json::parse(input.questions.as_bytes()) {
                    Ok(Value::Object(questions)) => questions.into_iter().collect(),
                    _ => Default::default(),
                });
        pending.push(PendingCall {
            call_id: call.id.to_string(),
            global: call.global.clone(),
            name: call.name.clone(),
            arguments,
            approval: call.approval,
            questions,
        });
    }
    let run = PausedRun {
        run_id: header.run_id,
        pending,
    };
    Ok((run, bytes))
}

/// Makes a fresh instance the paused run: its memory grown and written back, its globals set.
pub(super) fn restore(
    store: &mut Store<RunState>,
    instance: wasmtime::Instance,
    resumed: &Resumed,
    budgets: &Budgets,
) -> Result<(), RunFailure> {
    use crate::durable::record::GlobalValue;
    let broken = |why: &str| {
        RunFailure::new(
            FailureKind::WorkerExit,
            format!("worker error: the paused run could not be restored: {why}"),
        )
        .with_cause(FailureCause::Trap)
    };
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| broken("the sandbox module has no memory"))?;
    let target = usize::try_from(resumed.header.memory_bytes).unwrap_or(usize::MAX);
    let current = memory.data_size(&*store);
    let page = 1usize << 16;
    if target < current || target % page != 0 {
        return Err(broken("the record's memory size does not fit this guest"));
    }
    let grow = ((target - current) / page) as u64;
    if grow > 0 && memory.grow(&mut *store, grow).is_err() {
        if store.data().limiter.hit {
            return Err(failure_from_stop(&Stop::Memory, budgets));
        }
        return Err(broken("its memory could not be grown"));
    }
    crate::durable::memory::apply(&resumed.runs, memory.data_mut(&mut *store))
        .map_err(|why| broken(&why))?;
    for saved in &resumed.header.globals {
        let global = instance
            .get_global(&mut *store, &saved.name)
            .ok_or_else(|| broken(&format!("the guest has no global {}", saved.name)))?;
        let value = match saved.value {
            GlobalValue::I32(x) => wasmtime::Val::I32(x),
            GlobalValue::I64(x) => wasmtime::Val::I64(x),
            GlobalValue::F32(x) => wasmtime::Val::F32(x),
            GlobalValue::F64(x) => wasmtime::Val::F64(x),
        };
        global
            .set(&mut *store, value)
            .map_err(|e| broken(&format!("global {}: {e}", saved.name)))?;
    }
    Ok(())
}

impl RunState {
    /// The host's side of a run that is pausing, for its record.
    fn host_state(&self) -> record::HostState {
        let now = Instant::now();
        let pending = self
            .pausing
            .iter()
            .map(|(id, call)| {
                let open = self.open_calls.get(id);
                record::SavedCall {
                    id: *id,
                    slot: open.map_or(usize::MAX, |o| o.slot),
                    argument_bytes: open.map_or(0, |o| o.argument_bytes),
                    global: call.global.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    approval: call.approval,
                    input: call.input.as_ref().map(|input| record::SavedInput {
                        questions: input.questions.clone(),
                        state: input.state.clone(),
                    }),
                }
            })
            .collect();
        let timers = self
            .timer_deadlines
            .iter()
            .map(|(id, at)| record::SavedTimer {
                id: *id,
                remaining_ns: at.saturating_duration_since(now).as_nanos() as u64,
            })
            .collect();
        record::HostState {
            next_call_id: self.next_call_id,
            calls: self.calls.clone(),
            pending,
            timers,
            ledger: self.ledger.clone(),
            logs: self.logs.clone(),
            pause_on: self.pause_on.clone(),
            approve_on: self.approve_on.clone(),
            approved: self.approved.clone(),
            declined: self.declined.clone(),
        }
    }

    /// Fails every call the run would have paused at with `message` (an approval is denied
    /// with it): the run was not written down, and goes on.
    pub(super) fn refuse_pausing(&mut self, message: &str) {
        let ids: Vec<u32> = self.pausing.keys().copied().collect();
        for id in ids {
            self.answer(id, Err(message.to_owned()));
        }
    }

    /// Answers pending call `id`: a result is delivered; an approval's `true` makes the call
    /// now (through its binding, like any call), anything else denies it. An approval answered
    /// `{"approved": bool, "scope": "run" | "session"}` decides the same way every other call
    /// of the tool the run waits on and makes from now on (a session's answer is kept with
    /// the run: its state is all a paused run carries of its session).
    pub(super) fn answer(&mut self, id: u32, reply: Result<Value, String>) {
        let Some(call) = self.pausing.remove(&id) else {
            return;
        };
        if let Some(input) = &call.input {
            self.answer_input(id, &call, input, reply);
            return;
        }
        if !call.approval {
            let frame = self.delivery_for(id, reply);
            self.ready.push_back(frame);
            return;
        }
        let (reply, scoped) = match read_approval(&reply) {
            Ok(Some((approved, scoped))) => (Ok(Value::Bool(approved)), scoped),
            Ok(None) => (reply, false),
            Err(message) => (Err(message), false),
        };
        if scoped {
            let binding = BindingRef::new(call.global.clone(), call.name.clone());
            let approved = matches!(reply, Ok(Value::Bool(true)));
            if approved {
                self.approved.insert(binding);
            } else {
                self.declined.insert(binding);
            }
            let others: Vec<u32> = self
                .pausing
                .iter()
                .filter(|(_, c)| c.approval && c.global == call.global && c.name == call.name)
                .map(|(other, _)| *other)
                .collect();
            for other in others {
                let decision = match approved {
                    true => Ok(Value::Bool(true)),
                    false => Err(format!(
                        "tool \"{}\" was declined for the rest of this run",
                        record_name(&call.name)
                    )),
                };
                self.answer(other, decision);
            }
        }
        let denial = match reply {
            Ok(Value::Bool(true)) => match self.binding(&call.global, &call.name) {
                Some(f) => {
                    // Written by `json::to_string` at the call: parses back.
                    let args = json::parse(call.arguments.as_bytes()).unwrap_or(Value::Null);
                    self.run_binding(id, (&call.global, &call.name), &f, args, None);
                    return;
                }
                None => format!(
                    "tool \"{}\" was approved but is no longer available",
                    record_name(&call.name)
                ),
            },
            Ok(_) => format!("tool \"{}\" was not approved", record_name(&call.name)),
            Err(message) => message,
        };
        let frame = self.delivery_for(id, Err(denial));
        self.ready.push_back(frame);
    }

    /// Answers call `id`, which needs a person's input: an object of answers by question key
    /// makes the call again with them (it may ask again); anything else fails it.
    fn answer_input(
        &mut self,
        id: u32,
        call: &PausingCall,
        input: &PendingInput,
        reply: Result<Value, String>,
    ) {
        let failure = match reply {
            Ok(Value::Object(answers)) => match self.binding(&call.global, &call.name) {
                Some(f) => {
                    // All three were written by `json::to_string`: they parse back.
                    let args = json::parse(call.arguments.as_bytes()).unwrap_or(Value::Null);
                    let state = json::parse(input.state.as_bytes()).unwrap_or(Value::Null);
                    let answers = InputAnswers {
                        responses: answers.into_iter().collect(),
                        state,
                    };
                    self.run_binding(
                        id,
                        (&call.global, &call.name),
                        &f,
                        args,
                        Some(std::sync::Arc::new(answers)),
                    );
                    return;
                }
                None => format!(
                    "tool \"{}\" needed input but is no longer available",
                    record_name(&call.name)
                ),
            },
            Ok(other) => {
                json::drop_deep(other);
                format!(
                    "tool \"{}\" needed answers to its questions, by key ({{\"KEY\": {{\"action\": \"accept\", \"content\": {{…}}}}}}), and the reply was not an object",
                    record_name(&call.name)
                )
            }
            Err(message) => message,
        };
        let frame = self.delivery_for(id, Err(failure));
        self.ready.push_back(frame);
    }

    /// Takes up a paused run's host side; its timers count their remaining time from now.
    pub(super) fn restore(&mut self, host: &record::HostState) {
        let now = Instant::now();
        self.next_call_id = host.next_call_id;
        self.calls = host.calls.clone();
        self.recount_calls();
        self.ledger = host.ledger.clone();
        self.logs = host.logs.clone();
        self.pause_on.extend(host.pause_on.iter().cloned());
        self.approve_on.extend(host.approve_on.iter().cloned());
        self.approved.extend(host.approved.iter().cloned());
        self.declined.extend(host.declined.iter().cloned());
        for call in &host.pending {
            self.open_calls.insert(
                call.id,
                OpenCall {
                    slot: call.slot,
                    argument_bytes: call.argument_bytes,
                },
            );
            self.held.charge(call.argument_bytes);
            self.pausing.insert(
                call.id,
                PausingCall {
                    global: call.global.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    approval: call.approval,
                    input: call.input.as_ref().map(|input| PendingInput {
                        questions: input.questions.clone(),
                        state: input.state.clone(),
                    }),
                },
            );
        }
        for timer in &host.timers {
            let at = now + std::time::Duration::from_nanos(timer.remaining_ns);
            self.arm_timer(timer.id, at);
        }
    }
}

/// What an approval's reply decides: `Some((approved, for the rest of the run))`, `None` for a
/// rejection with a message. Besides `true` and `false` an answer may be `{"approved": bool,
/// "scope": "call" | "run" | "session"}`; `Err` says what is wrong with any other value.
pub(crate) fn read_approval(reply: &Result<Value, String>) -> Result<Option<(bool, bool)>, String> {
    const EXPECTED: &str = "reply true to make the call, false to deny it, {\"approved\": true|false, \"scope\": \"call\"|\"run\"|\"session\"} to decide every call of the tool in that scope, or reject it with a message";
    match reply {
        Err(_) => Ok(None),
        Ok(Value::Bool(approved)) => Ok(Some((*approved, false))),
        Ok(Value::Object(answer)) => {
            let Some(Value::Bool(approved)) = answer.get("approved") else {
                return Err(EXPECTED.to_owned());
            };
            let scope = match answer.get("scope") {
                None | Some(Value::Null) => None,
                Some(Value::String(scope)) => codemode_runtime::tools::ApprovalScope::parse(scope)?,
                Some(_) => return Err(EXPECTED.to_owned()),
            };
            Ok(Some((*approved, scope.is_some())))
        }
        Ok(_) => Err(EXPECTED.to_owned()),
    }
}

/// The linear memory a fresh instance of `pre` starts with. Runs no guest code; the caller
/// holds a slot for it.
pub(crate) async fn pristine_memory(pre: &InstancePre<RunState>) -> Result<Vec<u8>, String> {
    let state = RunState::new(
        &Budgets::default(),
        Vec::new(),
        Vec::new(),
        AbortSignal::never(),
        Instant::now(),
    );
    let mut store = Store::new(pre.module().engine(), state);
    // No fuel: a start function that computes stops at its first test.
    store.data_mut().meter = Some(crate::store::Meter::new(0));
    let instance = pre
        .instantiate_async(&mut store)
        .await
        .map_err(|e| format!("the sandbox could not be instantiated: {e:#}"))?;
    let memory = instance
        .get_memory(&mut store, "memory")
        .ok_or("the sandbox module has no memory")?;
    Ok(memory.data(&store).to_vec())
}

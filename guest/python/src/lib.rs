//! The Python program inside codemode's sandbox: Monty, compiled to WebAssembly.
//!
//! It speaks the bridge exactly as the JavaScript guest does (`codemode-wire` frames through
//! `codemode-guest-imports`): the host calls `cm_run` once, the guest compiles the program and
//! runs it until every task waits on the host, and returns; each `cm_deliver` settles one
//! tool call (or fires one timer) and runs the program on until it waits again or ends.
//!
//! A tool call is `await tools.name(args)`: `tools` is a host object whose members are
//! external functions, so a call suspends Monty with a `FunctionCall`. The guest sends the
//! call frame and answers Monty with a pending future; when no task can go on, Monty
//! suspends with `ResolveFutures`, and that is when the guest returns to the host. Calls that
//! overlap (`asyncio.gather`) are all in flight at once; the host bounds how many run.
//!
//! Like the JavaScript guest, it decides nothing the host relies on: budgets, byte accounting
//! and validation of every frame are the host's.

mod json;
mod names;
mod print;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use codemode_guest_imports as host;
use codemode_wire::{Delivery, Done, DoneKind, STATUS_DONE, STATUS_WAITING};
use monty::{MontyRun, RunProgress};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, NameLookupResult,
    OsFunctionCall, OsPolicy, PrintWriter, ResourceLimits, ResourceTracker, SleepMode,
};

use names::Namespaces;
use print::Logs;

/// The name tracebacks give the program's file.
pub(crate) const PROGRAM_FILE: &str = "program.py";

/// What the run waits on between two deliveries.
enum Waiting {
    /// Every task waits on tool calls or `asyncio.sleep` timers.
    Futures(monty::ResolveFutures),
    /// `time.sleep` holds the whole program until its timer fires.
    Sleep { timer: u32, call: monty::OsCall },
}

/// A tool call in flight: Monty's future to settle, and whose error to raise.
struct InFlight {
    future: u32,
    tool: String,
}

/// The run between `cm_run` and its end.
struct Run {
    namespaces: Namespaces,
    waiting: Option<Waiting>,
    calls: BTreeMap<u32, InFlight>,
    /// `asyncio.sleep` timers armed: timer id → Monty's future.
    timers: BTreeMap<u32, u32>,
    /// Futures settled while `time.sleep` held the program, for Monty once it waits again.
    ready: Vec<(u32, ExtFunctionResult)>,
    last_id: u32,
    logs: Logs,
}

thread_local! {
    static RUN: RefCell<Option<Run>> = const { RefCell::new(None) };
    static DONE: RefCell<bool> = const { RefCell::new(false) };
}

/// Reports the program's outcome; only the first counts.
fn finish(outcome: &Done<'_>) {
    if !DONE.with_borrow_mut(|done| std::mem::replace(done, true)) {
        host::send_done(&outcome.encode());
    }
}

fn exception_done(message: &str, line: u32, column: u32) {
    finish(&Done::Failure {
        kind: DoneKind::Exception,
        line,
        column,
        message: message.into(),
    });
}

/// Pre-initialisation: compiles and runs a first program, so that the interpreter's one-time
/// setup (interned names, tables) is in the snapshot rather than in every run.
#[no_mangle]
pub extern "C" fn cm_init() {
    if let Ok(mut warm) = MontyRun::new(
        "1 + 1".to_owned(),
        PROGRAM_FILE,
        Vec::new(),
        CompileOptions::default(),
    ) {
        let _ = warm.run(Vec::new(), limits(), PrintWriter::Disabled);
    }
}

fn limits() -> ResourceTracker {
    // Time and memory are the host's budgets (fuel, the wall clock, linear memory). Monty's own
    // recursion limit stays: it turns deep recursion into a RecursionError the program can
    // catch, well before the guest's stack runs out.
    ResourceTracker::new(ResourceLimits {
        max_suspensions: usize::MAX,
        ..ResourceLimits::default()
    })
}

/// `asyncio.sleep` and `time.sleep` wait on host timers, as `setTimeout` does in JavaScript;
/// clocks and randomness are what WASI gives the JavaScript guest too.
fn os_policy() -> OsPolicy {
    OsPolicy {
        sleep: SleepMode::CallHost,
        ..OsPolicy::default()
    }
}

/// Entry point: compile the program and run it until it waits or ends.
#[no_mangle]
pub extern "C" fn cm_run() -> u32 {
    let boot_bytes = host::read_boot();
    let Some(boot) = codemode_wire::decode_boot(&boot_bytes) else {
        exception_done("malformed boot frame", 0, 0);
        return STATUS_DONE;
    };
    let namespaces = Namespaces::new(&boot);
    let (input_names, inputs) = namespaces.inputs();
    let runner = match MontyRun::new(
        boot.program.to_owned(),
        PROGRAM_FILE,
        input_names,
        CompileOptions::default(),
    ) {
        Ok(runner) => runner.with_os_policy(os_policy()),
        Err(error) => {
            fail(&error);
            return STATUS_DONE;
        }
    };
    let mut run = Run {
        namespaces,
        waiting: None,
        calls: BTreeMap::new(),
        timers: BTreeMap::new(),
        ready: Vec::new(),
        last_id: 0,
        logs: Logs::default(),
    };
    let started = runner.start(inputs, limits(), PrintWriter::Callback(&mut run.logs));
    let status = advance(&mut run, started);
    RUN.with_borrow_mut(|slot| *slot = Some(run));
    status
}

/// Delivers one reply or timer of `len` bytes, then runs the program on.
#[no_mangle]
pub extern "C" fn cm_deliver(len: u32) -> u32 {
    let bytes = host::read_reply(len);
    let Some(mut run) = RUN.with_borrow_mut(Option::take) else {
        return STATUS_DONE;
    };
    let status = match codemode_wire::decode_delivery(&bytes) {
        Some(delivery) => deliver(&mut run, delivery),
        None => STATUS_WAITING,
    };
    RUN.with_borrow_mut(|slot| *slot = Some(run));
    status
}

fn deliver(run: &mut Run, delivery: Delivery<'_>) -> u32 {
    let (future, result) = match delivery {
        Delivery::Timer { id } => {
            if let Some(future) = run.timers.remove(&id) {
                (future, ExtFunctionResult::Return(MontyObject::none()))
            } else {
                return match run.waiting.take() {
                    Some(Waiting::Sleep { timer, call }) if timer == id => {
                        let resumed =
                            call.resume(MontyObject::none(), PrintWriter::Callback(&mut run.logs));
                        advance(run, resumed)
                    }
                    other => {
                        run.waiting = other;
                        STATUS_WAITING
                    }
                };
            }
        }
        Delivery::Resolved { id, json } => {
            let Some(call) = run.calls.remove(&id) else {
                return STATUS_WAITING;
            };
            let result = match json::read(json) {
                Some(value) => ExtFunctionResult::Return(value),
                None => ExtFunctionResult::Error(names::tool_call_error(
                    &call.tool,
                    "binding resolution must be lossless JSON",
                )),
            };
            (call.future, result)
        }
        Delivery::ResolvedString { id, text } => {
            let Some(call) = run.calls.remove(&id) else {
                return STATUS_WAITING;
            };
            (
                call.future,
                ExtFunctionResult::Return(MontyObject::string(text)),
            )
        }
        Delivery::Rejected { id, message } => {
            let Some(call) = run.calls.remove(&id) else {
                return STATUS_WAITING;
            };
            let error = names::tool_call_error(&call.tool, &message);
            (call.future, ExtFunctionResult::Error(error))
        }
    };
    match run.waiting.take() {
        Some(Waiting::Futures(state)) => {
            let resumed =
                state.resume(vec![(future, result)], PrintWriter::Callback(&mut run.logs));
            advance(run, resumed)
        }
        other => {
            // A reply while `time.sleep` holds the program: Monty takes it when it next waits.
            run.ready.push((future, result));
            run.waiting = other;
            STATUS_WAITING
        }
    }
}

/// Runs the program on from `progress` until it waits on the host or ends.
fn advance(run: &mut Run, mut progress: Result<RunProgress, MontyException>) -> u32 {
    loop {
        let step = match progress {
            Err(error) => {
                run.logs.flush();
                fail(&error);
                return STATUS_DONE;
            }
            Ok(step) => step,
        };
        progress = match step {
            RunProgress::Complete(value) => {
                run.logs.flush();
                complete(&value);
                return STATUS_DONE;
            }
            RunProgress::FunctionCall(call) => {
                let print = PrintWriter::Callback(&mut run.logs);
                match run.namespaces.resolve_call(&call) {
                    Err(error) => call.resume(ExtFunctionResult::Error(error), print),
                    Ok((header, tool)) => {
                        match call_tool(&mut run.last_id, header, &call.args, &tool) {
                            Ok(id) => {
                                run.calls.insert(
                                    id,
                                    InFlight {
                                        future: call.call_id,
                                        tool,
                                    },
                                );
                                call.resume_pending(print)
                            }
                            Err(error) => call.resume(ExtFunctionResult::Error(error), print),
                        }
                    }
                }
            }
            RunProgress::ResolveFutures(state) if !run.ready.is_empty() => {
                let ready = std::mem::take(&mut run.ready);
                state.resume(ready, PrintWriter::Callback(&mut run.logs))
            }
            RunProgress::ResolveFutures(state) => {
                if run.calls.is_empty() && run.timers.is_empty() {
                    run.logs.flush();
                    exception_done("program is waiting on a future that can never settle (no tool call is in flight and no timer is armed)", 0, 0);
                    return STATUS_DONE;
                }
                run.logs.flush();
                run.waiting = Some(Waiting::Futures(state));
                return STATUS_WAITING;
            }
            RunProgress::NameLookup(lookup) => lookup.resume(
                NameLookupResult::Undefined,
                PrintWriter::Callback(&mut run.logs),
            ),
            RunProgress::OsCall(call) => match &call.function_call {
                OsFunctionCall::AsyncSleep(delay) => {
                    let result = match arm_timer(&mut run.last_id, *delay) {
                        Ok(timer) => {
                            run.timers.insert(timer, call.call_id);
                            ExtFunctionResult::Future(call.call_id)
                        }
                        Err(error) => ExtFunctionResult::Error(error),
                    };
                    call.resume(result, PrintWriter::Callback(&mut run.logs))
                }
                OsFunctionCall::Sleep(delay) => match arm_timer(&mut run.last_id, *delay) {
                    Ok(timer) => {
                        run.logs.flush();
                        run.waiting = Some(Waiting::Sleep { timer, call });
                        return STATUS_WAITING;
                    }
                    Err(error) => call.resume(
                        ExtFunctionResult::Error(error),
                        PrintWriter::Callback(&mut run.logs),
                    ),
                },
                OsFunctionCall::Import(module) => {
                    let module = module.clone();
                    call.resume(
                        ExtFunctionResult::NotFound(module),
                        PrintWriter::Callback(&mut run.logs),
                    )
                }
                other => {
                    let error = MontyException::new(
                        ExcType::PermissionError,
                        Some(format!(
                            "{} is not available: a program in codemode's sandbox has no filesystem, environment or network; use the tools",
                            other.name()
                        )),
                    );
                    call.resume(
                        ExtFunctionResult::Error(error),
                        PrintWriter::Callback(&mut run.logs),
                    )
                }
            },
        };
    }
}

/// Arms a host timer for `delay` under the next id; the error the sleep raises when the host
/// refuses it (too many armed).
fn arm_timer(last_id: &mut u32, delay: Duration) -> Result<u32, MontyException> {
    *last_id = last_id.saturating_add(1);
    if host::start_timer(*last_id, delay.as_secs_f64() * 1000.0) {
        Ok(*last_id)
    } else {
        Err(MontyException::new(
            ExcType::RuntimeError,
            Some("too many timers are armed".to_owned()),
        ))
    }
}

/// Sends one tool call; its bridge id, or the error the program gets at once.
fn call_tool(
    last_id: &mut u32,
    header: &[u8],
    args: &monty_types::CallArgs,
    tool: &str,
) -> Result<u32, MontyException> {
    let mut frame = String::with_capacity(64);
    names::arguments_json(args, tool, &mut frame)?;
    // Ids strictly increase; the host refuses any other, so the last id saturates rather
    // than wrapping (no budget reaches it).
    *last_id = last_id.saturating_add(1);
    let id = *last_id;
    let mut bytes = Vec::with_capacity(header.len() + frame.len());
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(frame.as_bytes());
    if host::send_call(id, &bytes) {
        Ok(id)
    } else {
        Err(names::tool_call_error(tool, "the host refused this call"))
    }
}

/// The program ended with `value`: `None` is no value (as `undefined` is in JavaScript).
fn complete(value: &MontyObject) {
    let value = value.as_ref();
    if value.type_name() == "NoneType" {
        finish(&Done::Undefined);
        return;
    }
    let mut out = String::new();
    match json::write(value, &mut out) {
        Ok(()) => finish(&Done::Value(out.as_bytes())),
        Err(not_json) => finish(&Done::Failure {
            kind: DoneKind::InvalidOutput,
            line: 0,
            column: 0,
            message: format!(
                "{}; end with dicts, lists, strings, numbers, booleans or None",
                not_json.describe()
            )
            .into(),
        }),
    }
}

/// An exception escaped the program (or it failed to compile): its type and message, placed
/// at the innermost frame of the program's own code, with the calls that led there.
fn fail(error: &MontyException) {
    // A frame at a function's `def` line is where Monty places arguments that do not bind
    // (`f()` missing one); CPython places that at the call, the frame before it.
    let ours: Vec<_> = error
        .traceback()
        .iter()
        .filter(|f| f.filename == PROGRAM_FILE)
        .collect();
    let callers: Vec<_> = ours
        .iter()
        .copied()
        .filter(|f| !f.preview_line.as_deref().is_some_and(is_def_line))
        .collect();
    // When Monty gives no caller, the `def` is the best place there is.
    let frames = if callers.is_empty() { ours } else { callers };
    let (line, column) = frames
        .last()
        .map_or((0, 0), |f| (f.start.line, f.start.column));
    let mut message = summary(error);
    if frames.len() > 1 {
        message.push_str("\nTraceback (most recent call last):");
        for frame in frames {
            let name = frame.frame_name.as_deref().unwrap_or("<module>");
            message.push_str(&format!("\n  line {}, in {name}", frame.start.line));
        }
    }
    exception_done(&message, line, column);
}

fn is_def_line(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("def ") || line.starts_with("async def ")
}

/// `Type: message` as CPython's last traceback line says it (a `KeyError` shows its key's repr).
fn summary(error: &MontyException) -> String {
    match (error.exc_type(), error.message()) {
        (ExcType::KeyError, Some(key)) => {
            format!("KeyError: {}", MontyObject::string(key).py_repr())
        }
        _ => error.summary(),
    }
}

//! The program inside codemode's sandbox.
//!
//! The host calls `cm_run` once: the guest reads the boot frame, builds a Boa context, installs
//! the prelude (console, namespaces, error classes, timers), starts the program and drains the
//! job queue. It then *returns* with a status. Whenever the host has something for the program
//! (a binding reply or a timer) it calls `cm_deliver`, which settles one promise, drains the
//! queue and returns again. Between those calls the guest's stack is empty: the event loop
//! belongs to the host.
//!
//! This crate must never decide anything the host relies on: budgets, byte accounting and
//! validation of what leaves the sandbox are all re-done on the host.

mod calls;
mod heap;
mod jobs;
mod json_in;
mod json_out;
mod snapshot;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::Path;
use std::rc::Rc;

use boa_engine::object::builtins::JsArray;
use boa_engine::object::{IntegrityLevel, ObjectInitializer};
use boa_engine::property::PropertyDescriptor;
use boa_engine::{
    js_string, Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue,
    NativeFunction, Source,
};

use codemode_guest_imports as host;
use codemode_wire::{Delivery, Done, DoneKind, STATUS_DONE, STATUS_WAITING};

const PRELUDE: &str = include_str!("prelude.js");

/// The program is compiled as this function, one line above the program's first line, so that
/// line N of the program is line N + 1 of the script.
pub(crate) const PROGRAM_PATH: &str = "program";

/// The name the program's function is declared with, and what a stack trace shows for its frames.
/// The program's code sees it as a binding of the enclosing block. One character: each character
/// of the name costs a fresh run about 1,300 fuel (12 characters cost 14,000 more than one).
const MAIN: &str = "ƒ";

/// The prelude's entry points, looked up once when the context is built (so, with
/// pre-initialisation, never during a run).
struct Prelude {
    start: JsObject,
    fire_timer: JsObject,
    fail: JsObject,
    make_error_class: JsObject,
    /// `installFetch(call)`: the global `fetch`, `Headers` and `Response` over a binding.
    install_fetch: JsObject,
    /// `bindingError(errorClass, memberName, message, line, column)`, handed to every binding.
    binding_error: JsValue,
    console: JsValue,
}

/// What the natives called by the prelude record; kept apart from the context so that they can
/// run while the context is executing.
#[derive(Default)]
struct Book {
    timers_armed: BTreeSet<u32>,
    done: bool,
}

thread_local! {
    /// A context with the prelude installed, made by `cm_init` when the module is
    /// pre-initialised (the host snapshots the module right after it), or by `cm_run` otherwise.
    static PREPARED: RefCell<Option<(Context, Prelude)>> = const { RefCell::new(None) };
    static CONTEXT: RefCell<Option<(Context, Prelude)>> = const { RefCell::new(None) };
    static BOOK: RefCell<Book> = RefCell::new(Book::default());
}

/// True exactly once: the first outcome of the run claims the `done` frame.
fn claim_done() -> bool {
    BOOK.with_borrow_mut(|book| !std::mem::replace(&mut book.done, true))
}

/// A failure of kind exception (`line` and `column` 1-based in the program, 0 when unknown).
fn exception(message: &str, line: u32, column: u32) -> Done<'_> {
    Done::Failure {
        kind: DoneKind::Exception,
        line,
        column,
        message: message.into(),
    }
}

fn finish(outcome: Done<'_>) {
    if claim_done() {
        host::send_done(&outcome.encode());
    }
}

fn arg_string(args: &[JsValue], index: usize) -> String {
    args.get(index)
        .and_then(JsValue::as_string)
        .map(|s| s.to_std_string_lossy())
        .unwrap_or_default()
}

fn arg_u32(args: &[JsValue], index: usize) -> u32 {
    args.get(index)
        .and_then(JsValue::as_number)
        .map(|n| n as u32)
        .unwrap_or(0)
}

fn native_log(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    if !BOOK.with_borrow(|book| book.done) {
        host::send_log(&arg_string(args, 0));
    }
    Ok(JsValue::undefined())
}

/// `host.snapshot(value)`: writes `value` into the JSON buffer; false when not lossless.
fn native_snapshot(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let value = args.first().cloned().unwrap_or_default();
    Ok(snapshot::write(&value, context)?.into())
}

fn native_timer_start(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let id = arg_u32(args, 0);
    let delay = args.get(1).and_then(JsValue::as_number).unwrap_or(1.0);
    let armed = host::start_timer(id, delay);
    if armed {
        BOOK.with_borrow_mut(|book| book.timers_armed.insert(id));
    }
    Ok(armed.into())
}

fn native_timer_cancel(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let id = arg_u32(args, 0);
    if BOOK.with_borrow_mut(|book| book.timers_armed.remove(&id)) {
        host::cancel_timer(id);
    }
    Ok(JsValue::undefined())
}

fn native_done(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let kind = arg_u32(args, 0);
    if kind == 1 {
        // The value is in the JSON buffer, after its reserved tag byte.
        if claim_done() {
            json_out::with_frame(|frame| {
                if let Some(tag) = frame.first_mut() {
                    *tag = codemode_wire::DONE_VALUE;
                    host::send_done(frame);
                }
            });
        }
        json_out::release();
        return Ok(JsValue::undefined());
    }
    let payload = arg_string(args, 1);
    let outcome = match kind {
        0 => Done::Undefined,
        3 => Done::Failure {
            kind: DoneKind::InvalidOutput,
            line: 0,
            column: 0,
            message: payload.as_str().into(),
        },
        _ => exception(
            &payload,
            arg_u32(args, 2).saturating_sub(1),
            arg_u32(args, 3),
        ),
    };
    finish(outcome);
    Ok(JsValue::undefined())
}

/// Renders an error that escaped the prelude's own handlers (a limit Boa enforces, or a
/// failure while installing), and ends the run with it.
fn fail_uncaught(error: JsError, context: &mut Context, hooks: Option<&Prelude>) {
    match (error.into_opaque(context), hooks) {
        (Ok(value), Some(hooks)) => {
            let _ = hooks.fail.call(&JsValue::undefined(), &[value], context);
        }
        (Ok(value), None) => {
            let message = value
                .to_string(context)
                .map(|s| s.to_std_string_lossy())
                .unwrap_or_else(|_| "program threw an unrenderable value".to_owned());
            finish(exception(&message, 0, 0));
        }
        (Err(uncatchable), _) => {
            let message = uncatchable.to_string();
            finish(exception(&message, 0, 0));
        }
    }
    // Whatever happened above, the run is over.
    finish(exception("program threw an unrenderable value", 0, 0));
}

fn drain(context: &mut Context, hooks: &Prelude) -> u32 {
    if let Err(error) = context.run_jobs() {
        fail_uncaught(error, context, Some(hooks));
    }
    let (done, idle) = BOOK.with_borrow(|book| {
        (
            book.done,
            !calls::any_in_flight() && book.timers_armed.is_empty(),
        )
    });
    if done {
        return STATUS_DONE;
    }
    if idle {
        finish(exception("program is waiting on a promise that can never settle (no tool call is in flight and no timer is armed)", 0, 0));
        return STATUS_DONE;
    }
    STATUS_WAITING
}

fn host_object(context: &mut Context) -> JsObject {
    let mut init = ObjectInitializer::new(context);
    init.function(
        NativeFunction::from_fn_ptr(native_log),
        js_string!("log"),
        1,
    )
    .function(
        NativeFunction::from_fn_ptr(native_snapshot),
        js_string!("snapshot"),
        1,
    )
    .function(
        NativeFunction::from_fn_ptr(native_timer_start),
        js_string!("timerStart"),
        2,
    )
    .function(
        NativeFunction::from_fn_ptr(native_timer_cancel),
        js_string!("timerCancel"),
        1,
    )
    .function(
        NativeFunction::from_fn_ptr(native_done),
        js_string!("done"),
        4,
    );
    init.build()
}

fn get_fn(object: &JsObject, name: &str, context: &mut Context) -> JsResult<JsObject> {
    object
        .get(JsString::from(name), context)?
        .as_object()
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message(format!("prelude lacks {name}"))
                .into()
        })
}

/// Builds the program's parameters: one frozen, null-prototype namespace object per binding
/// namespace, then the injected error classes, then `console`.
fn install(
    boot: &codemode_wire::Boot<'_>,
    prelude: &Prelude,
    context: &mut Context,
) -> JsResult<(Vec<String>, Vec<JsValue>)> {
    let mut params = Vec::with_capacity(boot.namespaces.len() + 1);
    let mut values = Vec::with_capacity(boot.namespaces.len() + 1);
    let mut classes = Vec::new();
    let mut web_fetch = None;
    for (index, ns) in boot.namespaces.iter().enumerate() {
        let error_class = match &ns.error_class {
            Some((class, member)) => {
                let made = prelude.make_error_class.call(
                    &JsValue::undefined(),
                    &[
                        JsString::from(*class).into(),
                        JsString::from(*member).into(),
                    ],
                    context,
                )?;
                let ctor = match made.as_object() {
                    Some(made) => made.get(js_string!("ctor"), context)?,
                    None => JsValue::undefined(),
                };
                classes.push((class.to_string(), ctor));
                made
            }
            None => JsValue::undefined(),
        };
        let namespace = JsObject::with_null_proto();
        for name in &ns.names {
            let function = calls::binding_function(
                ns.global,
                name,
                error_class.clone(),
                prelude.binding_error.clone(),
                context,
            );
            if boot.web_fetch == Some((index as u32, *name)) {
                web_fetch = Some(function.clone());
            }
            namespace.define_property_or_throw(
                JsString::from(*name),
                PropertyDescriptor::builder()
                    .value(function)
                    .writable(false)
                    .enumerable(true)
                    .configurable(false),
                context,
            )?;
        }
        namespace.set_integrity_level(IntegrityLevel::Frozen, context)?;
        params.push(ns.global.to_string());
        values.push(namespace.into());
    }
    for (class, ctor) in classes {
        params.push(class);
        values.push(ctor);
    }
    if let Some(call) = web_fetch {
        prelude
            .install_fetch
            .call(&JsValue::undefined(), &[call.into()], context)?;
    }
    params.push("console".to_owned());
    values.push(prelude.console.clone());
    Ok((params, values))
}

/// Builds the context and the prelude. Everything here is the same for every run.
fn new_context() -> JsResult<(Context, Prelude)> {
    let mut context = Context::builder()
        .job_executor(Rc::new(jobs::Queue::default()))
        .build()?;
    json_in::install_json_parse(&mut context)?;
    let init =
        context.eval(Source::from_bytes(PRELUDE).with_path(Path::new("codemode:prelude")))?;
    let init = init.as_object().ok_or_else(|| {
        JsError::from(JsNativeError::typ().with_message("prelude is not a function"))
    })?;
    let host = host_object(&mut context);
    let api = init.call(&JsValue::undefined(), &[host.into()], &mut context)?;
    let api = api.as_object().ok_or_else(|| {
        JsError::from(JsNativeError::typ().with_message("prelude returned no API"))
    })?;
    let prelude = Prelude {
        start: get_fn(&api, "start", &mut context)?,
        fire_timer: get_fn(&api, "fireTimer", &mut context)?,
        fail: get_fn(&api, "fail", &mut context)?,
        make_error_class: get_fn(&api, "makeErrorClass", &mut context)?,
        install_fetch: get_fn(&api, "installFetch", &mut context)?,
        binding_error: get_fn(&api, "bindingError", &mut context)?.into(),
        console: api.get(js_string!("console"), &mut context)?,
    };
    Ok((context, prelude))
}

/// The script a program runs as: `'use strict';{async function MAIN(…) {⏎program⏎}MAIN}`, with
/// the program starting on line 2, and where in it the function's own text lies (what
/// `Function.prototype.toString` gives for it). The function is declared in a block, whose
/// completion value it is: strict, the declaration is scoped to the block and makes no global.
/// Parsed as a declaration, the wrapper costs the parser none of the descents through the
/// expression grammar a parenthesised function expression took (two, 9.6 KiB of the guest's
/// stack each).
fn script(parameters: &str, program: &str) -> (String, std::ops::Range<usize>) {
    const OPEN: &str = "'use strict';{";
    let source = format!("{OPEN}async function {MAIN}({parameters}) {{\n{program}\n}}{MAIN}}}");
    let function = OPEN.len()..source.len() - MAIN.len() - 1;
    (source, function)
}

/// Installs the namespaces, compiles the program as the body of an async function and starts it.
fn start(boot: &codemode_wire::Boot<'_>, context: &mut Context, prelude: &Prelude) -> JsResult<()> {
    let (names, values) = install(boot, prelude, context)?;
    // Parameter names were checked as portable identifiers by the host before the run.
    let (source, function) = script(&names.join(", "), boot.program);
    let compiled =
        context.eval(Source::from_bytes(source.as_bytes()).with_path(Path::new(PROGRAM_PATH)));
    match compiled {
        Ok(main) => {
            let expected = source.get(function).map_or(0, |f| f.encode_utf16().count());
            let values = JsArray::from_iter(values, context);
            prelude.start.call(
                &JsValue::undefined(),
                &[main, values.into(), JsValue::from(expected as f64)],
                context,
            )?;
        }
        Err(error) => report_compile_error(error, context),
    }
    Ok(())
}

/// A syntax error in the program (one the host's TypeScript pass did not already catch).
fn report_compile_error(error: JsError, context: &mut Context) {
    let message = match error.try_native(context) {
        Ok(native) => format!("{}: {}", native.kind(), native.message()),
        Err(_) => error.to_string(),
    };
    let (line, column) = syntax_position(&message);
    finish(exception(&message, line.saturating_sub(1), column));
}

/// Finds "line N, col M" in a Boa syntax error message.
fn syntax_position(message: &str) -> (u32, u32) {
    let Some(at) = message.rfind("line ") else {
        return (0, 0);
    };
    let rest = &message[at + 5..];
    let line: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Some(col_at) = rest.find("col ") else {
        return (0, 0);
    };
    let column: String = rest[col_at + 4..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (line.parse().unwrap_or(0), column.parse().unwrap_or(0))
}

/// Pre-initialisation entry point: builds the context and installs the prelude, which is the
/// same for every run. The host calls it once and snapshots the resulting memory, so a run
/// starts from a ready engine. It must not read clocks or randomness or call the host.
#[no_mangle]
pub extern "C" fn cm_init() {
    if let Ok((mut context, prelude)) = new_context() {
        // A first script in the program's shape, evaluated here rather than by every run.
        let (warm_up, _) = script("tools", "return 1");
        let _ = context.eval(Source::from_bytes(warm_up.as_bytes()));
        // The run's parser interns the program's names; frozen, the snapshot's tables stay
        // shared and those names go to fresh tables on the run's own heap.
        context.interner_mut().freeze();
        PREPARED.with_borrow_mut(|slot| *slot = Some((context, prelude)));
    }
    heap::start_run_heap();
}

/// Entry point: evaluate the program and drain its jobs.
#[no_mangle]
pub extern "C" fn cm_run() -> u32 {
    let boot_bytes = host::read_boot();
    let Some(boot) = codemode_wire::decode_boot(&boot_bytes) else {
        finish(exception("malformed boot frame", 0, 0));
        return STATUS_DONE;
    };
    let prepared = PREPARED.with_borrow_mut(Option::take).map(Ok);
    let (mut context, prelude) = match prepared.unwrap_or_else(new_context) {
        Ok(pair) => pair,
        Err(error) => {
            let message = format!("sandbox failed to start: {error}");
            finish(exception(&message, 0, 0));
            return STATUS_DONE;
        }
    };
    if let Err(error) = start(&boot, &mut context, &prelude) {
        fail_uncaught(error, &mut context, None);
        return STATUS_DONE;
    }
    let status = drain(&mut context, &prelude);
    CONTEXT.with_borrow_mut(|slot| *slot = Some((context, prelude)));
    status
}

/// Delivers one reply or timer of `len` bytes (read with `reply_read`), then drains jobs.
#[no_mangle]
pub extern "C" fn cm_deliver(len: u32) -> u32 {
    let bytes = host::read_reply(len);
    let Some(mut state) = CONTEXT.with_borrow_mut(Option::take) else {
        return STATUS_DONE;
    };
    let (context, hooks) = (&mut state.0, &state.1);
    let outcome = match codemode_wire::decode_delivery(&bytes) {
        Some(Delivery::Resolved { id, json }) => {
            let value = json_in::parse(json, context)
                .ok_or(js_string!("binding resolution must be lossless JSON"));
            calls::settle(id, value, context)
        }
        Some(Delivery::ResolvedString { id, text }) => {
            calls::settle(id, Ok(JsString::from(text).into()), context)
        }
        Some(Delivery::Rejected { id, message }) => {
            calls::settle(id, Err(JsString::from(message.as_ref())), context)
        }
        Some(Delivery::Timer { id }) => {
            if BOOK.with_borrow_mut(|book| book.timers_armed.remove(&id)) {
                hooks
                    .fire_timer
                    .call(&JsValue::undefined(), &[id.into()], context)
                    .map(drop)
            } else {
                Ok(())
            }
        }
        None => Ok(()),
    };
    if let Err(error) = outcome {
        fail_uncaught(error, context, Some(hooks));
    }
    let status = drain(context, hooks);
    CONTEXT.with_borrow_mut(|slot| *slot = Some(state));
    status
}

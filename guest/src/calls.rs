//! Binding functions and the calls they start, native end to end.
//!
//! A namespace member is a native function: it snapshots its argument into the outgoing
//! buffer, asks the host to start the call, and returns a pending promise whose resolving
//! functions wait here, keyed by call id, until `cm_deliver` settles them. Only a failure goes
//! back to the prelude, which builds the error (an injected error class when the namespace has
//! one). Doing this natively rather than in prelude JavaScript makes a call several times
//! cheaper: Boa in wasm pays about a microsecond for every interpreted operation.

use std::cell::RefCell;
use std::collections::BTreeMap;

use boa_engine::builtins::promise::ResolvingFunctions;
use boa_engine::object::builtins::{JsFunction, JsPromise};
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::{js_string, Context, JsError, JsResult, JsString, JsValue, NativeFunction};

use crate::{json_out, snapshot};
use codemode_guest_imports as host;

/// A call the host accepted and has not answered yet.
struct Pending {
    resolvers: ResolvingFunctions,
    name: JsString,
    /// The prelude's `{ ctor, member }` for namespaces with an error class, else undefined.
    error_class: JsValue,
    /// The prelude's `bindingError(errorClass, memberName, message, line, column)`.
    make_error: JsValue,
    /// Where the program made the call (line and column in the program, 0 when unknown): a
    /// rejection is placed there.
    site: (u32, u32),
}

#[derive(Default)]
struct Calls {
    next_id: u32,
    pending: BTreeMap<u32, Pending>,
}

thread_local! {
    static CALLS: RefCell<Calls> = RefCell::new(Calls::default());
}

/// Whether any call is still waiting for its reply.
pub fn any_in_flight() -> bool {
    CALLS.with_borrow(|calls| !calls.pending.is_empty())
}

/// The function a namespace exposes as `name`. `error_class` is the prelude's
/// `{ ctor, member }` for namespaces with an error class (else undefined) and `make_error` its
/// `bindingError`.
pub fn binding_function(
    global: &str,
    name: &str,
    error_class: JsValue,
    make_error: JsValue,
    context: &mut Context,
) -> JsFunction {
    FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_copy_closure_with_captures(
            call_binding,
            (
                codemode_wire::call_header(global, name),
                JsString::from(name),
                error_class,
                make_error,
            ),
        ),
    )
    .name(JsString::from(name))
    .length(1)
    .constructor(false)
    .build()
}

/// The call frame's header (namespace and member), the member's name, and the error makers.
type Captures = (Vec<u8>, JsString, JsValue, JsValue);

fn call_binding(
    _: &JsValue,
    args: &[JsValue],
    (header, name, error_class, make_error): &Captures,
    context: &mut Context,
) -> JsResult<JsValue> {
    let argument = args.first().cloned().unwrap_or_default();
    if !snapshot::write(&argument, context)? {
        let error = binding_error(
            make_error,
            error_class,
            name,
            js_string!("binding arguments must be lossless JSON"),
            (0, 0),
            context,
        )?;
        return Ok(JsPromise::reject(JsError::from_opaque(error), context)?.into());
    }
    // Ids strictly increase; the host refuses any other, so the (unreachable within any
    // budget) last id saturates rather than wrapping.
    let id = CALLS.with_borrow_mut(|calls| {
        calls.next_id = calls.next_id.saturating_add(1);
        calls.next_id
    });
    let frame = json_out::with_frame(|json| {
        let args = json.get(1..).unwrap_or_default();
        let mut frame = Vec::with_capacity(header.len() + args.len());
        frame.extend_from_slice(header);
        frame.extend_from_slice(args);
        frame
    });
    if !host::send_call(id, &frame) {
        let error = binding_error(
            make_error,
            error_class,
            name,
            js_string!("the host refused this call"),
            (0, 0),
            context,
        )?;
        return Ok(JsPromise::reject(JsError::from_opaque(error), context)?.into());
    }
    let site = call_site(context);
    let (promise, resolvers) = JsPromise::new_pending(context);
    CALLS.with_borrow_mut(|calls| {
        calls.pending.insert(
            id,
            Pending {
                resolvers,
                name: name.clone(),
                error_class: error_class.clone(),
                make_error: make_error.clone(),
                site,
            },
        )
    });
    Ok(promise.into())
}

/// The program's line and column of the call being made: its innermost frame in the program
/// (a native function has none of its own; the prelude's `fetch` calls on the program's behalf).
fn call_site(context: &Context) -> (u32, u32) {
    for frame in context.stack_trace() {
        let location = frame.executing_position();
        let in_program = matches!(
            &location.path,
            boa_engine::vm::SourcePath::Path(path) if path.as_os_str() == crate::PROGRAM_PATH
        );
        if in_program {
            return match location.position {
                Some(at) => (at.line_number(), at.column_number()),
                None => (0, 0),
            };
        }
    }
    (0, 0)
}

fn binding_error(
    make_error: &JsValue,
    error_class: &JsValue,
    name: &JsString,
    message: JsString,
    (line, column): (u32, u32),
    context: &mut Context,
) -> JsResult<JsValue> {
    let Some(make_error) = make_error.as_callable() else {
        return Ok(JsValue::from(message));
    };
    make_error.call(
        &JsValue::undefined(),
        &[
            error_class.clone(),
            name.clone().into(),
            message.into(),
            line.into(),
            column.into(),
        ],
        context,
    )
}

/// Settles call `id` with `outcome`: the reply's value, or the host's rejection message.
/// A reply for a call that is not pending (the host validates ids) is ignored.
pub fn settle(id: u32, outcome: Result<JsValue, JsString>, context: &mut Context) -> JsResult<()> {
    let Some(pending) = CALLS.with_borrow_mut(|calls| calls.pending.remove(&id)) else {
        return Ok(());
    };
    match outcome {
        Ok(value) => {
            pending
                .resolvers
                .resolve
                .call(&JsValue::undefined(), &[value], context)?;
        }
        Err(message) => {
            let error = binding_error(
                &pending.make_error,
                &pending.error_class,
                &pending.name,
                message,
                pending.site,
                context,
            )?;
            pending
                .resolvers
                .reject
                .call(&JsValue::undefined(), &[error], context)?;
        }
    }
    Ok(())
}

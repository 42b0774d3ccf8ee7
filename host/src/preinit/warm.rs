//! The guest's *warm* functions: the ones a typical run calls through its table, found once
//! while the guest is pre-initialised, so that the compiled module can have wasmtime keep
//! their function references together.
//!
//! wasmtime holds a 32-byte function reference for each function the table holds, in each
//! instance's context, and writes it the first time that instance calls the function through
//! the table. The guest's table holds ~1,500 functions (48 KB of references); a small run
//! calls a few dozen of them, spread over every page of those 48 KB, and each page it writes
//! stays the waiting instance's own. wasmtime numbers the references in the order the module
//! first names the functions: imports, references in table and global initialisers (the guest
//! has none), exports, then the table's elements. Exported ahead of the table
//! (`codemode_rewrite::meter`), the warm functions' references share a page or two.
//!
//! Which functions are warm is measured, not guessed: the pre-initialising instance runs a
//! module rewritten so that every indirect call through table 0 first tells the host the slot
//! it calls (`codemode_rewrite::noting`), and after the snapshot is taken it runs [`PROGRAM`] the way a run
//! does. The slots it called, mapped to functions through the module's element segments, are
//! the warm set. A function a program calls that the profile missed costs what it did before.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use codemode_rewrite::noting::{table_functions, NOTE_IMPORT};
use codemode_wire as wire;
use wasmtime::{Instance, Linker, Store};

use crate::store::RunState;

/// What the profile runs: the shapes nearly every program has (an object literal, a log line,
/// an awaited tool call and its JSON reply, a failed call caught, two calls at once, a template
/// string, an array method and a result to encode). No tools are behind its namespace: each
/// call is refused at once, and the profile answers the first with [`FIRST_REPLY`] instead.
/// The compiled module depends on this text: a change to it wants a new
/// `meter::instrument::VERSION`, so that cached modules are compiled again.
pub(crate) const PROGRAM: &str = r#"const point = { x: 1, y: 2 };
console.log("point", point);
const echoed = await tools.echo({ greeting: `hello ${point.x}` });
let failed;
try {
  await tools.sleep({ ms: 1 });
} catch (e) {
  failed = e instanceof ToolCallError ? e.toolName : String(e);
}
const settled = await Promise.allSettled([tools.sleep({ ms: 1 }), tools.sleep({ ms: 1 })]);
return { echoed, failed, settled: settled.length, doubled: [1, 2, 3].map((n) => n * 2) };"#;

/// [`PROGRAM`] for the Python guest: the same shapes, in Python.
pub(crate) const PYTHON_PROGRAM: &str = r#"import asyncio
point = {"x": 1, "y": 2}
print("point", point)
echoed = await tools.echo({"greeting": f"hello {point['x']}"})
try:
    await tools.sleep({"ms": 1})
    failed = None
except ToolCallError as e:
    failed = e.tool_name
async def settle(call):
    try:
        return await call
    except ToolCallError as e:
        return str(e)
settled = await asyncio.gather(settle(tools.sleep({"ms": 1})), settle(tools.sleep({"ms": 1})))
{"echoed": echoed, "failed": failed, "settled": len(settled), "doubled": [n * 2 for n in [1, 2, 3]]}"#;

/// The reply to the profile's first call, as a tool's result would come.
const FIRST_REPLY: &[u8] = br#"{"greeting":"hello 1","items":[1,2.5,"three",true,null]}"#;

/// Most deliveries the profile hands the guest: it makes four calls.
const MAX_DELIVERIES: usize = 16;

/// The table slots a noting instance has called through, shared with its import.
#[derive(Clone, Default)]
pub(super) struct Notes(Arc<Mutex<BTreeSet<u32>>>);

impl Notes {
    /// Defines the noting module's import in `linker`.
    pub(super) fn define(&self, linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
        let notes = self.0.clone();
        let (module, name) = NOTE_IMPORT;
        linker.func_wrap(module, name, move |slot: u32| {
            // A poisoned lock only means a note was lost: the profile is a hint.
            if let Ok(mut slots) = notes.lock() {
                slots.insert(slot);
            }
        })?;
        Ok(())
    }

    fn take(&self) -> BTreeSet<u32> {
        self.0
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

/// Runs [`PROGRAM`] in the pre-initialised instance (after its snapshot was taken: what the
/// run leaves behind is thrown away with the instance) and returns the functions it called
/// through the table, in table order, as indices of `snapshot` (the module the noting one was
/// made from, whose functions and table it shares). Any failure ends the profile with what it
/// has noted.
pub(super) fn profile(
    store: &mut Store<RunState>,
    instance: Instance,
    notes: &Notes,
    snapshot: &[u8],
    program: &str,
) -> Vec<u32> {
    // What `cm_init` called is done once, not by a run.
    notes.take();
    let namespace = wire::Namespace {
        global: "tools",
        names: vec!["echo", "sleep"],
        error_class: Some(("ToolCallError", "toolName")),
    };
    store.data_mut().boot = wire::Boot {
        program,
        namespaces: vec![namespace],
        web_fetch: None,
    }
    .encode();
    let run = instance.get_typed_func::<(), u32>(&mut *store, "cm_run");
    let deliver = instance.get_typed_func::<u32, u32>(&mut *store, "cm_deliver");
    if let (Ok(run), Ok(deliver)) = (run, deliver) {
        let mut status = run.call(&mut *store, ());
        for delivered in 0..MAX_DELIVERIES {
            if status.as_ref().ok() != Some(&wire::STATUS_WAITING) {
                break;
            }
            let Some(mut frame) = store.data_mut().next_ready() else {
                break;
            };
            if delivered == 0 {
                if let Some(wire::Delivery::Rejected { id, .. }) = wire::decode_delivery(&frame) {
                    let json = FIRST_REPLY;
                    frame = wire::Delivery::Resolved { id, json }.encode();
                }
            }
            let len = frame.len() as u32;
            store.data_mut().delivery = frame;
            status = deliver.call(&mut *store, len);
        }
    }
    let slots = notes.take();
    let table = table_functions(snapshot).unwrap_or_default();
    let mut warm = Vec::new();
    for &function in slots.iter().filter_map(|slot| table.get(slot)) {
        // A function in several slots is exported once.
        if !warm.contains(&function) {
            warm.push(function);
        }
    }
    if warm.is_empty() {
        tracing::debug!("the guest's profile found no warm functions");
    }
    warm
}

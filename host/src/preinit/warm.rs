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
//! (`meter::instrument`), the warm functions' references share a page or two.
//!
//! Which functions are warm is measured, not guessed: the pre-initialising instance runs a
//! module rewritten so that every indirect call through table 0 first tells the host the slot
//! it calls ([`noting`]), and after the snapshot is taken it runs [`PROGRAM`] the way a run
//! does. The slots it called, mapped to functions through the module's element segments, are
//! the warm set. A function a program calls that the profile missed costs what it did before.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use codemode_wire as wire;
use wasm_encoder::reencode::{self, Reencode};
use wasm_encoder::{EntityType, Instruction, ValType};
use wasmparser::{FunctionBody, Operator, Parser};
use wasmtime::{Instance, Linker, Store};

use crate::run::RunState;
use crate::wasm_rewrite::Signatures;

/// The import a noting module calls with the table slot of each indirect call.
const NOTE_IMPORT: (&str, &str) = ("codemode", "note_indirect");

/// What the profile runs: the shapes nearly every program has (an object literal, a log line,
/// an awaited tool call and its JSON reply, a failed call caught, two calls at once, a template
/// string, an array method and a result to encode). No tools are behind its namespace: each
/// call is refused at once, and the profile answers the first with [`FIRST_REPLY`] instead.
/// The compiled module depends on this text: a change to it wants a new
/// `meter::instrument::VERSION`, so that cached modules are compiled again.
const PROGRAM: &str = r#"const point = { x: 1, y: 2 };
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
) -> Vec<u32> {
    // What `cm_init` called is done once, not by a run.
    notes.take();
    let namespace = wire::Namespace {
        global: "tools",
        names: vec!["echo", "sleep"],
        error_class: Some(("ToolCallError", "toolName")),
    };
    store.data_mut().boot = wire::Boot {
        program: PROGRAM,
        namespaces: vec![namespace],
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

/// Which function each slot of table 0 holds after instantiation: the active element segments
/// with a constant offset (the only kind a linker writes), later ones over earlier ones.
fn table_functions(wasm: &[u8]) -> Result<HashMap<u32, u32>, wasmparser::BinaryReaderError> {
    let mut table = HashMap::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let wasmparser::Payload::ElementSection(reader) = payload? else {
            continue;
        };
        for element in reader {
            let element = element?;
            let wasmparser::ElementKind::Active {
                table_index,
                offset_expr,
            } = element.kind
            else {
                continue;
            };
            if table_index.unwrap_or(0) != 0 {
                continue;
            }
            // Only an offset that is one constant: a computed one is not followed.
            let mut offset = offset_expr.get_operators_reader();
            let (Operator::I32Const { value }, Operator::End) = (offset.read()?, offset.read()?)
            else {
                continue;
            };
            let wasmparser::ElementItems::Functions(functions) = element.items else {
                continue;
            };
            for (i, func) in functions.into_iter().enumerate() {
                let slot = (value as u32).wrapping_add(i as u32);
                table.insert(slot, func?);
            }
        }
    }
    Ok(table)
}

/// `wasm` with a call to [`NOTE_IMPORT`] before each indirect call through table 0, passing
/// the slot called. The import comes after the module's imported functions, so defined
/// functions move up by one; the table's slots do not move.
pub(super) fn noting(wasm: &[u8]) -> Result<Vec<u8>, String> {
    let error = |e: wasmparser::BinaryReaderError| format!("reading the module: {e}");
    let mut rewrite = Noting::default();
    let mut has_imports = false;
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload.map_err(error)?;
        has_imports |= matches!(payload, wasmparser::Payload::ImportSection(_));
        rewrite.signatures.read(&payload).map_err(error)?;
    }
    if rewrite.signatures.type_params.is_empty() || !has_imports {
        return Err("the module has no type or import section to extend".into());
    }
    let mut module = wasm_encoder::Module::new();
    rewrite
        .parse_core_module(&mut module, Parser::new(0), wasm)
        .map_err(|e| format!("noting indirect calls: {e}"))?;
    Ok(module.finish())
}

#[derive(Default)]
struct Noting {
    signatures: Signatures,
    /// Which defined function's body comes next.
    body: usize,
}

impl Reencode for Noting {
    type Error = String;

    fn function_index(&mut self, func: u32) -> Result<u32, reencode::Error<String>> {
        Ok(self.signatures.moved(func))
    }

    fn parse_type_section(
        &mut self,
        types: &mut wasm_encoder::TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), reencode::Error<String>> {
        reencode::utils::parse_type_section(self, types, section)?;
        types.ty().function([ValType::I32], []);
        Ok(())
    }

    fn parse_import_section(
        &mut self,
        imports: &mut wasm_encoder::ImportSection,
        section: wasmparser::ImportSectionReader<'_>,
    ) -> Result<(), reencode::Error<String>> {
        reencode::utils::parse_import_section(self, imports, section)?;
        let (module, name) = NOTE_IMPORT;
        let ty = EntityType::Function(self.signatures.added_type());
        imports.import(module, name, ty);
        Ok(())
    }

    fn parse_function_body(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        func: FunctionBody<'_>,
    ) -> Result<(), reencode::Error<String>> {
        let index = self.body;
        self.body += 1;
        let locals = self.signatures.locals_with(index, &func, &[ValType::I32])?;
        let slot_local = locals.first_added;
        let note = self.signatures.added_function();
        let mut f = wasm_encoder::Function::new(locals.all);
        let mut reader = func.get_operators_reader()?;
        while !reader.eof() {
            let operator = reader.read()?;
            if let Operator::CallIndirect { table_index: 0, .. }
            | Operator::ReturnCallIndirect { table_index: 0, .. } = operator
            {
                f.instruction(&Instruction::LocalTee(slot_local))
                    .instruction(&Instruction::Call(note))
                    .instruction(&Instruction::LocalGet(slot_local));
            }
            f.instruction(&self.instruction(operator)?);
        }
        code.function(&f);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module whose `run` calls slot 1 of its table (function `$b`) through `call_indirect`.
    const MODULE: &str = r#"(module
        (import "env" "f" (func $f))
        (type $t (func (result i32)))
        (table 4 funcref)
        (elem (i32.const 1) $b $a)
        (func $a (result i32) i32.const 7)
        (func $b (result i32) i32.const 9)
        (func (export "run") (param $slot i32) (result i32)
            local.get $slot
            call_indirect (type $t)))"#;

    #[test]
    fn the_table_maps_slots_to_functions() {
        let wasm = wat::parse_str(MODULE).unwrap();
        let table = table_functions(&wasm).unwrap();
        assert_eq!(table.get(&1), Some(&2));
        assert_eq!(table.get(&2), Some(&1));
        assert_eq!(table.get(&0), None);
    }

    #[test]
    fn a_noting_module_reports_each_slot_it_calls_and_still_calls_it() {
        let wasm = wat::parse_str(MODULE).unwrap();
        let noted = noting(&wasm).unwrap();
        let engine = wasmtime::Engine::default();
        let module = wasmtime::Module::new(&engine, &noted).unwrap();
        let mut store = wasmtime::Store::new(&engine, ());
        let mut linker = wasmtime::Linker::new(&engine);
        let slots = Arc::new(Mutex::new(Vec::new()));
        let seen = slots.clone();
        linker.func_wrap("env", "f", || {}).unwrap();
        linker
            .func_wrap(NOTE_IMPORT.0, NOTE_IMPORT.1, move |slot: u32| {
                seen.lock().unwrap().push(slot)
            })
            .unwrap();
        let instance = linker.instantiate(&mut store, &module).unwrap();
        let run = instance
            .get_typed_func::<i32, i32>(&mut store, "run")
            .unwrap();
        assert_eq!(run.call(&mut store, 1).unwrap(), 9);
        assert_eq!(run.call(&mut store, 2).unwrap(), 7);
        assert_eq!(*slots.lock().unwrap(), vec![1, 2]);
    }

    #[test]
    fn a_module_without_imports_is_refused() {
        let wasm = wat::parse_str("(module (func))").unwrap();
        assert!(noting(&wasm).is_err());
        assert!(noting(b"\0asm junk").is_err());
    }
}

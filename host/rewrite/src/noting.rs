//! The warm profile's rewrite: every indirect call through table 0 first tells the host which
//! slot it calls, so that the pre-initialising instance can learn which functions a typical
//! run reaches through the table (the host's `preinit::warm` runs the profile and keeps the
//! answer).

use std::collections::HashMap;

use wasm_encoder::reencode::{self, Reencode};
use wasm_encoder::{EntityType, Instruction, ValType};
use wasmparser::{FunctionBody, Operator, Parser};

use crate::signatures::Signatures;

/// The import a noting module calls with the table slot of each indirect call.
pub const NOTE_IMPORT: (&str, &str) = ("codemode", "note_indirect");

/// Which function each slot of table 0 holds after instantiation: the active element segments
/// with a constant offset (the only kind a linker writes), later ones over earlier ones.
pub fn table_functions(wasm: &[u8]) -> Result<HashMap<u32, u32>, wasmparser::BinaryReaderError> {
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
pub fn noting(wasm: &[u8]) -> Result<Vec<u8>, String> {
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
    use std::sync::{Arc, Mutex};

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

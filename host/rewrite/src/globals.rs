//! The guest's mutable globals, made reachable from the host.
//!
//! A paused run is its linear memory plus its mutable globals (the stack pointer, and whatever
//! else the toolchain defines). wasmtime reads and writes only exported globals, so the
//! pre-initialisation pipeline ends by exporting every mutable global the module defines as
//! `cm_global_<index>`; nothing else in the module changes.

use wasm_encoder::{ExportKind, ExportSection, RawSection};
use wasmparser::{ExternalKind, Parser, Payload, TypeRef};

/// The prefix of the exports this pass adds.
pub const EXPORT_PREFIX: &str = "cm_global_";

fn kind(kind: ExternalKind) -> ExportKind {
    match kind {
        ExternalKind::Func | ExternalKind::FuncExact => ExportKind::Func,
        ExternalKind::Table => ExportKind::Table,
        ExternalKind::Memory => ExportKind::Memory,
        ExternalKind::Global => ExportKind::Global,
        ExternalKind::Tag => ExportKind::Tag,
    }
}

/// `wasm` with every defined mutable global also exported as `cm_global_<index>`.
pub fn export_mutable_globals(wasm: &[u8]) -> Result<Vec<u8>, String> {
    let error = |e: wasmparser::BinaryReaderError| format!("reading the guest module: {e}");
    let mut imported_globals = 0u32;
    let mut mutable = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.map_err(error)? {
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    if matches!(import.map_err(error)?.ty, TypeRef::Global(_)) {
                        imported_globals += 1;
                    }
                }
            }
            Payload::GlobalSection(reader) => {
                for (i, global) in reader.into_iter().enumerate() {
                    if global.map_err(error)?.ty.mutable {
                        mutable.push(imported_globals + i as u32);
                    }
                }
            }
            _ => {}
        }
    }

    let mut module = wasm_encoder::Module::new();
    let mut exported = false;
    let extra = |exports: &mut ExportSection| {
        for index in &mutable {
            exports.export(
                &format!("{EXPORT_PREFIX}{index}"),
                ExportKind::Global,
                *index,
            );
        }
    };
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload.map_err(error)?;
        if let Payload::ExportSection(reader) = &payload {
            let mut exports = ExportSection::new();
            for export in reader.clone() {
                let export = export.map_err(error)?;
                if export.name.starts_with(EXPORT_PREFIX) {
                    return Err(format!("the guest already exports {}", export.name));
                }
                exports.export(export.name, kind(export.kind), export.index);
            }
            extra(&mut exports);
            module.section(&exports);
            exported = true;
            continue;
        }
        let Some((id, range)) = payload.as_section() else {
            continue;
        };
        // Sections come in a fixed order; one without exports gets its own before the
        // first section that must follow it (start, element, data count, code, data).
        if !exported && matches!(id, 8..=12) {
            let mut exports = ExportSection::new();
            extra(&mut exports);
            module.section(&exports);
            exported = true;
        }
        module.section(&RawSection {
            id,
            data: &wasm[range],
        });
    }
    if !exported && !mutable.is_empty() {
        // Nothing that must follow the exports came: they end the module.
        let mut exports = ExportSection::new();
        extra(&mut exports);
        module.section(&exports);
    }
    Ok(module.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exports(wasm: &[u8]) -> Vec<String> {
        let mut names = Vec::new();
        for payload in Parser::new(0).parse_all(wasm) {
            if let Ok(Payload::ExportSection(reader)) = payload {
                names.extend(
                    reader
                        .into_iter()
                        .filter_map(|e| e.ok())
                        .map(|e| e.name.to_owned()),
                );
            }
        }
        names
    }

    #[test]
    fn a_module_keeps_its_exports_and_gains_one_per_mutable_global() {
        let wasm = wat::parse_str(
            r#"(module
                (import "env" "g" (global (mut i32)))
                (global $sp (mut i32) (i32.const 1024))
                (global $k i32 (i32.const 7))
                (global $other (mut i64) (i64.const 0))
                (func (export "run")))"#,
        )
        .unwrap();
        let rewritten = export_mutable_globals(&wasm).expect("rewrites");
        let before = exports(&wasm);
        let after = exports(&rewritten);
        assert!(after.starts_with(&before));
        // Global 0 is imported and 2 is immutable: only the module's own mutable ones.
        let added: Vec<_> = after[before.len()..].to_vec();
        assert_eq!(
            added,
            [format!("{EXPORT_PREFIX}1"), format!("{EXPORT_PREFIX}3")]
        );
        wasmparser::Validator::new()
            .validate_all(&rewritten)
            .expect("still a valid module");
        assert!(
            export_mutable_globals(&rewritten).is_err(),
            "never applied twice"
        );
    }

    #[test]
    fn what_is_not_a_module_is_refused() {
        assert!(export_mutable_globals(b"\0asm junk").is_err());
    }
}

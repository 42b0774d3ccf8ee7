//! What the host's rewrites of a module share (the meter, [`crate::meter`], and the warm
//! profile's noting, [`crate::noting`]): each adds one imported function after the module's own,
//! so every defined function moves up by one, and gives some bodies locals of its own.

use wasm_encoder::reencode::{self, Reencode, RoundtripReencoder};
use wasm_encoder::ValType;
use wasmparser::{FunctionBody, Payload, TypeRef};

/// The function signatures of a module, read from its sections before the code.
#[derive(Default)]
pub struct Signatures {
    /// Parameter count of each type in the type section (all function types: the reader
    /// refuses others).
    pub type_params: Vec<u32>,
    /// The type index of each defined function.
    pub function_types: Vec<u32>,
    /// How many functions the module imports (the ones before its defined functions).
    pub imported_functions: u32,
}

impl Signatures {
    /// Takes in what `payload` declares: types, imported functions and defined functions;
    /// other payloads add nothing.
    pub fn read(&mut self, payload: &Payload<'_>) -> wasmparser::Result<()> {
        match payload {
            Payload::TypeSection(reader) => {
                for ty in reader.clone().into_iter_err_on_gc_types() {
                    self.type_params.push(ty?.params().len() as u32);
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.clone().into_imports() {
                    if let TypeRef::Func(_) | TypeRef::FuncExact(_) = import?.ty {
                        self.imported_functions += 1;
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                for ty in reader.clone() {
                    self.function_types.push(ty?);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// How many functions the module has, imported and defined.
    pub fn functions(&self) -> usize {
        self.imported_functions as usize + self.function_types.len()
    }

    /// The index of the added import's type: after every type the module has.
    pub fn added_type(&self) -> u32 {
        self.type_params.len() as u32
    }

    /// The index of the added import: after every imported function.
    pub fn added_function(&self) -> u32 {
        self.imported_functions
    }

    /// Where function `func` is in the rewritten module: defined functions move up by one.
    pub fn moved(&self, func: u32) -> u32 {
        if func >= self.imported_functions {
            func + 1
        } else {
            func
        }
    }

    /// The parameter count of the `index`th defined function.
    fn params(&self, index: usize) -> Option<u32> {
        let ty = *self.function_types.get(index)?;
        self.type_params.get(ty as usize).copied()
    }

    /// The locals of `func`, the `index`th defined function, with `added` after them. A
    /// rewrite that only appends types keeps every local's type as it is.
    pub fn locals_with(
        &self,
        index: usize,
        func: &FunctionBody<'_>,
        added: &[ValType],
    ) -> Result<Locals, reencode::Error<String>> {
        let mut first_added = self
            .params(index)
            .ok_or_else(|| reencode::Error::UserError("a body without a function".into()))?;
        let mut locals = Vec::new();
        for pair in func.get_locals_reader()? {
            let (count, ty) = pair?;
            first_added += count;
            let ty = RoundtripReencoder
                .val_type(ty)
                .map_err(|e| reencode::Error::UserError(e.to_string()))?;
            locals.push((count, ty));
        }
        locals.extend(added.iter().map(|&ty| (1, ty)));
        Ok(Locals {
            all: locals,
            first_added,
        })
    }
}

/// A rewritten body's locals: the function's own, then the ones the rewrite added.
pub struct Locals {
    /// Every local, as `wasm_encoder::Function::new` takes them.
    pub all: Vec<(u32, ValType)>,
    /// The index of the first added local.
    pub first_added: u32,
}

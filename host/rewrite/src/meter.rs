//! Compiles the compute meter into a module: a rewrite of its wasm before wasmtime compiles it.
//!
//! Every function entry and every loop header is a *check point*. The code between one check
//! point and the next that can run without passing another (a function's body outside its
//! loops, or one loop's body outside the loops nested in it) is a *region*, and a pass through
//! it costs a fixed price plus the operators of its costliest path (1 each, 0 for the
//! structural ones; an `if`'s arms and a branch's targets are alternatives, see
//! `path_costs`), as a module's [`Pricing`] says. At each check point that cost is subtracted
//! from a mutable `i64` global.
//! Loop headers, and the entries of the functions `plan` picks, also test the global and call
//! the host's [`EXHAUSTED_IMPORT`] once it is below zero; they are placed so that no unbounded
//! work can pass without a test. A region's cost does not depend on which of its branches run,
//! so the meter charges what a pass could run rather than what it ran, and two runs of the
//! same code charge the same. Bulk operations (`memory.copy`,
//! `memory.fill`, `memory.init`, `table.copy`, `table.fill`, `table.init`) are charged their
//! length as well, when they run.
//!
//! wasmtime's fuel counts each block as it runs, keeps the count in a register that every call
//! saves and reloads, and tests it at each function entry and loop header; this meter does one
//! subtraction in memory at each check point and tests only some of them, which is about a
//! fifth of the time of a call-heavy program (see `BENCHMARKS.md`).

use wasm_encoder::reencode::{self, Reencode};
use wasm_encoder::{
    BlockType, ConstExpr, EntityType, ExportKind, GlobalType, Instruction, SectionId, ValType,
};
use wasmparser::{ExternalKind, FunctionBody, Operator, Parser, TypeRef};

use crate::signatures::Signatures;

/// The module and name of the import a metered module calls when its global goes negative.
pub const EXHAUSTED_IMPORT: (&str, &str) = ("codemode", "fuel_exhausted");

/// Which rewrite a compiled module carries, its warm exports included (they follow the
/// profile program in the host's `preinit::warm`): part of its cache key, so that a module compiled by an
/// earlier meter or profile is compiled again.
pub const VERSION: u32 = 5;

/// The export under which a metered module's fuel global is reachable from the host.
pub const FUEL_EXPORT: &str = "codemode_fuel";

/// The prefix of the exports that put the warm functions' references first.
const WARM_EXPORT: &str = "codemode_warm_";

/// `wasm` with the compute meter compiled in, or why it could not be (an invalid module, or
/// one that already has the meter's exports). The functions in `warm` (indices of `wasm`) are
/// exported ahead of the table, so that wasmtime keeps their references in each instance
/// together (see the host's `preinit::warm`); the list is a hint, and an index the module lacks is
/// skipped. The meter does not depend on them.
pub fn instrument(wasm: &[u8], warm: &[u32]) -> Result<Vec<u8>, String> {
    instrument_priced(wasm, warm, Pricing::BOA)
}

/// What a pass through a check point costs: `(per_pass + the operators of its region's
/// costliest path) / divisor`, rounded up (bulk operations still pay a unit per byte).
///
/// Time follows passes as much as operators: a pass through an interpreter's arithmetic runs
/// cheap operators, one through a parser's or an allocator's fewer and costlier ones (memory
/// beyond the cache, branches that miss), and each interpreter has its own mix. Each guest's
/// pricing is fitted to its benchmark workloads and a busy loop (`codemode bench --json`,
/// with each workload's fuel at two prices per pass) so that they burn about the same fuel per
/// millisecond, in either guest, and one `FUEL_PER_MS` means milliseconds for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pricing {
    /// Operators' worth each pass costs besides its own.
    pub per_pass: u64,
    /// What the sum is divided by.
    pub divisor: u64,
}

impl Pricing {
    /// Boa's: its workloads ran 28.8 to 53.9 million operators and 0.26 to 0.43 million passes
    /// per millisecond; priced so, they (and `for(;;){}`) burn within 1.38 times of one
    /// another's fuel per millisecond (operators alone: 1.9 times).
    pub const BOA: Pricing = Pricing {
        per_pass: 110,
        divisor: 1,
    };

    /// Monty's: larger regions, whose costliest paths its dispatch seldom runs whole (41 to
    /// 113 million operators per millisecond, 0.16 to 0.25 million passes); priced so, its
    /// workloads burn within 1.27 times of one another and about what Boa's do.
    pub const MONTY: Pricing = Pricing {
        per_pass: 1850,
        divisor: 6,
    };
}

/// [`instrument`] with `pricing`.
pub fn instrument_priced(wasm: &[u8], warm: &[u32], pricing: Pricing) -> Result<Vec<u8>, String> {
    let layout = Layout::read(wasm, pricing)?;
    let functions = layout.signatures.functions();
    let warm = warm.iter().copied().filter(|&f| (f as usize) < functions);
    let mut meter = Metering {
        layout,
        warm: warm.collect(),
        body: 0,
        added: Vec::new(),
    };
    let mut module = wasm_encoder::Module::new();
    meter
        .parse_core_module(&mut module, Parser::new(0), wasm)
        .map_err(|e| format!("metering the module: {e}"))?;
    Ok(module.finish())
}

/// Why a module with 64-bit memories or tables is refused: the meter charges bulk operations by
/// a 32-bit length.
const WIDE: &str = "metering the module: 64-bit memories and tables are not supported";

/// Adds the functions a constant expression takes a reference to (and so a table or a
/// reference may call) to `functions`.
fn referenced_in(
    expression: wasmparser::ConstExpr<'_>,
    functions: &mut std::collections::HashSet<u32>,
) -> wasmparser::Result<()> {
    let mut reader = expression.get_operators_reader();
    while !reader.eof() {
        if let Operator::RefFunc { function_index } = reader.read()? {
            functions.insert(function_index);
        }
    }
    Ok(())
}

/// What the rewrite needs to know about the module before it reaches the code.
struct Layout {
    signatures: Signatures,
    globals: u32,
    /// How each defined function is metered (see [`plan`]).
    plans: Vec<Plan>,
}

impl Layout {
    fn read(wasm: &[u8], pricing: Pricing) -> Result<Self, String> {
        let error = |e: wasmparser::BinaryReaderError| format!("reading the module: {e}");
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::default())
            .validate_all(wasm)
            .map_err(error)?;
        let mut layout = Layout {
            signatures: Signatures::default(),
            globals: 0,
            plans: Vec::new(),
        };
        // Functions the host or a table can call: they must pay for themselves.
        let mut entered_from_outside = std::collections::HashSet::new();
        let mut shapes = Vec::new();
        for payload in Parser::new(0).parse_all(wasm) {
            let payload = payload.map_err(error)?;
            layout.signatures.read(&payload).map_err(error)?;
            match payload {
                wasmparser::Payload::ImportSection(reader) => {
                    for import in reader.into_imports() {
                        match import.map_err(error)?.ty {
                            TypeRef::Global(_) => layout.globals += 1,
                            TypeRef::Memory(memory) if memory.memory64 => return Err(WIDE.into()),
                            TypeRef::Table(table) if table.table64 => return Err(WIDE.into()),
                            _ => {}
                        }
                    }
                }
                wasmparser::Payload::MemorySection(reader) => {
                    for memory in reader {
                        if memory.map_err(error)?.memory64 {
                            return Err(WIDE.into());
                        }
                    }
                }
                wasmparser::Payload::TableSection(reader) => {
                    for table in reader {
                        let table = table.map_err(error)?;
                        if table.ty.table64 {
                            return Err(WIDE.into());
                        }
                        if let wasmparser::TableInit::Expr(init) = table.init {
                            referenced_in(init, &mut entered_from_outside).map_err(error)?;
                        }
                    }
                }
                wasmparser::Payload::GlobalSection(reader) => {
                    layout.globals += reader.count();
                    for global in reader {
                        let init = global.map_err(error)?.init_expr;
                        referenced_in(init, &mut entered_from_outside).map_err(error)?;
                    }
                }
                wasmparser::Payload::ExportSection(reader) => {
                    for export in reader {
                        let export = export.map_err(error)?;
                        if export.name == FUEL_EXPORT || export.name.starts_with(WARM_EXPORT) {
                            return Err(format!("the module already exports `{}`", export.name));
                        }
                        if matches!(export.kind, ExternalKind::Func | ExternalKind::FuncExact) {
                            entered_from_outside.insert(export.index);
                        }
                    }
                }
                wasmparser::Payload::StartSection { func, .. } => {
                    entered_from_outside.insert(func);
                }
                wasmparser::Payload::ElementSection(reader) => {
                    for element in reader {
                        match element.map_err(error)?.items {
                            wasmparser::ElementItems::Functions(functions) => {
                                for func in functions {
                                    entered_from_outside.insert(func.map_err(error)?);
                                }
                            }
                            wasmparser::ElementItems::Expressions(_, expressions) => {
                                for expression in expressions {
                                    let expression = expression.map_err(error)?;
                                    referenced_in(expression, &mut entered_from_outside)
                                        .map_err(error)?;
                                }
                            }
                        }
                    }
                }
                wasmparser::Payload::CodeSectionEntry(body) => {
                    let shape = Shape::read(&body).map_err(error)?;
                    entered_from_outside.extend(shape.referenced.iter().copied());
                    shapes.push(shape);
                }
                _ => {}
            }
        }
        let imported_functions = layout.signatures.imported_functions;
        layout.plans = plan(&shapes, imported_functions, &entered_from_outside, pricing);
        Ok(layout)
    }

    /// The index of the added global: after every global the module has.
    fn fuel_global(&self) -> u32 {
        self.globals
    }
}

struct Metering {
    layout: Layout,
    /// Functions to export ahead of the table, by their index in the module read.
    warm: Vec<u32>,
    /// Which defined function's body comes next.
    body: usize,
    /// The sections the meter's entries have been added to.
    added: Vec<SectionId>,
}

/// The sections the meter adds an entry to, in the order a module holds them.
const EXTENDED: [SectionId; 4] = [
    SectionId::Type,
    SectionId::Import,
    SectionId::Global,
    SectionId::Export,
];

/// Where a section goes in a module (`SectionId`'s numbers are not in that order).
fn rank(id: SectionId) -> u8 {
    match id {
        SectionId::Custom => 0,
        SectionId::Type => 1,
        SectionId::Import => 2,
        SectionId::Function => 3,
        SectionId::Table => 4,
        SectionId::Memory => 5,
        SectionId::Tag => 6,
        SectionId::Global => 7,
        SectionId::Export => 8,
        SectionId::Start => 9,
        SectionId::Element => 10,
        SectionId::DataCount => 11,
        SectionId::Code => 12,
        SectionId::Data => 13,
    }
}

impl Reencode for Metering {
    type Error = String;

    fn function_index(&mut self, func: u32) -> Result<u32, reencode::Error<String>> {
        Ok(self.layout.signatures.moved(func))
    }

    fn parse_type_section(
        &mut self,
        types: &mut wasm_encoder::TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), reencode::Error<String>> {
        reencode::utils::parse_type_section(self, types, section)?;
        self.extend_types(types);
        Ok(())
    }

    fn parse_import_section(
        &mut self,
        imports: &mut wasm_encoder::ImportSection,
        section: wasmparser::ImportSectionReader<'_>,
    ) -> Result<(), reencode::Error<String>> {
        reencode::utils::parse_import_section(self, imports, section)?;
        self.extend_imports(imports);
        Ok(())
    }

    fn parse_global_section(
        &mut self,
        globals: &mut wasm_encoder::GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> Result<(), reencode::Error<String>> {
        reencode::utils::parse_global_section(self, globals, section)?;
        self.extend_globals(globals);
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut wasm_encoder::ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), reencode::Error<String>> {
        reencode::utils::parse_export_section(self, exports, section)?;
        self.extend_exports(exports);
        Ok(())
    }

    /// Adds, in their place, the sections the meter needs and the module lacks.
    fn intersperse_section_hook(
        &mut self,
        module: &mut wasm_encoder::Module,
        _after: Option<SectionId>,
        before: Option<SectionId>,
    ) -> Result<(), reencode::Error<String>> {
        for id in EXTENDED {
            let due = before.is_none_or(|next| rank(next) > rank(id));
            if !due || self.added.contains(&id) {
                continue;
            }
            match id {
                SectionId::Type => {
                    let mut types = wasm_encoder::TypeSection::new();
                    self.extend_types(&mut types);
                    module.section(&types);
                }
                SectionId::Import => {
                    let mut imports = wasm_encoder::ImportSection::new();
                    self.extend_imports(&mut imports);
                    module.section(&imports);
                }
                SectionId::Global => {
                    let mut globals = wasm_encoder::GlobalSection::new();
                    self.extend_globals(&mut globals);
                    module.section(&globals);
                }
                _ => {
                    let mut exports = wasm_encoder::ExportSection::new();
                    self.extend_exports(&mut exports);
                    module.section(&exports);
                }
            }
        }
        Ok(())
    }

    fn parse_function_body(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        func: FunctionBody<'_>,
    ) -> Result<(), reencode::Error<String>> {
        let index = self.body;
        self.body += 1;
        // Each plan is read once, by its function's body.
        let plan = self
            .layout
            .plans
            .get_mut(index)
            .map(std::mem::take)
            .unwrap_or_default();
        let costs = plan.charges;
        let metered = !costs.is_empty();
        // Two scratch locals after the module's own: the new count (i64) and a bulk length (i32).
        let scratch_types = [ValType::I64, ValType::I32];
        let locals = self
            .layout
            .signatures
            .locals_with(index, &func, &scratch_types)?;
        let scratch = Scratch {
            count: locals.first_added,
            length: locals.first_added + 1,
        };
        let mut f = wasm_encoder::Function::new(locals.all);
        let mut costs = costs.into_iter();
        if metered {
            let cost = costs.next().unwrap_or(0);
            if plan.entry_checked {
                self.charge(&mut f, &scratch, cost);
            } else {
                self.charge_unchecked(&mut f, cost);
            }
        }
        let mut reader = func.get_operators_reader()?;
        while !reader.eof() {
            let operator = reader.read()?;
            let length_charged = matches!(
                operator,
                Operator::MemoryCopy { .. }
                    | Operator::MemoryFill { .. }
                    | Operator::MemoryInit { .. }
                    | Operator::TableCopy { .. }
                    | Operator::TableFill { .. }
                    | Operator::TableInit { .. }
            );
            if length_charged {
                self.charge_length(&mut f, &scratch);
            }
            let is_loop = matches!(operator, Operator::Loop { .. });
            f.instruction(&self.instruction(operator)?);
            if is_loop && metered {
                self.charge(&mut f, &scratch, costs.next().unwrap_or(0));
            }
        }
        code.function(&f);
        Ok(())
    }
}

struct Scratch {
    count: u32,
    length: u32,
}

impl Metering {
    fn extend_types(&mut self, types: &mut wasm_encoder::TypeSection) {
        types.ty().function([], []);
        self.added.push(SectionId::Type);
    }

    fn extend_imports(&mut self, imports: &mut wasm_encoder::ImportSection) {
        let (module, name) = EXHAUSTED_IMPORT;
        let ty = EntityType::Function(self.layout.signatures.added_type());
        imports.import(module, name, ty);
        self.added.push(SectionId::Import);
    }

    fn extend_globals(&mut self, globals: &mut wasm_encoder::GlobalSection) {
        let ty = GlobalType {
            val_type: ValType::I64,
            mutable: true,
            shared: false,
        };
        globals.global(ty, &ConstExpr::i64_const(0));
        self.added.push(SectionId::Global);
    }

    fn extend_exports(&mut self, exports: &mut wasm_encoder::ExportSection) {
        exports.export(FUEL_EXPORT, ExportKind::Global, self.layout.fuel_global());
        for (i, &func) in self.warm.iter().enumerate() {
            let func = self.layout.signatures.moved(func);
            exports.export(&format!("{WARM_EXPORT}{i}"), ExportKind::Func, func);
        }
        self.added.push(SectionId::Export);
    }

    /// Subtracts `cost` from the fuel global and calls the exhausted import if it went below
    /// zero.
    fn charge(&self, f: &mut wasm_encoder::Function, scratch: &Scratch, cost: u64) {
        let global = self.layout.fuel_global();
        f.instruction(&Instruction::GlobalGet(global))
            .instruction(&Instruction::I64Const(cost as i64))
            .instruction(&Instruction::I64Sub)
            .instruction(&Instruction::LocalTee(scratch.count))
            .instruction(&Instruction::GlobalSet(global))
            .instruction(&Instruction::LocalGet(scratch.count))
            .instruction(&Instruction::I64Const(0))
            .instruction(&Instruction::I64LtS)
            .instruction(&Instruction::If(BlockType::Empty))
            .instruction(&Instruction::Call(self.layout.signatures.added_function()))
            .instruction(&Instruction::End);
    }

    /// Subtracts `cost` from the fuel global; the next check point tests it.
    fn charge_unchecked(&self, f: &mut wasm_encoder::Function, cost: u64) {
        let global = self.layout.fuel_global();
        f.instruction(&Instruction::GlobalGet(global))
            .instruction(&Instruction::I64Const(cost as i64))
            .instruction(&Instruction::I64Sub)
            .instruction(&Instruction::GlobalSet(global));
    }

    /// Subtracts the length operand on top of the stack (a bulk operation's) from the fuel
    /// global, leaving the stack as it was; the next check point tests the global.
    fn charge_length(&self, f: &mut wasm_encoder::Function, scratch: &Scratch) {
        let global = self.layout.fuel_global();
        f.instruction(&Instruction::LocalTee(scratch.length))
            .instruction(&Instruction::GlobalGet(global))
            .instruction(&Instruction::LocalGet(scratch.length))
            .instruction(&Instruction::I64ExtendI32U)
            .instruction(&Instruction::I64Sub)
            .instruction(&Instruction::GlobalSet(global));
    }
}

/// How one function is metered.
#[derive(Default)]
struct Plan {
    /// What each check point charges: the function's entry, then each loop header. Empty when
    /// the callers pay for the function.
    charges: Vec<u64>,
    /// Whether the entry also tests the global. Every loop header does; an entry must when
    /// the function can be part of an unbounded chain of calls without a loop, which needs a
    /// cycle of calls: one of direct calls (the function is in it), or one through a table or
    /// a reference (the function making that call is in it); and when it could run more than
    /// [`UNTESTED_LIMIT`] before a test. Elsewhere the entry only subtracts, and a test
    /// follows within that limit. A test makes every function a caller (of the host's import),
    /// and a caller pays for its frame: testing at every entry cost a call-heavy program 8 %
    /// more time than subtracting alone.
    entry_checked: bool,
}

/// The position among the defined functions of function `func`, or `None` for an import.
fn defined(func: u32, imported_functions: u32, defined_functions: usize) -> Option<usize> {
    func.checked_sub(imported_functions)
        .map(|i| i as usize)
        .filter(|&i| i < defined_functions)
}

/// Whether each defined function is in a cycle of direct calls (itself included): Tarjan's
/// strongly connected components, iteratively, so that a deep chain of calls in a hostile
/// module cannot exhaust the host's stack.
fn in_cycle(shapes: &[Shape<'_>], imported_functions: u32) -> Vec<bool> {
    let n = shapes.len();
    let edges: Vec<Vec<usize>> = shapes
        .iter()
        .map(|shape| {
            let callees = shape.calls.iter();
            callees
                .filter_map(|&(_, callee)| defined(callee, imported_functions, n))
                .collect()
        })
        .collect();
    const UNSEEN: usize = usize::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut cyclic = vec![false; n];
    let mut next = 0;
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        // Each frame: a function and how many of its edges have been followed.
        let mut frames = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut followed)) = frames.last_mut() {
            if let Some(&w) = edges[v].get(*followed) {
                *followed += 1;
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    frames.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut members = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                let recursive = members.len() > 1 || edges[v].contains(&v);
                for w in members {
                    cyclic[w] = recursive;
                }
            }
        }
    }
    cyclic
}

/// One function's code as the meter sees it.
struct Shape<'a> {
    /// The function's code, read again by [`path_costs`] once its callees' costs are known.
    body: FunctionBody<'a>,
    /// The operators in each region: the function's own first, then each loop's in the order
    /// the loops open.
    regions: Vec<u64>,
    /// Each direct call: the region it is in and the function it calls.
    calls: Vec<(usize, u32)>,
    /// How many calls it makes through a table or a reference (callees the meter cannot know).
    indirect_calls: u32,
    /// Functions it takes a reference to (`ref.func`).
    referenced: Vec<u32>,
}

impl<'a> Shape<'a> {
    fn read(func: &FunctionBody<'a>) -> wasmparser::Result<Self> {
        let mut shape = Shape {
            body: func.clone(),
            regions: vec![0],
            calls: Vec::new(),
            indirect_calls: 0,
            referenced: Vec::new(),
        };
        // The region each open block belongs to; a loop opens a region of its own.
        let mut open = vec![0usize];
        let mut reader = func.get_operators_reader()?;
        while !reader.eof() {
            let operator = reader.read()?;
            let region = open.last().copied().unwrap_or(0);
            match operator {
                Operator::Loop { .. } => {
                    shape.regions.push(0);
                    open.push(shape.regions.len() - 1);
                    continue;
                }
                Operator::Block { .. }
                | Operator::If { .. }
                | Operator::TryTable { .. }
                | Operator::Try { .. } => {
                    open.push(region);
                    continue;
                }
                // `delegate` closes a `try` block as `end` does.
                Operator::End | Operator::Delegate { .. } => {
                    open.pop();
                    continue;
                }
                Operator::Nop
                | Operator::Drop
                | Operator::Else
                | Operator::Unreachable
                | Operator::Return => continue,
                Operator::Call { function_index } | Operator::ReturnCall { function_index } => {
                    shape.calls.push((region, function_index));
                }
                Operator::CallIndirect { .. }
                | Operator::ReturnCallIndirect { .. }
                | Operator::CallRef { .. }
                | Operator::ReturnCallRef { .. } => shape.indirect_calls += 1,
                Operator::RefFunc { function_index } => shape.referenced.push(function_index),
                _ => {}
            }
            shape.regions[region] += 1;
        }
        Ok(shape)
    }
}

/// What each region of `body` charges: the most operators one pass through it can run, from
/// its check point to the next one or to the function's end. Arms of an `if` and the targets of
/// a branch are alternatives, so a region is charged its costliest path rather than every
/// operator it holds (an interpreter's dispatch is one region with an arm per instruction, of
/// which each pass runs one). A direct call of a folded function costs what `folded` says.
/// Still charged before the region runs, and the same on every pass: deterministic.
fn path_costs(
    body: &FunctionBody<'_>,
    regions: usize,
    folded: impl Fn(u32) -> u64,
) -> wasmparser::Result<Vec<u64>> {
    /// An open block: its region, the cost on entering it, and the costliest way to its end
    /// found so far (branches to it, an `if`'s other arm). A loop's `entry` is the cost its
    /// parent region had when the loop was entered; a branch to a loop ends a pass.
    struct Frame {
        region: usize,
        is_loop: bool,
        is_if: bool,
        entry: Option<u64>,
        exits: Option<u64>,
    }
    fn most(a: Option<u64>, b: Option<u64>) -> Option<u64> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, None) => a,
            (None, b) => b,
        }
    }
    /// A pass through `region` that ends having cost `cost` (`None`: no path gets there).
    fn end(costs: &mut [u64], region: usize, cost: Option<u64>) {
        if let (Some(slot), Some(cost)) = (costs.get_mut(region), cost) {
            *slot = (*slot).max(cost);
        }
    }
    let mut costs = vec![0u64; regions];
    let mut frames = vec![Frame {
        region: 0,
        is_loop: false,
        is_if: false,
        entry: Some(0),
        exits: None,
    }];
    let mut next_region = 1;
    // The costliest way to reach this point of the current region; `None` where no path does.
    let mut now: Option<u64> = Some(0);
    // A branch to the frame `depth` levels out: the passes it ends (every loop it leaves, and
    // the target's when that is a loop) and where it arrives.
    let branch = |frames: &mut Vec<Frame>, costs: &mut [u64], depth: u32, now: Option<u64>| {
        let Some(target) = frames.len().checked_sub(1 + depth as usize) else {
            return;
        };
        let mut arriving = now;
        for at in (target + 1..frames.len()).rev() {
            if frames[at].is_loop {
                end(costs, frames[at].region, arriving);
                arriving = frames[at].entry;
            }
        }
        let frame = &mut frames[target];
        if frame.is_loop {
            end(costs, frame.region, arriving);
        } else {
            frame.exits = most(frame.exits, arriving);
        }
    };
    let mut reader = body.get_operators_reader()?;
    while !reader.eof() {
        let operator = reader.read()?;
        let region = frames.last().map_or(0, |f| f.region);
        let step = |now: Option<u64>, by: u64| now.map(|c| c.saturating_add(by));
        match operator {
            Operator::Loop { .. } => {
                // A return from inside the loop ends the parent's pass where the loop began.
                end(&mut costs, region, now);
                frames.push(Frame {
                    region: next_region,
                    is_loop: true,
                    is_if: false,
                    entry: now,
                    exits: None,
                });
                next_region += 1;
                now = now.map(|_| 0);
            }
            Operator::Block { .. } | Operator::TryTable { .. } | Operator::Try { .. } => {
                frames.push(Frame {
                    region,
                    is_loop: false,
                    is_if: false,
                    entry: now,
                    exits: None,
                });
            }
            Operator::If { .. } => {
                now = step(now, 1);
                frames.push(Frame {
                    region,
                    is_loop: false,
                    is_if: true,
                    entry: now,
                    exits: None,
                });
            }
            Operator::Else | Operator::Catch { .. } | Operator::CatchAll => {
                if let Some(frame) = frames.last_mut() {
                    frame.exits = most(frame.exits, now);
                    now = if matches!(operator, Operator::Else) {
                        frame.entry
                    } else {
                        // Reached from anywhere in the body: as costly as its costliest path.
                        frame.exits
                    };
                    if matches!(operator, Operator::Else) {
                        frame.is_if = false;
                    }
                }
            }
            Operator::End | Operator::Delegate { .. } => {
                let Some(frame) = frames.pop() else {
                    break;
                };
                if frame.is_loop {
                    end(&mut costs, frame.region, now);
                    now = frame.entry;
                } else {
                    now = most(now, frame.exits);
                    if frame.is_if {
                        now = most(now, frame.entry);
                    }
                }
                if frames.is_empty() {
                    end(&mut costs, 0, now);
                }
            }
            Operator::Br { relative_depth } => {
                branch(&mut frames, &mut costs, relative_depth, step(now, 1));
                now = None;
            }
            Operator::BrIf { relative_depth }
            | Operator::BrOnNull { relative_depth }
            | Operator::BrOnNonNull { relative_depth } => {
                now = step(now, 1);
                branch(&mut frames, &mut costs, relative_depth, now);
            }
            Operator::BrTable { targets } => {
                now = step(now, 1);
                let mut depths: Vec<u32> = targets.targets().collect::<Result<_, _>>()?;
                depths.push(targets.default());
                depths.sort_unstable();
                depths.dedup();
                for depth in depths {
                    branch(&mut frames, &mut costs, depth, now);
                }
                now = None;
            }
            Operator::Return
            | Operator::Throw { .. }
            | Operator::Rethrow { .. }
            | Operator::ThrowRef => {
                let weight = u64::from(!matches!(operator, Operator::Return));
                end(&mut costs, region, step(now, weight));
                now = None;
            }
            Operator::ReturnCall { function_index } => {
                end(&mut costs, region, step(now, 1 + folded(function_index)));
                now = None;
            }
            Operator::ReturnCallIndirect { .. } | Operator::ReturnCallRef { .. } => {
                end(&mut costs, region, step(now, 1));
                now = None;
            }
            Operator::Unreachable => now = None,
            Operator::Nop | Operator::Drop => {}
            Operator::Call { function_index } => now = step(now, 1 + folded(function_index)),
            _ => now = step(now, 1),
        }
    }
    Ok(costs)
}

/// Most operators a function that is not tested at its entry may run before its callers' next
/// test: its own regions and those of the untested functions it calls, all counted in full.
/// A function that could run more is tested at its entry, like a function in a cycle of
/// calls, so the work between two tests stays bounded whatever the shape of the call graph
/// (a chain of functions that each call the next twice runs 2^n calls with no cycle and no
/// loop). The same bound caps what a folded function may cost its callers. About a
/// millisecond of work; the guest's functions are far below it.
const UNTESTED_LIMIT: u64 = 1_000_000;

/// The largest charge a check point subtracts: the global can then not wrap around however
/// many untested charges follow one another.
const MAX_CHARGE: u64 = 1 << 40;

/// How each defined function is metered, decided callees first. A function with no loop, no
/// indirect call and only folded functions (or imports) as callees, which neither the host
/// nor a table enters, and whose whole cost is at most [`UNTESTED_LIMIT`], is *folded*: it
/// gets no check point, and each direct call of it charges, in the caller's region, all the
/// operators it and its callees hold. Any other function charges at its entry and loop
/// headers, and tests at its entry too when it is in a cycle of direct calls, calls through
/// a table or a reference (which may close a cycle), or could run more than
/// [`UNTESTED_LIMIT`] before a test.
fn plan(
    shapes: &[Shape<'_>],
    imported_functions: u32,
    entered_from_outside: &std::collections::HashSet<u32>,
    pricing: Pricing,
) -> Vec<Plan> {
    let n = shapes.len();
    let defined = |func: u32| defined(func, imported_functions, n);
    let cyclic = in_cycle(shapes, imported_functions);
    // What a function costs those who call it: folded, its whole cost; untested, the most it
    // runs before a test; tested, nothing (its test comes first).
    #[derive(Clone, Copy)]
    enum Cost {
        Folded(u64),
        Untested(u64),
        Tested,
    }
    let mut costs: Vec<Option<Cost>> = vec![None; n];
    let mut plans: Vec<Plan> = std::iter::repeat_with(Plan::default).take(n).collect();
    // Callees first: a function is ready once every defined function it calls has its cost,
    // except that a function in a cycle does not wait for the others in cycles (it is tested
    // whatever they cost, and they never fold). Waiting can then not go round in a circle: one
    // would be a cycle of calls through a function that is in none.
    let mut waiting_on: Vec<usize> = vec![0; n];
    let mut callers: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut ready = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        for &(_, callee) in &shape.calls {
            if let Some(callee) = defined(callee).filter(|&c| !(cyclic[i] && cyclic[c])) {
                waiting_on[i] += 1;
                callers[callee].push(i);
            }
        }
        if waiting_on[i] == 0 {
            ready.push(i);
        }
    }
    while let Some(i) = ready.pop() {
        let shape = &shapes[i];
        let folded = |callee: u32| match defined(callee).and_then(|c| costs[c]) {
            Some(Cost::Folded(cost)) => cost,
            _ => 0,
        };
        // A body that read once reads again; should it not, every operator is counted.
        let charges = path_costs(&shape.body, shape.regions.len(), folded).unwrap_or_else(|_| {
            let mut charges = shape.regions.clone();
            for &(region, callee) in &shape.calls {
                charges[region] = charges[region].saturating_add(folded(callee));
            }
            charges
        });
        let mut untested_below = 0u64;
        let mut all_folded = true;
        for &(_, callee) in &shape.calls {
            let Some(callee) = defined(callee) else {
                // An import: the host charges for its own work.
                continue;
            };
            match costs[callee] {
                Some(Cost::Folded(_)) => {}
                Some(Cost::Untested(cost)) => {
                    untested_below = untested_below.saturating_add(cost);
                    all_folded = false;
                }
                // Tested, or (for a function in a cycle) another in a cycle, tested too.
                Some(Cost::Tested) | None => all_folded = false,
            }
        }
        let own: u64 = charges.iter().fold(0, |sum, &c| sum.saturating_add(c));
        let index = imported_functions + i as u32;
        let foldable = !cyclic[i]
            && charges.len() == 1
            && shape.indirect_calls == 0
            && all_folded
            && !entered_from_outside.contains(&index)
            && own <= UNTESTED_LIMIT;
        let stretch = own.saturating_add(untested_below);
        let cost = if foldable {
            Cost::Folded(own)
        } else if cyclic[i] || shape.indirect_calls > 0 || stretch > UNTESTED_LIMIT {
            Cost::Tested
        } else {
            Cost::Untested(stretch)
        };
        costs[i] = Some(cost);
        if !foldable {
            plans[i] = Plan {
                charges: charges
                    .iter()
                    .map(|&c| {
                        c.saturating_add(pricing.per_pass)
                            .div_ceil(pricing.divisor.max(1))
                            .min(MAX_CHARGE)
                    })
                    .collect(),
                entry_checked: matches!(cost, Cost::Tested),
            };
        }
        for &caller in &callers[i] {
            waiting_on[caller] -= 1;
            if waiting_on[caller] == 0 {
                ready.push(caller);
            }
        }
    }
    plans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plans(wat: &str) -> Vec<Plan> {
        Layout::read(&wat::parse_str(wat).unwrap(), Pricing::BOA)
            .unwrap()
            .plans
    }

    /// The exports of `wasm`, by name, with the index each refers to.
    fn exports(wasm: &[u8]) -> Vec<(String, u32)> {
        let mut found = Vec::new();
        for payload in Parser::new(0).parse_all(wasm) {
            if let wasmparser::Payload::ExportSection(reader) = payload.unwrap() {
                for export in reader {
                    let export = export.unwrap();
                    found.push((export.name.to_owned(), export.index));
                }
            }
        }
        found
    }

    #[test]
    fn a_metered_module_is_valid_and_its_functions_keep_their_meaning() {
        let wasm = wat::parse_str(
            r#"(module
                (import "host" "f" (func $imported))
                (table 2 funcref)
                (elem (i32.const 0) $a $b)
                (global $g (mut i32) (i32.const 0))
                (func $a (export "a") (call $b) (call $imported))
                (func $b
                    (loop (br_if 0 (global.get $g)))
                    (memory.fill (i32.const 0) (i32.const 0) (i32.const 1)))
                (memory 1)
                (start $b))"#,
        )
        .unwrap();
        let metered = instrument(&wasm, &[]).unwrap();
        wasmparser::Validator::new().validate_all(&metered).unwrap();
        // The import comes after the module's own, so `a` moved from 1 to 2; the new global
        // comes after `$g`.
        assert_eq!(
            exports(&metered),
            [("a".to_owned(), 2), (FUEL_EXPORT.to_owned(), 1)]
        );
    }

    #[test]
    fn the_sections_the_meter_needs_are_added_when_missing() {
        let wasm = wat::parse_str(r#"(module (func (export "spin") (loop (br 0))))"#).unwrap();
        let metered = instrument(&wasm, &[]).unwrap();
        wasmparser::Validator::new().validate_all(&metered).unwrap();
        let mut imports = Vec::new();
        for payload in Parser::new(0).parse_all(&metered) {
            if let wasmparser::Payload::ImportSection(reader) = payload.unwrap() {
                for import in reader.into_imports() {
                    let import = import.unwrap();
                    imports.push((import.module.to_owned(), import.name.to_owned()));
                }
            }
        }
        let (module, name) = EXHAUSTED_IMPORT;
        assert_eq!(imports, [(module.to_owned(), name.to_owned())]);
        assert_eq!(
            exports(&metered),
            [("spin".to_owned(), 1), (FUEL_EXPORT.to_owned(), 0)]
        );
    }

    #[test]
    fn warm_functions_are_exported_after_the_module_own_exports() {
        let wasm = wat::parse_str(
            r#"(module
                (import "host" "f" (func $imported))
                (table 3 funcref)
                (elem (i32.const 0) $a $b $c)
                (func $a (export "a"))
                (func $b)
                (func $c))"#,
        )
        .unwrap();
        // `$c` and `$b` (3 and 2 in the module read, 4 and 3 once the import is added), in
        // the order given; `$imported` does not move; there is no function 9.
        let metered = instrument(&wasm, &[3, 2, 9, 0]).unwrap();
        wasmparser::Validator::new().validate_all(&metered).unwrap();
        assert_eq!(
            exports(&metered),
            [
                ("a".to_owned(), 2),
                (FUEL_EXPORT.to_owned(), 0),
                (format!("{WARM_EXPORT}0"), 4),
                (format!("{WARM_EXPORT}1"), 3),
                (format!("{WARM_EXPORT}2"), 0),
            ]
        );
    }

    #[test]
    fn modules_the_meter_cannot_take_are_refused() {
        let taken =
            wat::parse_str(r#"(module (global (export "codemode_fuel") i32 (i32.const 0)))"#)
                .unwrap();
        assert!(instrument(&taken, &[]).unwrap_err().contains(FUEL_EXPORT));
        let warm = wat::parse_str(r#"(module (func (export "codemode_warm_7")))"#).unwrap();
        assert!(instrument(&warm, &[])
            .unwrap_err()
            .contains("codemode_warm_7"));
        assert!(instrument(b"\0asm junk", &[]).is_err());
    }

    #[test]
    fn a_function_reachable_through_a_reference_pays_for_itself() {
        let plans = plans(
            r#"(module
                (table 1 funcref)
                (global funcref (ref.func $in_global))
                (func $in_global (nop) (nop))
                (func $plain (nop) (nop)))"#,
        );
        assert_eq!(plans[0].charges, [Pricing::BOA.per_pass]);
        assert!(plans[1].charges.is_empty(), "folded: nothing refers to it");
    }

    #[test]
    fn untested_work_is_bounded_and_charges_cannot_wrap() {
        // 64 functions, each calling the next twice: their costs double at every level.
        let mut wat = String::from("(module");
        for i in 0..64 {
            if i == 63 {
                wat.push_str(&format!("(func $f{i} (drop (i32.const 0)))"));
            } else {
                wat.push_str(&format!(
                    "(func $f{i} (call $f{n}) (call $f{n}))",
                    n = i + 1
                ));
            }
        }
        wat.push(')');
        let plans = plans(&wat);
        assert!(
            plans.iter().any(|p| p.entry_checked),
            "some level is tested"
        );
        for plan in &plans {
            assert!(plan.charges.iter().all(|&c| c <= MAX_CHARGE));
        }
        // The deepest levels are folded into their callers, within the limit.
        assert!(plans[63].charges.is_empty());
        assert!(!plans[0].charges.is_empty());
    }

    /// What the function's regions cost without the pass's own cost.
    fn paths(wat: &str) -> Vec<u64> {
        let plans = plans(wat);
        plans[0]
            .charges
            .iter()
            .map(|c| c - Pricing::BOA.per_pass)
            .collect()
    }

    #[test]
    fn a_pricing_adds_its_price_per_pass_and_divides() {
        let wat = r#"(module (func (export "f") (param i32) (result i32)
            (loop (br_if 0 (i32.eqz (i32.add (local.get 0) (i32.const 1)))))
            (local.get 0)))"#;
        let priced = |pricing| {
            Layout::read(&wat::parse_str(wat).unwrap(), pricing)
                .unwrap()
                .plans
        };
        let bare = priced(Pricing {
            per_pass: 0,
            divisor: 1,
        });
        let divided = priced(Pricing {
            per_pass: 10,
            divisor: 3,
        });
        let expected: Vec<u64> = bare[0]
            .charges
            .iter()
            .map(|c| (c + 10).div_ceil(3))
            .collect();
        assert_eq!(divided[0].charges, expected);
        assert!(instrument_priced(&wat::parse_str(wat).unwrap(), &[], Pricing::MONTY).is_ok());
    }

    #[test]
    fn a_region_costs_its_costliest_path_not_every_arm() {
        // `if` (1) and then the longer arm (3), not both arms (5).
        let arms = paths(
            r#"(module (func (export "f") (param i32)
                (if (local.get 0)
                    (then (drop (i32.add (i32.const 1) (i32.const 2))))
                    (else (drop (i32.const 1))))))"#,
        );
        assert_eq!(arms, [1 + 1 + 3]);
        // A dispatch: `br_table` to one of three arms, each leaving the switch with `br`.
        let dispatch = paths(
            r#"(module (func (export "f") (param i32)
                (block $out
                  (block $c (block $b (block $a
                    (br_table $a $b $c (local.get 0)))
                    (drop (i32.const 1)) (br $out))
                    (drop (i32.add (i32.const 1) (i32.add (i32.const 2) (i32.const 3)))) (br $out))
                  (drop (i32.const 1)))))"#,
        );
        // local.get + br_table, then arm $b: 5 operators and its `br`.
        assert_eq!(dispatch, [2 + 5 + 1]);
        // A loop is a region of its own; the function's path goes around it, and an early
        // exit from the loop ends the loop's pass, not the function's.
        let looped = paths(
            r#"(module (func (export "f") (param i32)
                (drop (i32.const 0))
                (block $done
                  (loop $again
                    (br_if $done (local.get 0))
                    (drop (i32.const 1))
                    (br $again)))
                (drop (i32.const 2))))"#,
        );
        assert_eq!(looped, [2, 2 + 2]);
        // What cannot be reached after a `return` or `unreachable` costs nothing.
        let returned = paths(
            r#"(module (func (export "f") (param i32)
                (if (local.get 0) (then (return)))
                (unreachable)
                (drop (i32.const 1))))"#,
        );
        assert_eq!(returned, [2]);
    }

    #[test]
    fn wide_memories_are_refused() {
        let wide = wat::parse_str("(module (memory i64 1))").unwrap();
        assert!(instrument(&wide, &[]).unwrap_err().contains("64-bit"));
    }

    #[test]
    fn helpers_are_paid_for_by_their_callers_and_cycles_are_tested() {
        let plans = plans(
            r#"(module
                (type $t (func))
                (table 1 funcref)
                (elem (i32.const 0) $by_table)
                (func $leaf (drop (i32.add (i32.const 1) (i32.const 2))))
                (func $calls_leaf (call $leaf) (call $leaf) (loop (call $leaf)))
                (func $recursive (call $recursive))
                (func $indirect (call_indirect (type $t) (i32.const 0)))
                (func $by_table (nop))
                (func (export "exported") (nop))
                (func $ping (call $pong))
                (func $pong (call $ping)))"#,
        );
        // $leaf: folded (i32.const, i32.const, i32.add; `drop` is free).
        assert!(plans[0].charges.is_empty());
        // $calls_leaf pays for two calls of $leaf at its entry and one in its loop, each a
        // call (1) plus the leaf's 3, with the pass's own cost.
        assert_eq!(
            plans[1].charges,
            [8 + Pricing::BOA.per_pass, 4 + Pricing::BOA.per_pass]
        );
        assert!(!plans[1].entry_checked, "no cycle goes through it");
        assert!(plans[2].entry_checked, "it calls itself");
        assert!(plans[3].entry_checked, "it calls through a table");
        assert!(!plans[4].charges.is_empty(), "a table can call it");
        assert!(!plans[5].charges.is_empty(), "the host can call it");
        assert!(
            plans[6].entry_checked && plans[7].entry_checked,
            "they call each other"
        );
    }
}

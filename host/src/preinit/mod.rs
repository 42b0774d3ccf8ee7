//! Pre-initialisation: the guest's Boa realm and prelude are built once with Wizer and captured
//! in the module that every run then instantiates. The same instance then profiles which
//! functions a run calls through the table ([`warm`]).

pub(crate) mod warm;

use crate::config::Budgets;
use crate::interruption::Interruption;
use crate::store::{enforce_memory_budget, RunState};
use codemode_runtime::signal::AbortSignal;
use std::time::Instant;
use wasmtime::Store;

/// Reads a pre-initialising instance's state for the snapshot.
struct InitState<'a> {
    store: &'a mut Store<RunState>,
    instance: wasmtime::Instance,
}

impl wasmtime_wizer::InstanceState for InitState<'_> {
    async fn global_get(
        &mut self,
        name: &str,
        _: wasmtime_wizer::ValType,
    ) -> wasmtime_wizer::SnapshotVal {
        use wasmtime_wizer::SnapshotVal;
        let value = self
            .instance
            .get_global(&mut *self.store, name)
            .map(|g| g.get(&mut *self.store));
        match value {
            Some(wasmtime::Val::I32(x)) => SnapshotVal::I32(x),
            Some(wasmtime::Val::I64(x)) => SnapshotVal::I64(x),
            Some(wasmtime::Val::F32(x)) => SnapshotVal::F32(x),
            Some(wasmtime::Val::F64(x)) => SnapshotVal::F64(x),
            Some(wasmtime::Val::V128(x)) => SnapshotVal::V128(x.as_u128()),
            // The snapshot only asks for globals the instrumented module exports, all numeric.
            _ => SnapshotVal::I32(0),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        match self.instance.get_memory(&mut *self.store, name) {
            Some(memory) => contents(memory.data(&*self.store)),
            None => contents(&[]),
        }
    }
}

/// A pre-initialised guest.
pub(crate) struct Prepared {
    /// The module, its memory holding the state `cm_init` built.
    pub(crate) wasm: Vec<u8>,
    /// The functions a run calls through the table, in table order (empty when the profile
    /// could not run): see [`warm`].
    pub(crate) warm: Vec<u32>,
}

/// Pre-initialises the guest: runs its `cm_init` export (Boa context, prelude) once and returns
/// a module whose memory already holds that state, so no run pays for it again, and the
/// functions a profile program then called through the table in that instance ([`warm`]).
pub(crate) fn preinitialize(
    engine: &wasmtime::Engine,
    wasm: &[u8],
    profile: &str,
    interruption: Interruption,
) -> Result<Prepared, String> {
    let mut wizer = wasmtime_wizer::Wizer::new();
    wizer.init_func("cm_init");
    let (cx, instrumented) = wizer.instrument(wasm).map_err(|e| format!("{e:#}"))?;
    // The snapshot reads memory and globals by their exports, which the noting rewrite keeps.
    // Only the metered module uses the profile; without it (another engine, or a rewrite that
    // fails or does not compile) Wizer runs its own module and nothing else changes.
    let noted = if interruption.fuel() {
        codemode_rewrite::noting::noting(&instrumented)
            .and_then(|noted| wasmtime::Module::new(engine, &noted).map_err(|e| format!("{e:#}")))
    } else {
        Err("only the metered module uses it".to_string())
    };
    if let Err(error) = &noted {
        tracing::debug!("no profile of the guest's indirect calls: {error}");
    }
    let profiling = noted.is_ok();
    let module = match noted {
        Ok(module) => module,
        Err(_) => wasmtime::Module::new(engine, &instrumented).map_err(|e| format!("{e:#}"))?,
    };
    let mut linker = crate::bridge::linker(engine).map_err(|e| format!("{e:#}"))?;
    let notes = warm::Notes::default();
    notes.define(&mut linker).map_err(|e| format!("{e:#}"))?;
    let budgets = Budgets::default();
    let state = RunState::new(
        &budgets,
        Vec::new(),
        Vec::new(),
        AbortSignal::never(),
        Instant::now(),
    );
    let mut store = Store::new(engine, state);
    store.data_mut().preinitializing = true;
    enforce_memory_budget(&mut store);
    if interruption.epoch() {
        store.set_epoch_deadline(u64::MAX / 2);
    }
    let instance = linker
        .instantiate(&mut store, &module)
        .map_err(|e| format!("{e:#}"))?;
    store.data_mut().memory = instance.get_memory(&mut store, "memory");
    let init = instance
        .get_typed_func::<(), ()>(&mut store, "cm_init")
        .map_err(|e| format!("{e:#}"))?;
    init.call(&mut store, ()).map_err(|e| format!("{e:#}"))?;
    let mut state = InitState {
        store: &mut store,
        instance,
    };
    let snapshot = futures::executor::block_on(wizer.snapshot(&cx, &mut state))
        .map_err(|e| format!("{e:#}"))?;
    // The same pipeline makes the mutable globals reachable, for pausing runs.
    let wasm = codemode_rewrite::globals::export_mutable_globals(&snapshot)?;
    let warm = if profiling {
        warm::profile(&mut store, instance, &notes, &wasm, profile)
    } else {
        Vec::new()
    };
    Ok(Prepared { wasm, warm })
}

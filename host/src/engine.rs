//! The process-wide wasmtime engine and the guest module, compiled once per process.
//!
//! Compiling Boa with Cranelift takes seconds, so the compiled module is cached on disk, keyed
//! by the guest's hash and the engine's configuration (fuel and epoch instrumentation are baked
//! into machine code). A cache entry carries its own length and checksum; a stale, truncated or
//! corrupt entry is detected, recompiled and rewritten. Before compiling, the guest is
//! pre-initialised (Wizer): its Boa realm and prelude are built once and captured in the module's
//! data, so a run starts from a ready engine. The epoch ticker that enforces wall
//! clocks lives here too: one thread per process, ticking every millisecond.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wasmtime::{Config, Engine, Module};

/// The guest module, built by `build.rs`.
pub const GUEST_WASM: &[u8] = include_bytes!(env!("CODEMODE_GUEST_WASM"));
const GUEST_SHA256: &str = env!("CODEMODE_GUEST_SHA256");

/// One epoch tick. Wall-clock checks inside running wasm happen at this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Native stack for wasm frames: Boa's parser and interpreter recurse deeply on nested input.
const MAX_WASM_STACK: usize = 4 * 1024 * 1024;

/// A failure to set up the engine or the module; nothing can run without them.
#[derive(Debug, Clone, thiserror::Error)]
#[error("codemode: the sandbox engine is unavailable: {0}")]
pub struct EngineError(pub String);

pub struct Shared {
    pub engine: Engine,
    pub module: Module,
    /// Where the compiled module came from, for diagnostics and benchmarks.
    pub module_source: ModuleSource,
    pub interruption: Interruption,
}

/// How running wasm is interrupted. Both are compiled into the guest's machine code, so each
/// scheme is its own engine and its own compiled module.
///
/// Runs use [`Interruption::FuelAndEpoch`]: fuel is the compute budget (deterministic, counts
/// only the guest's own work) and epochs enforce the wall clock and aborts inside a hot loop.
/// The other schemes exist to measure what each mechanism costs (`codemode bench
/// --interruption`); with them a budget the scheme lacks goes unenforced while wasm runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interruption {
    None,
    Fuel,
    Epoch,
    FuelAndEpoch,
}

impl Interruption {
    pub const ALL: [Interruption; 4] = [
        Interruption::None,
        Interruption::Fuel,
        Interruption::Epoch,
        Interruption::FuelAndEpoch,
    ];

    pub fn fuel(self) -> bool {
        matches!(self, Interruption::Fuel | Interruption::FuelAndEpoch)
    }

    pub fn epoch(self) -> bool {
        matches!(self, Interruption::Epoch | Interruption::FuelAndEpoch)
    }

    pub fn name(self) -> &'static str {
        match self {
            Interruption::None => "none",
            Interruption::Fuel => "fuel",
            Interruption::Epoch => "epoch",
            Interruption::FuelAndEpoch => "both",
        }
    }
}

/// Stops a private engine's epoch ticker when dropped.
pub struct Ticker(Arc<AtomicBool>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleSource {
    Compiled,
    DiskCache,
}

/// Most runs alive at once in one process. Instances, memories and fiber stacks come from a
/// pool of this many slots, reused from run to run (a freed slot is reset to the pristine
/// image before reuse); one more run than this fails as a `worker-exit` until a slot frees.
pub const MAX_CONCURRENT_RUNS: u32 = 256;

/// The largest linear memory any budget may grant (`memory_mb` is at most 4096).
const MAX_MEMORY_BYTES: usize = 4 << 30;

/// Most dirty memory (and table) bytes a freed slot keeps mapped for its next run. A trivial
/// run dirties ~350 KiB; the bound caps what idle slots hold (at most 257 × 1 MiB).
const KEEP_RESIDENT: usize = 1 << 20;

fn pool() -> wasmtime::PoolingAllocationConfig {
    // Slots for the runs plus the one-time pre-initialisation.
    let slots = MAX_CONCURRENT_RUNS + 1;
    let mut pool = wasmtime::PoolingAllocationConfig::new();
    pool.total_core_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .total_stacks(slots)
        .max_memory_size(MAX_MEMORY_BYTES)
        .table_elements(100_000)
        .max_core_instance_size(4 << 20);
    // A freed slot is reset to the pristine image in place: the pages the run dirtied (found
    // with Linux's PAGEMAP_SCAN, up to KEEP_RESIDENT of them) are copied back from the image and
    // stay mapped, so the next run in the slot takes no page faults on them. Without this every
    // run re-faulted ~90 pages (each a copy-on-write fault plus a TLB-shootdown IPI) and
    // `madvise`d them away again afterwards: 0.8 ms instead of 0.3 ms for `return 1`. Where the
    // scan is unavailable (other kernels) wasmtime falls back to `madvise`.
    pool.pagemap_scan(wasmtime::Enabled::Auto)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT);
    pool
}

fn config(interruption: Interruption) -> Config {
    let mut config = Config::new();
    config
        .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool()))
        .consume_fuel(interruption.fuel())
        .epoch_interruption(interruption.epoch())
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(MAX_WASM_STACK + 512 * 1024)
        .cranelift_opt_level(wasmtime::OptLevel::Speed);
    // `CODEMODE_PERFMAP=1` writes /tmp/perf-<pid>.map so `perf report` names the guest's
    // functions (build the guest unstripped to see Rust names rather than indices).
    if std::env::var_os("CODEMODE_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}

static SHARED: OnceLock<Result<Shared, EngineError>> = OnceLock::new();

fn build(interruption: Interruption, stop: &Arc<AtomicBool>) -> Result<Shared, EngineError> {
    let engine = Engine::new(&config(interruption)).map_err(|e| EngineError(format!("{e:#}")))?;
    let (module, module_source) = load_module(&engine, interruption)?;
    if interruption.epoch() {
        start_ticker(engine.clone(), stop.clone());
    }
    Ok(Shared {
        engine,
        module,
        module_source,
        interruption,
    })
}

/// The engine and compiled guest every run uses, created on first use.
pub fn shared() -> Result<&'static Shared, EngineError> {
    SHARED
        .get_or_init(|| {
            build(
                Interruption::FuelAndEpoch,
                &Arc::new(AtomicBool::new(false)),
            )
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A private engine and guest under another interruption scheme, for measurements. Its epoch
/// ticker (if any) runs until the returned [`Ticker`] is dropped.
pub fn private(interruption: Interruption) -> Result<(Shared, Ticker), EngineError> {
    let stop = Arc::new(AtomicBool::new(false));
    let shared = build(interruption, &stop)?;
    Ok((shared, Ticker(stop)))
}

fn start_ticker(engine: Engine, stop: Arc<AtomicBool>) {
    let spawned = std::thread::Builder::new()
        .name("codemode-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        });
    if let Err(error) = spawned {
        // Without the ticker wall clocks are still enforced around waits, and fuel still bounds
        // compute; only a hot loop's wall-clock kill would be late.
        tracing::error!("codemode: could not start the epoch ticker: {error}");
    }
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CODEMODE_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("codemode"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("codemode"))
}

/// Bumped whenever what is cached changes meaning (now: the pre-initialised guest).
const CACHE_FORMAT: &str = "preinit-1";

fn cache_path(engine: &Engine) -> Option<PathBuf> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    CACHE_FORMAT.hash(&mut hasher);
    let key = format!(
        "guest-{}-{:016x}.cwasm",
        &GUEST_SHA256[..16],
        hasher.finish()
    );
    cache_dir().map(|d| d.join(key))
}

/// Trailer appended to a cache entry: payload length and CRC-32, little-endian.
const TRAILER: usize = 12;

fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

fn read_cached(engine: &Engine, path: &Path) -> Option<Module> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() < TRAILER {
        return None;
    }
    let (payload, trailer) = bytes.split_at(bytes.len() - TRAILER);
    let len = u64::from_le_bytes(trailer[..8].try_into().ok()?);
    let sum = u32::from_le_bytes(trailer[8..].try_into().ok()?);
    if len != payload.len() as u64 || sum != checksum(payload) {
        return None;
    }
    // SAFETY: `deserialize` trusts its input to be machine code wasmtime produced. This entry
    // was written by `write_cached` below from `Module::serialize` of this very engine
    // configuration (the file name carries the configuration hash and the guest hash), and its
    // length and checksum were verified just above, so it is byte for byte what wasmtime wrote.
    // wasmtime additionally checks its own header and version and refuses a mismatch.
    unsafe { Module::deserialize(engine, payload).ok() }
}

fn write_cached(module: &Module, path: &Path) {
    let Ok(mut payload) = module.serialize() else {
        return;
    };
    let len = payload.len() as u64;
    let sum = checksum(&payload);
    payload.extend_from_slice(&len.to_le_bytes());
    payload.extend_from_slice(&sum.to_le_bytes());
    let Some(dir) = path.parent() else {
        return;
    };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // Write then rename, so a reader never sees half an entry.
    let tmp = dir.join(format!(".{}.{}.tmp", std::process::id(), len));
    if std::fs::write(&tmp, &payload).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

fn load_module(
    engine: &Engine,
    interruption: Interruption,
) -> Result<(Module, ModuleSource), EngineError> {
    let path = cache_path(engine);
    if let Some(path) = &path {
        if let Some(module) = read_cached(engine, path) {
            return Ok((module, ModuleSource::DiskCache));
        }
    }
    // Pre-initialise (Boa realm and prelude built once, captured in the module's memory). If
    // that fails the plain module still works: every run then builds its own context.
    let wasm = match crate::run::preinitialize(engine, GUEST_WASM, interruption) {
        Ok(wasm) => wasm,
        Err(error) => {
            tracing::warn!(
                "codemode: guest pre-initialisation failed, runs will be slower: {error}"
            );
            GUEST_WASM.to_vec()
        }
    };
    let module = Module::new(engine, &wasm).map_err(|e| EngineError(format!("{e:#}")))?;
    if let Some(path) = &path {
        write_cached(&module, path);
    }
    Ok((module, ModuleSource::Compiled))
}

/// Whether this process loaded the compiled guest from the on-disk cache (rather than
/// compiling it), once the engine exists.
pub fn module_from_disk_cache() -> Option<bool> {
    match SHARED.get() {
        Some(Ok(shared)) => Some(shared.module_source == ModuleSource::DiskCache),
        _ => None,
    }
}

/// Compiles a module (a hostile test guest, say) with the shared engine.
pub fn compile(bytes: &[u8]) -> Result<Module, EngineError> {
    let shared = shared()?;
    Module::new(&shared.engine, bytes).map_err(|e| EngineError(format!("{e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_cache_entries_are_refused() {
        let shared = shared().expect("engine");
        let dir = std::env::temp_dir().join(format!("codemode-cache-test-{}", std::process::id()));
        let path = dir.join("entry.cwasm");
        write_cached(&shared.module, &path);
        assert!(read_cached(&shared.engine, &path).is_some());
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(read_cached(&shared.engine, &path).is_none());
        std::fs::write(&path, &bytes[..100]).unwrap();
        assert!(read_cached(&shared.engine, &path).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! The process-wide wasmtime engine and the guest module, compiled once per process.
//!
//! Compiling Boa with Cranelift takes seconds, so the compiled module is cached on disk, keyed
//! by the guest's hash, the engine's configuration (epoch instrumentation is baked into machine
//! code) and the version of the fuel meter compiled in, if any. A cache entry carries its own
//! length and checksum; a stale, truncated or corrupt entry is detected, recompiled and
//! rewritten. Before compiling, the guest is pre-initialised (Wizer): its Boa realm and prelude
//! are built once and captured in the module's data, so a run starts from a ready engine; then
//! the fuel meter is compiled into it (`meter::instrument`). Runs are interrupted by fuel alone
//! (see `crate::interruption`); the epoch ticker here serves only the schemes measured beside it.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wasmtime::{Config, Engine, Module};

use crate::interruption::Interruption;

/// The JavaScript guest module (Boa), built by `host/build/main.rs`.
pub const GUEST_WASM: &[u8] = include_bytes!(env!("CODEMODE_GUEST_WASM"));

/// The Python guest module (Monty), built by `host/build/main.rs`.
pub const PYTHON_GUEST_WASM: &[u8] = include_bytes!(env!("CODEMODE_PYTHON_GUEST_WASM"));

/// The size of the stub guest a checking build embeds (`host/build/main.rs`): a header alone.
const STUB_GUEST_LEN: usize = 8;

/// Which guest runs a program: the language's interpreter compiled to WebAssembly. Both speak
/// the same bridge (`codemode-wire`) and run under the same engine, meter and budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Guest {
    /// Boa, for TypeScript (stripped to JavaScript) and JavaScript.
    JavaScript,
    /// Monty, for Python.
    Python,
}

impl Guest {
    /// The guest's module as built.
    pub fn wasm(self) -> &'static [u8] {
        match self {
            Guest::JavaScript => GUEST_WASM,
            Guest::Python => PYTHON_GUEST_WASM,
        }
    }

    /// The SHA-256 of the module as built: what a paused run's record names, and what the
    /// compiled module's cache entry is keyed by.
    pub(crate) fn sha256(self) -> &'static str {
        match self {
            Guest::JavaScript => env!("CODEMODE_GUEST_SHA256"),
            Guest::Python => env!("CODEMODE_PYTHON_GUEST_SHA256"),
        }
    }

    /// The guest whose module has this SHA-256 (a paused run's record names it), if either.
    pub fn of_module(sha256: &str) -> Option<Guest> {
        [Guest::JavaScript, Guest::Python]
            .into_iter()
            .find(|guest| guest.sha256() == sha256)
    }

    /// How the meter prices this guest's code (`codemode_rewrite::meter::Pricing`).
    pub(crate) fn pricing(self) -> codemode_rewrite::meter::Pricing {
        match self {
            Guest::JavaScript => codemode_rewrite::meter::Pricing::BOA,
            Guest::Python => codemode_rewrite::meter::Pricing::MONTY,
        }
    }

    /// The program the pre-initialised guest runs to find its warm functions
    /// (`crate::preinit::warm`).
    fn profile(self) -> &'static str {
        match self {
            Guest::JavaScript => crate::preinit::warm::PROGRAM,
            Guest::Python => crate::preinit::warm::PYTHON_PROGRAM,
        }
    }

    fn index(self) -> usize {
        match self {
            Guest::JavaScript => 0,
            Guest::Python => 1,
        }
    }

    /// The start of its cache entries' names.
    fn cache_prefix(self) -> &'static str {
        match self {
            Guest::JavaScript => "guest-",
            Guest::Python => "guest-python-",
        }
    }
}

/// One epoch tick, for the schemes with epochs that `codemode bench --interruption` measures
/// (runs check the wall clock at fuel yields instead).
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Native stack for wasm frames: Boa's parser and interpreter recurse deeply on nested input.
const MAX_WASM_STACK: usize = 4 * 1024 * 1024;

/// A failure to set up the engine or the module; nothing can run without them. Each variant
/// keeps wasmtime's error as its source (shared, since the process-wide engine's failure is
/// handed to every caller).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// wasmtime refused the engine's configuration (the pooling allocator's reservation, say).
    #[error("codemode: the sandbox engine is unavailable: cannot configure wasmtime: {message}")]
    Configure {
        /// wasmtime's error with its causes.
        message: String,
        /// wasmtime's error.
        #[source]
        source: WasmtimeCause,
    },
    /// This build embeds the stub guest of a build that was only checked
    /// (`CODEMODE_GUEST_STUB=1`, or clippy before the guest was first built).
    #[error("codemode: the sandbox engine is unavailable: this build has no guest, only the stub a checking build embeds; build it again without CODEMODE_GUEST_STUB (`cargo build`)")]
    StubGuest,
    /// A module did not compile.
    #[error("codemode: the sandbox engine is unavailable: cannot compile the module: {message}")]
    Compile {
        /// wasmtime's error with its causes.
        message: String,
        /// wasmtime's error.
        #[source]
        source: WasmtimeCause,
    },
    /// A module's imports could not be linked to the host's.
    #[error("codemode: the sandbox engine is unavailable: cannot link the module: {message}")]
    Link {
        /// wasmtime's error with its causes.
        message: String,
        /// wasmtime's error.
        #[source]
        source: WasmtimeCause,
    },
}

/// wasmtime's error as a shareable source.
pub type WasmtimeCause = Arc<dyn std::error::Error + Send + Sync>;

impl EngineError {
    fn parts(error: wasmtime::Error) -> (String, WasmtimeCause) {
        let message = format!("{error:#}");
        let boxed: Box<dyn std::error::Error + Send + Sync> = error.into();
        (message, Arc::from(boxed))
    }

    pub(crate) fn configure(error: wasmtime::Error) -> Self {
        let (message, source) = Self::parts(error);
        Self::Configure { message, source }
    }

    pub(crate) fn compile(error: wasmtime::Error) -> Self {
        let (message, source) = Self::parts(error);
        Self::Compile { message, source }
    }

    pub(crate) fn meter(message: String) -> Self {
        Self::compile(wasmtime::Error::msg(message))
    }

    pub(crate) fn link(error: wasmtime::Error) -> Self {
        let (message, source) = Self::parts(error);
        Self::Link { message, source }
    }
}

pub struct Shared {
    pub engine: Engine,
    /// Each guest's compiled module, by [`Guest::index`]: compiled (or loaded from the disk
    /// cache) when a runtime first asks for it, so a process that runs one language never
    /// prepares the other.
    modules: [OnceLock<Result<(Module, ModuleSource), EngineError>>; 2],
    /// One permit per pool slot: a run holds one from before instantiation until its store is
    /// gone, so runs beyond the pool wait for a slot instead of failing to instantiate.
    pub slots: Arc<tokio::sync::Semaphore>,
    pub interruption: Interruption,
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

/// Most runs alive at once per engine. Instances, memories and fiber stacks come from a pool
/// of this many slots, reused from run to run (a freed slot is reset to the pristine image
/// before reuse); further runs wait for a slot, within their wall budget.
pub const MAX_CONCURRENT_RUNS: u32 = 256;

/// The largest linear memory any budget may grant.
const MAX_MEMORY_BYTES: usize = crate::config::MAX_MEMORY_BYTES as usize;

/// Most dirty bytes of linear memory, and of the table, that a freed slot keeps mapped for its
/// next run. A trivial run dirties ~350 KiB of memory; the bound caps what idle slots hold (at
/// most 257 × 2 MiB).
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
    // run re-faulted the pages it dirtied (each a copy-on-write fault plus a TLB-shootdown IPI)
    // and `madvise`d them away again afterwards (BENCHMARKS.md says what that cost). Where the
    // scan is unavailable (Linux before 6.7) wasmtime instead resets the first KEEP_RESIDENT
    // bytes with a copy and `madvise`s the rest, which still avoids most of those faults.
    pool.pagemap_scan(if swap_enabled() {
        wasmtime::Enabled::No
    } else {
        wasmtime::Enabled::Auto
    })
    .linear_memory_keep_resident(KEEP_RESIDENT)
    .table_keep_resident(KEEP_RESIDENT);
    pool
}

/// Whether the machine swaps. `PAGEMAP_SCAN` finds a run's dirty pages by their presence in
/// memory; a dirty page swapped out is not present, so a scan-based reset could leave it for
/// the next run in the slot. With swap on, slots are reset by copying and `madvise` instead,
/// which reaches every page however it is backed.
fn swap_enabled() -> bool {
    // `/proc/swaps` is a header line plus one line per active swap area; unreadable means we
    // cannot tell, so assume the worst.
    std::fs::read_to_string("/proc/swaps").map_or(true, |swaps| swaps.lines().count() > 1)
}

fn config(interruption: Interruption) -> Config {
    let mut config = Config::new();
    config
        .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool()))
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
    let engine = Engine::new(&config(interruption)).map_err(EngineError::configure)?;
    if interruption.epoch() {
        start_ticker(engine.clone(), stop.clone());
    }
    Ok(Shared {
        engine,
        modules: [OnceLock::new(), OnceLock::new()],
        slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_RUNS as usize)),
        interruption,
    })
}

impl Shared {
    /// `guest`'s compiled module on this engine, compiled (or loaded from the disk cache) on
    /// first use.
    pub fn module(&self, guest: Guest) -> Result<Module, EngineError> {
        self.modules[guest.index()]
            .get_or_init(|| load_module(&self.engine, self.interruption, guest))
            .as_ref()
            .map(|(module, _)| module.clone())
            .map_err(Clone::clone)
    }

    /// Where `guest`'s module came from, once it is loaded.
    pub fn module_source(&self, guest: Guest) -> Option<ModuleSource> {
        match self.modules[guest.index()].get() {
            Some(Ok((_, source))) => Some(*source),
            _ => None,
        }
    }
}

/// The engine and compiled guest every run uses, created on first use.
pub fn shared() -> Result<&'static Shared, EngineError> {
    SHARED
        .get_or_init(|| build(Interruption::Fuel, &Arc::new(AtomicBool::new(false))))
        .as_ref()
        .map_err(Clone::clone)
}

/// A private engine and guest under another interruption scheme, for measurements. Its epoch
/// ticker (if any) runs until the returned [`Ticker`] is dropped.
#[cfg(feature = "bench")]
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
        tracing::error!("could not start the epoch ticker: {error}");
    }
}

/// Where compiled guests are cached: `CODEMODE_CACHE_DIR`, else `$XDG_CACHE_HOME/codemode`,
/// else `~/.cache/codemode`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CODEMODE_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("codemode"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("codemode"))
}

/// Bumped whenever what is cached changes meaning (now: the pre-initialised guest, built
/// deterministically, with its mutable globals exported).
const CACHE_FORMAT: &str = "preinit-5";

fn cache_path(engine: &Engine, interruption: Interruption, guest: Guest) -> Option<PathBuf> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    CACHE_FORMAT.hash(&mut hasher);
    // The meter is in the module, not in the engine's configuration.
    if interruption.fuel() {
        codemode_rewrite::meter::VERSION.hash(&mut hasher);
        guest.pricing().hash(&mut hasher);
    }
    let key = format!(
        "{}{}-{:016x}.cwasm",
        guest.cache_prefix(),
        &guest.sha256()[..16],
        hasher.finish()
    );
    cache_dir().map(|d| d.join(key))
}

/// A cache entry is two files: `<key>.cwasm`, exactly what `Module::serialize` wrote, so that
/// it can be memory-mapped rather than read and copied (copying the whole module was most of
/// a short CLI run's time), and `<key>.cwasm.sum`, its length and CRC-32 (little-endian), written after it.
const SUM_LEN: usize = 12;

fn sum_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".sum");
    PathBuf::from(name)
}

fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// Length and CRC-32 of a file, read through a shared mapping of the page cache (no copy).
fn file_sum(path: &Path) -> Option<(u64, u32)> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: the mapping is read-only and dropped before returning. codemode only ever
    // replaces cache entries by rename, never writes or truncates them in place, so the mapped
    // file does not change while it is read. (A foreign process truncating a file in our cache
    // directory could make this read fault; writing in place could only give a mismatch.)
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    Some((map.len() as u64, checksum(&map)))
}

fn read_cached(engine: &Engine, path: &Path) -> Option<Module> {
    let sum = std::fs::read(sum_path(path)).ok()?;
    if sum.len() != SUM_LEN {
        return None;
    }
    let len = u64::from_le_bytes(sum[..8].try_into().ok()?);
    let crc = u32::from_le_bytes(sum[8..].try_into().ok()?);
    if file_sum(path)? != (len, crc) {
        return None;
    }
    // SAFETY: `deserialize_file` trusts the file to be machine code wasmtime produced, and to
    // stay unchanged while mapped. This entry was written by `write_cached` below from
    // `Module::serialize` of this very engine configuration (the file name carries the
    // configuration hash and the guest hash) and its length and checksum were verified just
    // above, so it is byte for byte what wasmtime wrote; entries are only ever replaced by
    // rename, never rewritten in place, so a mapped entry does not change under us. wasmtime
    // additionally checks its own header and version and refuses a mismatch.
    unsafe { Module::deserialize_file(engine, path).ok() }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a reader sees either the
/// old file or the whole new one. The temporary file is created new (`O_CREAT | O_EXCL`, which
/// never follows a symlink planted at its name) under a name no other writer uses, and the
/// rename replaces whatever is at `path` itself rather than following it.
fn replace_file(path: &Path, bytes: &[u8]) -> bool {
    use std::io::Write;
    use std::sync::atomic::AtomicU64;
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let Some(dir) = path.parent() else {
        return false;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(
        ".{}.{}.{nanos:08x}.{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed),
        checksum(bytes)
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()));
    if written.is_ok() && std::fs::rename(&tmp, path).is_ok() {
        return true;
    }
    let _ = std::fs::remove_file(&tmp);
    false
}

fn write_cached(module: &Module, path: &Path) {
    let Ok(payload) = module.serialize() else {
        return;
    };
    let Some(dir) = path.parent() else {
        return;
    };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let mut sum = Vec::with_capacity(SUM_LEN);
    sum.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    sum.extend_from_slice(&checksum(&payload).to_le_bytes());
    // The module first: a sum that names a module not yet in place only causes a rebuild.
    if replace_file(path, &payload) {
        replace_file(&sum_path(path), &sum);
    }
    prune(dir, path);
}

/// Entries untouched this long belong to guests or engines no longer in use.
const STALE_AFTER: Duration = Duration::from_secs(14 * 24 * 3600);

/// Removes stale entries (and temporary files abandoned by crashed writers), so the cache does
/// not grow by a module for every guest ever built. An entry still in use by another version
/// is at worst compiled again.
fn prune(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let keep_sum = sum_path(keep);
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = (name.starts_with("guest-")
            && (name.ends_with(".cwasm") || name.ends_with(".cwasm.sum")))
            || (name.starts_with('.') && name.ends_with(".tmp"));
        if !ours || path == keep || path == keep_sum {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_AFTER);
        if stale {
            let _ = std::fs::remove_file(&path);
        }
    }
}

type PreparationNotice = Box<dyn Fn(Option<&Path>) + Send + Sync>;

static PREPARATION_NOTICE: OnceLock<PreparationNotice> = OnceLock::new();

/// Registers what to do when the guest must be prepared (pre-initialised and compiled, several
/// seconds) because the disk cache has no module for this build: a CLI says so on stderr. The
/// notice gets the cache directory the module will be kept in. The first registration wins.
pub fn on_guest_preparation(notice: impl Fn(Option<&Path>) + Send + Sync + 'static) {
    let _ = PREPARATION_NOTICE.set(Box::new(notice));
}

fn load_module(
    engine: &Engine,
    interruption: Interruption,
    guest: Guest,
) -> Result<(Module, ModuleSource), EngineError> {
    let bytes = guest.wasm();
    if bytes.len() <= STUB_GUEST_LEN {
        return Err(EngineError::StubGuest);
    }
    let path = cache_path(engine, interruption, guest);
    if let Some(path) = &path {
        if let Some(module) = read_cached(engine, path) {
            return Ok((module, ModuleSource::DiskCache));
        }
    }
    if let Some(notice) = PREPARATION_NOTICE.get() {
        notice(path.as_deref().and_then(Path::parent));
    }
    // Pre-initialise (Boa realm and prelude built once, captured in the module's memory). If
    // that fails the plain module still works: every run then builds its own context.
    let prepared = match crate::preinit::preinitialize(engine, bytes, guest.profile(), interruption)
    {
        Ok(prepared) => prepared,
        Err(error) => {
            tracing::warn!("guest pre-initialisation failed, runs will be slower: {error}");
            crate::preinit::Prepared {
                wasm: bytes.to_vec(),
                warm: Vec::new(),
            }
        }
    };
    let wasm = if interruption.fuel() {
        codemode_rewrite::meter::instrument_priced(&prepared.wasm, &prepared.warm, guest.pricing())
            .map_err(EngineError::meter)?
    } else {
        prepared.wasm
    };
    let module = Module::new(engine, &wasm).map_err(EngineError::compile)?;
    if let Some(path) = &path {
        write_cached(&module, path);
    }
    Ok((module, ModuleSource::Compiled))
}

/// Whether this process loaded the compiled guest from the on-disk cache (rather than
/// compiling it), once the engine exists.
pub fn module_from_disk_cache() -> Option<bool> {
    match SHARED.get() {
        Some(Ok(shared)) => shared
            .module_source(Guest::JavaScript)
            .map(|source| source == ModuleSource::DiskCache),
        _ => None,
    }
}

/// Compiles a module (a hostile test guest, say) with the shared engine.
#[cfg(feature = "bench")]
pub fn compile(bytes: &[u8]) -> Result<Module, EngineError> {
    let shared = shared()?;
    if GUEST_WASM.len() <= STUB_GUEST_LEN {
        return Err(EngineError::StubGuest);
    }
    let metered = codemode_rewrite::meter::instrument(bytes, &[]).map_err(EngineError::meter)?;
    Module::new(&shared.engine, &metered).map_err(EngineError::compile)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The profile taken at pre-initialisation found the functions a run calls through the
    /// table, and the compiled guest exports them (see `preinit::warm`).
    #[test]
    fn the_guest_exports_the_functions_a_run_calls_through_its_table() {
        let shared = shared().expect("engine");
        let warm = shared
            .module(Guest::JavaScript)
            .expect("module")
            .exports()
            .filter(|export| export.name().starts_with("codemode_warm_"))
            .count();
        // A run of the profile's program calls some 60 of the table's ~1,500 functions.
        assert!((20..300).contains(&warm), "{warm} warm functions");
    }

    /// The guest's mutable globals (its stack pointer at least) are what a pause keeps beside
    /// its memory: the rewrite that exports them applies to the real guest.
    #[test]
    fn the_guest_gains_an_export_per_mutable_global() {
        use codemode_rewrite::globals::{export_mutable_globals, EXPORT_PREFIX};
        let rewritten = export_mutable_globals(GUEST_WASM).expect("rewrites");
        let exports = |wasm: &[u8]| -> Vec<String> {
            let mut names = Vec::new();
            for payload in wasmparser::Parser::new(0).parse_all(wasm) {
                if let Ok(wasmparser::Payload::ExportSection(reader)) = payload {
                    names.extend(
                        reader
                            .into_iter()
                            .filter_map(|e| e.ok())
                            .map(|e| e.name.to_owned()),
                    );
                }
            }
            names
        };
        let before = exports(GUEST_WASM);
        let after = exports(&rewritten);
        assert!(after.starts_with(&before));
        let added = &after[before.len()..];
        assert!(
            !added.is_empty(),
            "the stack pointer at least is a mutable global"
        );
        assert!(added.iter().all(|n| n.starts_with(EXPORT_PREFIX)));
    }

    #[test]
    fn corrupt_cache_entries_are_refused() {
        let shared = shared().expect("engine");
        let dir = std::env::temp_dir().join(format!("codemode-cache-test-{}", std::process::id()));
        let path = dir.join("entry.cwasm");
        write_cached(&shared.module(Guest::JavaScript).expect("module"), &path);
        assert!(read_cached(&shared.engine, &path).is_some());
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(read_cached(&shared.engine, &path).is_none());
        std::fs::write(&path, &bytes[..100]).unwrap();
        assert!(read_cached(&shared.engine, &path).is_none());
        // A module without its sum is not trusted either.
        write_cached(&shared.module(Guest::JavaScript).expect("module"), &path);
        assert!(read_cached(&shared.engine, &path).is_some());
        std::fs::remove_file(sum_path(&path)).unwrap();
        assert!(read_cached(&shared.engine, &path).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn writing_an_entry_prunes_stale_ones_only() {
        let shared = shared().expect("engine");
        let dir = std::env::temp_dir().join(format!("codemode-prune-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let old = dir.join("guest-0000-0000.cwasm");
        let recent = dir.join("guest-1111-1111.cwasm");
        let foreign = dir.join("notes.txt");
        for p in [&old, &recent, &foreign] {
            std::fs::write(p, b"x").unwrap();
        }
        let long_ago = std::time::SystemTime::now() - STALE_AFTER - Duration::from_secs(60);
        for p in [&old, &foreign] {
            let f = std::fs::File::options().write(true).open(p).unwrap();
            f.set_modified(long_ago).unwrap();
        }
        write_cached(
            &shared.module(Guest::JavaScript).expect("module"),
            &dir.join("entry.cwasm"),
        );
        assert!(!old.exists(), "a stale entry is removed");
        assert!(recent.exists(), "a recent entry is kept");
        assert!(
            foreign.exists(),
            "files that are not cache entries are never touched"
        );
        assert!(read_cached(&shared.engine, &dir.join("entry.cwasm")).is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Durable runs: a run that waits only on *pausing* calls is written down and resumed later,
//! in this process or another.
//!
//! Between `cm_run`/`cm_deliver` calls the guest's stack is empty, so its whole state is its
//! linear memory and its mutable globals. A pause keeps the memory pages that differ from the
//! pre-initialised image ([`memory`]), the globals the pre-initialisation pipeline exports
//! (`codemode_rewrite::globals`) and the host's side of the run (open calls, timers, ledger,
//! logs, budgets spent) in one authenticated record ([`record`]), in a [`StateStore`]. A
//! resume refuses a run already consumed, reads the record only when it is within
//! [`MAX_RECORD_BYTES`], checks its tag, build and bounds, claims it (a run is resumed at most
//! once); the sandbox (`codemode-host`) restores a fresh instance from it and delivers the
//! answers.
//!
//! This crate knows nothing of wasm or of the sandbox: it keeps bytes, their bounds, their
//! owners and their keys. Feature `s3` adds [`ObjectStateStore`].

#![warn(missing_docs)]

mod credentials;
mod document;
mod key;
pub mod memory;
#[cfg(feature = "s3")]
mod object;
mod principal;
mod private;
mod quota;
pub mod record;
mod reference;
mod sealed;
mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use credentials::Credentials;
pub use key::KEY_ENV;
#[cfg(feature = "s3")]
pub use object::ObjectStateStore;
pub use principal::Principal;
pub use private::euid;
pub use quota::KeepError;
pub use quota::{pausing_for, DEFAULT_CLIENT_QUOTA_BYTES, DEFAULT_STATE_QUOTA_BYTES};
pub use record::{MAX_HEADER_BYTES, MAX_RECORD_BYTES};
pub use reference::ReferenceError;
pub use store::{
    Cutoffs, LocalStore, Records, StateStore, StoreError, Swept, MAX_CREDENTIALS_BYTES,
    MAX_LEASE_BYTES, MAX_TASK_BYTES,
};

/// Why a state store cannot be used for durable runs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DurabilityError {
    /// The state directory cannot be made, or is not private to codemode's user.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// [`KEY_ENV`] is set but too short to be a key.
    #[error("{KEY_ENV} must be at least {min} characters (for example the output of `openssl rand -hex 32`)")]
    ShortKey {
        /// The fewest bytes a key may have.
        min: usize,
    },
    /// No [`KEY_ENV`], and no state directory to keep a key in.
    #[error("no state key: set {KEY_ENV} (every process resuming these runs needs it)")]
    NoKey,
    /// No [`KEY_ENV`] for a store that other machines share: a key of this machine's own
    /// would make every other one refuse its runs as not authentic.
    #[error("{url} is shared by every process that resumes its runs, and they must share one key: set {KEY_ENV} (at least 32 characters, for example the output of `openssl rand -hex 32`) to the same value in each of them")]
    SharedStoreWithoutKey {
        /// The store's URL.
        url: String,
    },
    /// The state directory's key file cannot be read, created or trusted; says which and why.
    #[error("{0}")]
    KeyFile(String),
    /// An object store URL or option that cannot be used.
    #[error("{url}: {problem}")]
    ObjectStore {
        /// The store's URL.
        url: String,
        /// What is wrong with it.
        problem: String,
        /// The object store's own error, where it gave one.
        #[source]
        source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    },
}

pub use key::new_run_id;
use key::Key;
use record::Header;

/// How long a run keeps waiting, rather than pausing, for a timer due within it.
pub const DEFAULT_PAUSE_THRESHOLD: Duration = Duration::from_secs(1);

/// How long a paused run stays resumable unless [`Durability::ttl`] says otherwise: a week.
pub const DEFAULT_STATE_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The longest time between two sweeps of a store (shorter when the time to live is short:
/// a tenth of it).
const MAX_SWEEP_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// Where paused runs are kept and the key that authenticates them.
#[derive(Clone)]
pub struct Durability {
    store: Arc<dyn StateStore>,
    key: Key,
    pause_threshold: Duration,
    ttl: Duration,
    quota: quota::Quota,
    /// The records this process is writing, counted against the quotas until written.
    writing: Arc<std::sync::Mutex<quota::Writing>>,
    /// When this process last asked the store whether a sweep is due: pauses and resumes ask
    /// at most once per sweep interval, not once each.
    asked: Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

impl std::fmt::Debug for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durability")
            .field("store", &self.store.describe())
            .field("pause_threshold", &self.pause_threshold)
            .field("ttl", &self.ttl)
            .field("quota", &self.quota)
            .finish()
    }
}

impl Durability {
    /// Records under the local directory `dir`, authenticated with `CODEMODE_STATE_KEY` or
    /// with `dir/key` (created `0600` on first use).
    ///
    /// `dir` is created `0700` when missing, and refused unless it (and its `runs/` and
    /// `consumed/`) belongs to the user codemode runs as and neither its group nor others can
    /// write it; the key file is refused unless it belongs to the user and no one else can
    /// read or write it (whoever can replace the key can forge runs that a resume runs).
    pub fn local(dir: impl Into<PathBuf>) -> Result<Self, DurabilityError> {
        let dir = dir.into();
        let store = LocalStore::new(&dir);
        store.check()?;
        let key = Key::load(Some(&dir))?;
        Ok(Self::with_key(Arc::new(store), key))
    }

    #[cfg(feature = "s3")]
    /// Records in the S3-compatible store `url` names (`s3://bucket/prefix`; see
    /// [`ObjectStateStore`]), authenticated with `CODEMODE_STATE_KEY`, which every process
    /// sharing the store must have: without it, this is refused
    /// ([`DurabilityError::SharedStoreWithoutKey`]) rather than signing with a key of this
    /// machine's that the others would not accept.
    pub fn s3(url: &str) -> Result<Self, DurabilityError> {
        let store = ObjectStateStore::s3(url)?;
        let key = Key::load(None).map_err(|e| match e {
            DurabilityError::NoKey => DurabilityError::SharedStoreWithoutKey {
                url: url.to_owned(),
            },
            other => other,
        })?;
        Ok(Self::with_key(Arc::new(store), key))
    }

    /// The credentials kept in the same store, sealed under the same key (for every replica
    /// that shares the store).
    pub fn credentials(&self) -> Credentials {
        Credentials::of(self.store.clone(), self.key.clone())
    }

    /// Records in `store`, authenticated with `key`.
    pub fn with_store(store: Arc<dyn StateStore>, key: Vec<u8>) -> Self {
        Self::with_key(store, Key::from_bytes(key))
    }

    fn with_key(store: Arc<dyn StateStore>, key: Key) -> Self {
        Self {
            store,
            key,
            pause_threshold: DEFAULT_PAUSE_THRESHOLD,
            ttl: DEFAULT_STATE_TTL,
            quota: quota::Quota::default(),
            writing: Arc::default(),
            asked: Arc::default(),
        }
    }

    /// How long a paused run stays resumable ([`DEFAULT_STATE_TTL`] unless set). A record
    /// paused longer ago is refused as expired and swept away, and a consumed mark is kept
    /// twice as long, so that no copy of its record outlives it resumable. Every process
    /// sharing a store should use the same time to live.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The most bytes the paused runs of this store may take in all
    /// ([`DEFAULT_STATE_QUOTA_BYTES`] unless set). A pause that does not fit is not written:
    /// the run goes on, and the calls it would have paused at fail with the reason. Every
    /// process sharing a store should use the same quota.
    pub fn quota(mut self, bytes: u64) -> Self {
        self.quota.store = bytes;
        self
    }

    /// The most bytes the paused runs of one client may take ([`DEFAULT_CLIENT_QUOTA_BYTES`]
    /// unless set; `None` for no such quota), for the runs a server pauses on a client's
    /// behalf ([`pausing_for`]). Like the store's quota, a pause past it is not written.
    pub fn client_quota(mut self, bytes: Option<u64>) -> Self {
        self.quota.client = bytes;
        self
    }

    /// A run with a timer due within `threshold` waits for it instead of pausing.
    pub fn pause_threshold(mut self, threshold: Duration) -> Self {
        self.pause_threshold = threshold;
        self
    }

    /// How long a run waits only on pausing calls before it is written down.
    pub fn threshold(&self) -> Duration {
        self.pause_threshold
    }

    /// The state directory when none is given: `CODEMODE_STATE_DIR`, else
    /// `$XDG_STATE_HOME/codemode`, else `~/.local/state/codemode`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("CODEMODE_STATE_DIR") {
            return Some(PathBuf::from(dir));
        }
        if let Some(dir) = std::env::var_os("XDG_STATE_HOME") {
            return Some(PathBuf::from(dir).join("codemode"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state/codemode"))
    }

    /// Writes a paused run down, if it fits the quotas (the client's is that of the client
    /// the current call runs for, [`pausing_for`]); returns the record's size.
    pub async fn keep(&self, header: &Header, runs: &[u8]) -> Result<u64, KeepError> {
        let packed = memory::compress(runs)?;
        let record = record::encode(header, &packed, self.key.bytes())?;
        let bytes = record.len() as u64;
        let owner = quota::current_principal()
            .filter(|_| self.quota.client.is_some())
            .map(|principal| principal.owner_id(self.key.bytes()));
        let _writing = quota::admit(
            &*self.store,
            self.quota,
            &self.writing,
            bytes,
            owner.as_deref(),
        )
        .await?;
        let failed = |e: StoreError| {
            format!(
                "could not keep the paused run in {}: {e}",
                self.store.describe()
            )
        };
        // The note first: a note without its record counts for nothing, a record without its
        // note would escape its client's quota.
        if let Some(owner) = &owner {
            self.store
                .note_owner(owner, &header.run_id)
                .await
                .map_err(failed)?;
        }
        self.store
            .put(&header.run_id, record)
            .await
            .map_err(failed)?;
        self.tidy_quietly().await;
        Ok(bytes)
    }

    /// Sweeps the store ([`StateStore::sweep`]) of records past the time to live and of
    /// consumed marks past twice that, unless a process sharing it did within the sweep
    /// interval (a tenth of the time to live, at most an hour). Returns what was dropped, or
    /// `None` when the store was swept recently. Pausing and resuming call this; a
    /// long-lived embedder with neither may call it from time to time.
    pub async fn tidy(&self) -> Result<Option<Swept>, StoreError> {
        let now = std::time::SystemTime::now();
        let interval = self.sweep_interval();
        if let Some(last) = self.store.last_sweep().await? {
            // A sweep noted in the future (another machine's clock) does not hold this one off.
            if now.duration_since(last).is_ok_and(|age| age < interval) {
                return Ok(None);
            }
        }
        let before = |age: Duration| now.checked_sub(age).unwrap_or(std::time::UNIX_EPOCH);
        let cutoffs = Cutoffs {
            records: before(self.ttl),
            marks: before(self.ttl.saturating_mul(2)),
        };
        self.store.sweep(cutoffs).await.map(Some)
    }

    /// A reference to paused run `run_id` for `principal` and the request `arguments` (a
    /// `run_code` call's), that any process sharing this store and key can resume from
    /// ([`Durability::run_of`], given the same principal and arguments) until the time to
    /// live has passed: what an MCP input-required result carries as its `requestState`.
    pub fn reference(
        &self,
        run_id: &str,
        principal: &Principal,
        arguments: &serde_json::Value,
    ) -> String {
        let expires = unix_ms(std::time::SystemTime::now() + self.ttl);
        let request = reference::request_digest(arguments);
        reference::seal(self.key.bytes(), run_id, expires, principal, &request)
    }

    /// Keeps `task` (a JSON document) as task `task_id`'s, sealed under a key derived from
    /// the state key, for any process sharing the store.
    pub async fn keep_task(
        &self,
        task_id: &str,
        task: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.keep_document(task_id, TaskFile::Document, task).await
    }

    /// Task `task_id`'s document, if kept; refused unless it opens under the key.
    pub async fn task(&self, task_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.document(task_id, TaskFile::Document).await
    }

    /// Keeps `lease` as task `task_id`'s lease, sealed like its document.
    pub async fn keep_lease(
        &self,
        task_id: &str,
        lease: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.keep_document(task_id, TaskFile::Lease, lease).await
    }

    /// Task `task_id`'s lease, if kept; refused unless it opens under the key.
    pub async fn lease(&self, task_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.document(task_id, TaskFile::Lease).await
    }

    async fn keep_document(
        &self,
        task_id: &str,
        file: TaskFile,
        document: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let failed = |e: &dyn std::fmt::Display| {
            StoreError(format!(
                "could not keep the {} of task {task_id} in {}: {e}",
                file.what(),
                self.store.describe()
            ))
        };
        let sealed = document::seal(&self.key, &file.sealed_as(task_id), document)
            .map_err(|e| failed(&e))?;
        let kept = match file {
            TaskFile::Document => self.store.put_task(task_id, sealed).await,
            TaskFile::Lease => self.store.put_lease(task_id, sealed).await,
        };
        kept.map_err(|e| failed(&e))
    }

    async fn document(
        &self,
        task_id: &str,
        file: TaskFile,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        if !key::is_run_id(task_id) {
            return Err(StoreError(format!(
                "\"{}\" is not a task id",
                task_id.escape_debug()
            )));
        }
        let found = match file {
            TaskFile::Document => self.store.get_task(task_id).await?,
            TaskFile::Lease => self.store.get_lease(task_id).await?,
        };
        let Some(bytes) = found else {
            return Ok(None);
        };
        document::open(&self.key, &file.sealed_as(task_id), &bytes)
            .map(Some)
            .map_err(|why| {
                StoreError(format!(
                    "the {} of task {task_id} is refused: {why}",
                    file.what()
                ))
            })
    }

    /// How long records, marks and tasks are kept.
    pub fn time_to_live(&self) -> Duration {
        self.ttl
    }

    /// The run a [`Durability::reference`] names, once it is found made for `principal`
    /// and `arguments` under this store's key, and unexpired.
    pub fn run_of(
        &self,
        reference: &str,
        principal: &Principal,
        arguments: &serde_json::Value,
    ) -> Result<String, ReferenceError> {
        reference::open(
            self.key.bytes(),
            reference,
            principal,
            &reference::request_digest(arguments),
            unix_ms(std::time::SystemTime::now()),
        )
    }

    /// The name the store keeps `principal`'s runs and tasks under (an HMAC of it under the
    /// key): what a task records as its owner, to be compared, never shown.
    pub fn owner_of(&self, principal: &Principal) -> String {
        principal.owner_id(self.key.bytes())
    }

    /// [`Durability::tidy`], for after a pause or a resume: a failure is only a warning.
    /// How often the store is swept.
    fn sweep_interval(&self) -> Duration {
        (self.ttl / 10).min(MAX_SWEEP_INTERVAL)
    }

    async fn tidy_quietly(&self) {
        {
            let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
            if asked.is_some_and(|at| at.elapsed() < self.sweep_interval()) {
                return;
            }
            *asked = Some(std::time::Instant::now());
        }
        match self.tidy().await {
            Ok(Some(swept)) if swept != Swept::default() => tracing::info!(
                records = swept.records,
                marks = swept.marks,
                "swept expired paused runs from {}",
                self.store.describe()
            ),
            Ok(_) => {}
            Err(error) => tracing::warn!(
                "could not sweep expired paused runs from {}: {error}",
                self.store.describe()
            ),
        }
    }

    /// The guest build that paused run `run_id`: its record's `guest`, the SHA-256 of the
    /// guest module, read from the authenticated record without claiming the run, so that a
    /// front end with several guests can pick the one that resumes it. Refusals are worded as
    /// [`Durability::load`] words them; `load` still checks everything when the run resumes.
    pub async fn guest_of(&self, run_id: &str) -> Result<String, String> {
        let bytes = self.read(run_id).await?;
        let (header, _) = record::decode(&bytes, self.key.bytes())
            .map_err(|why| format!("the record of run {run_id} is refused: {why}"))?;
        Ok(header.guest)
    }

    /// The bytes of run `run_id`'s record, once its id is one and it is not claimed. A
    /// consumed run stays consumed whatever its record: one left behind by a failed removal,
    /// or a copy put back, is never read.
    async fn read(&self, run_id: &str) -> Result<Vec<u8>, String> {
        if !key::is_run_id(run_id) {
            return Err(format!(
                "\"{}\" is not a run id (32 hex digits, as a pause reports)",
                run_id.escape_debug()
            ));
        }
        self.refuse_if_claimed(run_id).await?;
        let found = self
            .store
            .get(run_id, MAX_RECORD_BYTES)
            .await
            .map_err(|e| e.to_string())?;
        match found {
            Some(bytes) => Ok(bytes),
            None => {
                // A racing resume may have claimed it (and dropped the record) since the check.
                self.refuse_if_claimed(run_id).await?;
                Err(format!(
                    "no paused run {run_id} in {}",
                    self.store.describe()
                ))
            }
        }
    }

    /// Reads and checks run `run_id`'s record: not yet resumed, within the size cap,
    /// authentic, from this build, within bounds. Returns its header and its memory runs,
    /// decompressed.
    pub async fn load(&self, run_id: &str, guest: &str, image: &str) -> Result<Loaded, String> {
        let bytes = self.read(run_id).await?;
        let refused =
            |why: &dyn std::fmt::Display| format!("the record of run {run_id} is refused: {why}");
        let (header, packed) =
            record::decode(&bytes, self.key.bytes()).map_err(|why| refused(&why))?;
        if header.run_id != run_id {
            return Err(refused(&format_args!("it is run {}'s", header.run_id)));
        }
        if let Some(expired) = self.expiry(&header) {
            // No longer resumable: the record is only space now.
            let _ = self.store.remove(run_id).await;
            return Err(expired);
        }
        if header.guest != guest || header.image != image {
            return Err(format!(
                "run {run_id} was paused by another guest build (record {}, this codemode {}); resume it with the codemode that paused it",
                &header.guest[..header.guest.len().min(16)],
                &guest[..guest.len().min(16)]
            ));
        }
        header.check_bounds().map_err(|why| refused(&why))?;
        // The runs hold at most every page of the memory plus 8 bytes per run.
        let cap = (header.memory_bytes as usize).saturating_mul(2) + (1 << 20);
        let runs = memory::decompress(packed, cap).map_err(|why| refused(&why))?;
        Ok(Loaded {
            identity: record::identity(&bytes),
            header,
            runs,
        })
    }

    /// Marks the loaded run consumed and drops its record; refused if another resume was
    /// first. The mark, not the record's absence, is what refuses a second resume: it is
    /// created atomically (exclusively, or by a conditional create) apart from the record and
    /// keeps the claimed record's tag, and a resume checks it before reading any record.
    pub async fn claim(&self, loaded: &Loaded) -> Result<(), String> {
        let run_id = &loaded.header.run_id;
        if !self
            .store
            .claim(run_id, &loaded.identity)
            .await
            .map_err(|e| e.to_string())?
        {
            return Err(already_resumed(run_id));
        }
        // The mark already refuses a second resume; a record left behind is only space.
        if let Err(error) = self.store.remove(run_id).await {
            tracing::warn!("could not remove the record of resumed run {run_id}: {error}");
        }
        self.tidy_quietly().await;
        Ok(())
    }

    /// Why `header`'s run can no longer be resumed, when it was paused longer ago than the
    /// time to live.
    fn expiry(&self, header: &Header) -> Option<String> {
        let paused = std::time::UNIX_EPOCH + Duration::from_millis(header.paused_at_ms);
        let age = std::time::SystemTime::now().duration_since(paused).ok()?;
        (age > self.ttl).then(|| {
            format!(
                "run {} expired: it was paused at {} and paused runs are kept for {} (the state store's time to live, --state-ttl)",
                header.run_id,
                humantime::format_rfc3339_seconds(paused),
                humantime::format_duration(self.ttl)
            )
        })
    }

    /// Refuses `run_id` when its run has already been claimed by a resume.
    async fn refuse_if_claimed(&self, run_id: &str) -> Result<(), String> {
        if self
            .store
            .claimed(run_id)
            .await
            .map_err(|e| e.to_string())?
        {
            return Err(already_resumed(run_id));
        }
        Ok(())
    }
}

/// What of a task the store keeps.
#[derive(Debug, Clone, Copy)]
enum TaskFile {
    /// Its status, result and what codemode needs to go on with it.
    Document,
    /// When the process running it last said it still does.
    Lease,
}

impl TaskFile {
    /// The name it is sealed under (the associated data): a lease does not open as a
    /// document, nor one task's as another's.
    fn sealed_as(self, task_id: &str) -> String {
        match self {
            TaskFile::Document => format!("task/{task_id}"),
            TaskFile::Lease => format!("lease/{task_id}"),
        }
    }

    fn what(self) -> &'static str {
        match self {
            TaskFile::Document => "document",
            TaskFile::Lease => "lease",
        }
    }
}

/// Milliseconds since the Unix epoch (0 before it), as records and references count time.
pub fn unix_ms(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn already_resumed(run_id: &str) -> String {
    format!("run {run_id} was already resumed; a paused run resumes once")
}

/// A record that passed every check but the claim.
#[derive(Debug)]
pub struct Loaded {
    /// The record's header.
    pub header: Header,
    /// The memory's page runs, decompressed.
    pub runs: Vec<u8>,
    /// The record's tag, kept with the run's consumed mark.
    identity: String,
}

#[cfg(test)]
mod tests {
    use super::record::{HostState, SavedBudgets};
    use super::*;

    fn header(run_id: &str, guest: &str, image: &str) -> Header {
        Header {
            run_id: run_id.to_owned(),
            guest: guest.to_owned(),
            image: image.to_owned(),
            paused_at_ms: unix_ms(std::time::SystemTime::now()),
            program: "return 1".to_owned(),
            budgets: SavedBudgets {
                compute_ms: 1,
                wall_ms: 1,
                max_output_bytes: 100,
                memory_mb: 1,
            },
            fuel_spent: 0,
            wall_spent_ns: 0,
            memory_bytes: 1 << 16,
            globals: Vec::new(),
            host: HostState {
                next_call_id: 0,
                calls: Vec::new(),
                pending: Vec::new(),
                timers: Vec::new(),
                ledger: codemode_runtime::ledger::Ledger::new(100),
                logs: Vec::new(),
                pause_on: Default::default(),
                approve_on: Default::default(),
                approved: Default::default(),
                declined: Default::default(),
            },
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("codemode-{name}-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn local(dir: &std::path::Path) -> Durability {
        Durability::with_store(Arc::new(LocalStore::new(dir)), b"k".repeat(32))
    }

    #[tokio::test]
    async fn authentic_records_holding_what_codemode_never_writes_are_refused() {
        let dir = scratch("bounds");
        let durability = local(&dir);
        type Change = Box<dyn Fn(&mut Header)>;
        let cases: Vec<(&str, Change)> = vec![
            (
                "computeMs must be at most 2147483647, got 1000000000000",
                Box::new(|h| h.budgets.compute_ms = 1_000_000_000_000),
            ),
            (
                "computeMs must be a positive number",
                Box::new(|h| h.budgets.compute_ms = 0),
            ),
            (
                "maxWallMs must be at most",
                Box::new(|h| h.budgets.wall_ms = u64::MAX),
            ),
            (
                "memoryMb must be at most 4096",
                Box::new(|h| h.budgets.memory_mb = 1 << 40),
            ),
            (
                "maxOutputBytes must be a safe integer",
                Box::new(|h| h.budgets.max_output_bytes = 1 << 60),
            ),
            (
                "does not fit its budget of 1 MiB",
                Box::new(|h| h.memory_bytes = 2 << 20),
            ),
            ("in whole wasm pages", Box::new(|h| h.memory_bytes = 4096)),
            (
                "beyond the longest delay",
                Box::new(|h| {
                    h.host.timers.push(super::record::SavedTimer {
                        id: 1,
                        remaining_ns: u64::MAX,
                    })
                }),
            ),
        ];
        for (expected, change) in cases {
            let id = new_run_id().unwrap();
            let mut forged = header(&id, "g", "i");
            change(&mut forged);
            // Signed with the right key: only the bounds can refuse it.
            durability.keep(&forged, &[]).await.unwrap();
            let refused = durability.load(&id, "g", "i").await.unwrap_err();
            assert!(
                refused.contains("is refused: it is not authentic"),
                "{refused}"
            );
            assert!(refused.contains(expected), "{expected}: {refused}");
            assert!(
                !durability.store.claimed(&id).await.unwrap(),
                "nothing claimed"
            );
        }
        let id = new_run_id().unwrap();
        durability.keep(&header(&id, "g", "i"), &[]).await.unwrap();
        assert!(durability.load(&id, "g", "i").await.is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_resumed_run_stays_resumed_when_a_copy_of_its_record_is_put_back() {
        let dir = scratch("replay");
        let durability = local(&dir);
        let id = new_run_id().unwrap();
        durability.keep(&header(&id, "g", "i"), &[]).await.unwrap();
        let record = dir.join("runs").join(format!("{id}.run"));
        let copy = std::fs::read(&record).unwrap();
        let loaded = durability.load(&id, "g", "i").await.unwrap();
        durability.claim(&loaded).await.unwrap();
        assert!(!record.exists(), "the record goes with the claim");
        let mark = std::fs::read_to_string(dir.join("consumed").join(&id)).unwrap();
        assert_eq!(
            mark.trim(),
            record::identity(&copy),
            "the mark names the record"
        );

        // The copy put back, and every marker beside it removed: still consumed.
        std::fs::write(&record, &copy).unwrap();
        let _ = std::fs::remove_file(dir.join("runs").join(format!("{id}.resumed")));
        let refused = durability.load(&id, "g", "i").await.unwrap_err();
        assert!(refused.contains("already resumed"), "{refused}");
        let refused = durability.claim(&loaded).await.unwrap_err();
        assert!(refused.contains("already resumed"), "{refused}");

        // A mark an earlier version left beside the record counts as well.
        let old = new_run_id().unwrap();
        durability.keep(&header(&old, "g", "i"), &[]).await.unwrap();
        std::fs::write(dir.join("runs").join(format!("{old}.resumed")), b"").unwrap();
        let refused = durability.load(&old, "g", "i").await.unwrap_err();
        assert!(refused.contains("already resumed"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Sets when `path` was last written to `age` ago.
    fn age(path: &std::path::Path, age: Duration) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - age)
            .unwrap();
    }

    #[tokio::test]
    async fn runs_past_their_time_to_live_are_refused_and_swept_with_their_marks_later() {
        let dir = scratch("ttl");
        let hour = Duration::from_secs(3600);
        let durability = local(&dir).ttl(hour);
        let runs = dir.join("runs");

        // Paused two hours ago: authentic, unclaimed, and expired.
        let old = new_run_id().unwrap();
        let mut paused = header(&old, "g", "i");
        paused.paused_at_ms = (std::time::SystemTime::now() - 2 * hour)
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        durability.keep(&paused, &[]).await.unwrap();
        let refused = durability.load(&old, "g", "i").await.unwrap_err();
        assert!(
            refused.contains(&format!("run {old} expired: it was paused at 20"))
                && refused.contains("kept for 1h"),
            "{refused}"
        );
        assert!(
            !runs.join(format!("{old}.run")).exists(),
            "an expired record is dropped"
        );

        // What a sweep finds: records and marks of several ages, an interrupted write, and
        // names the store never writes.
        let fresh = new_run_id().unwrap();
        let stale = new_run_id().unwrap();
        let (young_mark, old_mark) = (new_run_id().unwrap(), new_run_id().unwrap());
        for id in [&fresh, &stale, &young_mark, &old_mark] {
            durability.keep(&header(id, "g", "i"), &[]).await.unwrap();
        }
        for id in [&young_mark, &old_mark] {
            let loaded = durability.load(id, "g", "i").await.unwrap();
            durability.claim(&loaded).await.unwrap();
        }
        // Notes of whose a run is, and a task's lease, live as long as records (a lease counts
        // as one swept, as task documents do; a note does not).
        let owner = "0000000000000000000000000000000a";
        for id in [&fresh, &stale] {
            durability.store.note_owner(owner, id).await.unwrap();
        }
        let old_note = dir.join("owners").join(format!("{owner}.{stale}"));
        let old_lease = dir.join("tasks").join(format!("{stale}.lease"));
        durability
            .store
            .put_lease(&stale, b"x".to_vec())
            .await
            .unwrap();
        age(&old_note, 2 * hour);
        age(&old_lease, 2 * hour);
        let leftover = runs.join(format!("{stale}.run.4242.tmp"));
        let foreign = [runs.join("notes.txt"), dir.join("consumed").join("README")];
        for path in foreign.iter().chain([&leftover]) {
            std::fs::write(path, b"x").unwrap();
        }
        age(&runs.join(format!("{stale}.run")), 2 * hour);
        age(&leftover, 2 * hour);
        age(&dir.join("consumed").join(&young_mark), hour + hour / 2);
        age(&dir.join("consumed").join(&old_mark), 3 * hour);
        for path in &foreign {
            age(path, 100 * hour);
        }
        // Swept just now (by the claims): not again within a tenth of the time to live.
        assert_eq!(durability.tidy().await.unwrap(), None);
        age(&dir.join("swept"), hour / 10 + Duration::from_secs(1));
        let swept = durability.tidy().await.unwrap();
        assert_eq!(
            swept,
            Some(Swept {
                records: 3,
                marks: 1
            })
        );
        assert!(runs.join(format!("{fresh}.run")).exists());
        assert!(!runs.join(format!("{stale}.run")).exists());
        assert!(!old_note.exists() && !old_lease.exists());
        assert_eq!(
            durability.store.owned(owner).await.unwrap(),
            std::slice::from_ref(&fresh)
        );
        assert!(!leftover.exists());
        assert!(
            dir.join("consumed").join(&young_mark).exists(),
            "kept for twice the TTL"
        );
        assert!(!dir.join("consumed").join(&old_mark).exists());
        for path in &foreign {
            assert!(path.exists(), "{} is not the store's", path.display());
        }
        assert!(durability.load(&fresh, "g", "i").await.is_ok());
        assert!(durability
            .load(&young_mark, "g", "i")
            .await
            .unwrap_err()
            .contains("already resumed"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn an_oversized_record_is_refused_from_its_size() {
        let dir = scratch("oversized");
        let durability = local(&dir);
        let id = new_run_id().unwrap();
        durability.keep(&header(&id, "g", "i"), &[]).await.unwrap();
        let record = dir.join("runs").join(format!("{id}.run"));
        // Sparse: the size says 5 GiB; reading it would take seconds and that much memory.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&record)
            .unwrap()
            .set_len(MAX_RECORD_BYTES + 1)
            .unwrap();
        let started = std::time::Instant::now();
        let refused = durability.load(&id, "g", "i").await.unwrap_err();
        assert!(refused.contains("it was not read"), "{refused}");
        assert!(
            refused.contains(&(MAX_RECORD_BYTES + 1).to_string()),
            "{refused}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        // A record is also refused when its bytes outgrow the cap a store was asked for.
        let store = LocalStore::new(&dir);
        std::fs::write(&record, b"0123456789").unwrap();
        let refused = store.get(&id, 9).await.unwrap_err().to_string();
        assert!(refused.contains("10 bytes, more than the 9"), "{refused}");
        assert_eq!(store.get(&id, 10).await.unwrap().unwrap(), b"0123456789");
        // A symlink or a FIFO at the record's name is not followed, nor waited on.
        std::fs::remove_file(&record).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &record).unwrap();
        let refused = store.get(&id, 1 << 20).await.unwrap_err().to_string();
        assert!(refused.contains("symbolic link"), "{refused}");
        std::fs::remove_file(&record).unwrap();
        let fifo = std::ffi::CString::new(record.to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let refused = store.get(&id, 1 << 20).await.unwrap_err().to_string();
        assert!(refused.contains("not a regular file"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_directory_others_can_write_is_refused_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("open-dir");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = Durability::local(&dir).unwrap_err();
        assert!(matches!(refused, DurabilityError::Store(_)), "{refused:?}");
        let refused = refused.to_string();
        assert!(refused.contains(&dir.display().to_string()), "{refused}");
        assert!(refused.contains("mode 0777"), "{refused}");
        assert!(
            refused.contains(&format!("chmod 700 {}", dir.display())),
            "{refused}"
        );
        let _ = std::fs::remove_dir_all(&dir);

        // Made by codemode: private.
        let made = scratch("made-dir").join("state");
        assert!(Durability::local(&made).is_ok());
        let mode = std::fs::metadata(&made).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let key = std::fs::metadata(made.join("key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(key & 0o777, 0o600);
        let _ = std::fs::remove_dir_all(made.parent().unwrap());
    }

    #[tokio::test]
    async fn a_record_from_another_build_or_another_format_is_refused() {
        let dir = std::env::temp_dir().join(format!("codemode-build-test-{}", std::process::id()));
        let durability = Durability::with_store(Arc::new(LocalStore::new(&dir)), b"k".repeat(32));
        let id = new_run_id().unwrap();
        durability
            .keep(&header(&id, "another-guest", "img"), &[])
            .await
            .unwrap();
        let refused = durability.load(&id, "this-guest", "img").await.unwrap_err();
        assert!(refused.contains("another guest build"), "{refused}");
        let refused = durability
            .load(&id, "another-guest", "other-image")
            .await
            .unwrap_err();
        assert!(refused.contains("another guest build"), "{refused}");
        assert!(durability.load(&id, "another-guest", "img").await.is_ok());

        // A record of a later format, authentic all the same.
        let path = dir.join("runs").join(format!("{id}.run"));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&(record::FORMAT + 1).to_le_bytes());
        let body = bytes.len() - 32;
        let mut mac =
            <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(&b"k".repeat(32)).unwrap();
        hmac::Mac::update(&mut mac, &bytes[..body]);
        let tag = hmac::Mac::finalize(mac).into_bytes();
        bytes[body..].copy_from_slice(&tag);
        std::fs::write(&path, &bytes).unwrap();
        let refused = durability
            .load(&id, "another-guest", "img")
            .await
            .unwrap_err();
        let newer = format!("record format {}", record::FORMAT + 1);
        assert!(refused.contains(&newer), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

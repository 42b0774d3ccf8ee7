//! Durable runs: a run that waits only on *pausing* calls is written down and resumed later,
//! in this process or another.
//!
//! Between `cm_run`/`cm_deliver` calls the guest's stack is empty, so its whole state is its
//! linear memory and its mutable globals. A pause keeps the memory pages that differ from the
//! pre-initialised image ([`memory`]), the globals the pre-initialisation pipeline exports
//! ([`globals`]) and the host's side of the run (open calls, timers, ledger, logs, budgets
//! spent) in one authenticated record ([`record`]), in a [`StateStore`]. A resume checks the
//! record's tag and build, claims it (a record is resumed at most once), restores a fresh
//! instance and delivers the answers.

pub(crate) mod globals;
mod key;
pub(crate) mod memory;
mod object;
pub(crate) mod record;
mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use key::KEY_ENV;
pub use object::ObjectStateStore;
pub use store::{LocalStore, StateStore, StoreError};

pub(crate) use key::new_run_id;
use key::Key;
use record::Header;

/// How long a run keeps waiting, rather than pausing, for a timer due within it.
pub const DEFAULT_PAUSE_THRESHOLD: Duration = Duration::from_secs(1);

/// Where paused runs are kept and the key that authenticates them.
#[derive(Clone)]
pub struct Durability {
    store: Arc<dyn StateStore>,
    key: Key,
    pause_threshold: Duration,
}

impl std::fmt::Debug for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durability")
            .field("store", &self.store.describe())
            .field("pause_threshold", &self.pause_threshold)
            .finish()
    }
}

impl Durability {
    /// Records under the local directory `dir`, authenticated with `CODEMODE_STATE_KEY` or
    /// with `dir/key` (created `0600` on first use).
    pub fn local(dir: impl Into<PathBuf>) -> Result<Self, String> {
        let dir = dir.into();
        let key = Key::load(Some(&dir))?;
        Ok(Self::with_key(Arc::new(LocalStore::new(dir)), key))
    }

    /// Records in the S3-compatible store `url` names (`s3://bucket/prefix`; see
    /// [`ObjectStateStore`]), authenticated with `CODEMODE_STATE_KEY`, else with the key of
    /// the default state directory (a fleet shares the environment's key).
    pub fn s3(url: &str) -> Result<Self, String> {
        let store = ObjectStateStore::s3(url)?;
        let key = Key::load(Self::default_dir().as_deref())?;
        Ok(Self::with_key(Arc::new(store), key))
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
        }
    }

    /// A run with a timer due within `threshold` waits for it instead of pausing.
    pub fn pause_threshold(mut self, threshold: Duration) -> Self {
        self.pause_threshold = threshold;
        self
    }

    pub(crate) fn threshold(&self) -> Duration {
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

    /// Writes a paused run down; returns the record's size.
    pub(crate) async fn keep(&self, header: &Header, runs: &[u8]) -> Result<u64, String> {
        let packed = memory::compress(runs)?;
        let record = record::encode(header, &packed, self.key.bytes())?;
        let bytes = record.len() as u64;
        self.store.put(&header.run_id, record).await.map_err(|e| {
            format!(
                "could not keep the paused run in {}: {e}",
                self.store.describe()
            )
        })?;
        Ok(bytes)
    }

    /// Reads and checks run `run_id`'s record: authentic, from this build, not yet resumed.
    /// Returns its header and its memory runs, decompressed.
    pub(crate) async fn load(
        &self,
        run_id: &str,
        guest: &str,
        image: &str,
    ) -> Result<(Header, Vec<u8>), String> {
        if !key::is_run_id(run_id) {
            return Err(format!(
                "\"{}\" is not a run id (32 hex digits, as a pause reports)",
                run_id.escape_debug()
            ));
        }
        let where_ = self.store.describe();
        let found = self.store.get(run_id).await.map_err(|e| e.to_string())?;
        let Some(bytes) = found else {
            if self
                .store
                .claimed(run_id)
                .await
                .map_err(|e| e.to_string())?
            {
                return Err(format!(
                    "run {run_id} was already resumed; a paused run resumes once"
                ));
            }
            return Err(format!("no paused run {run_id} in {where_}"));
        };
        let (header, packed) = record::decode(&bytes, self.key.bytes())
            .map_err(|why| format!("the record of run {run_id} is refused: {why}"))?;
        if header.run_id != run_id {
            return Err(format!(
                "the record of run {run_id} is refused: it is run {}'s",
                header.run_id
            ));
        }
        if header.guest != guest || header.image != image {
            return Err(format!(
                "run {run_id} was paused by another guest build (record {}, this codemode {}); resume it with the codemode that paused it",
                &header.guest[..header.guest.len().min(16)],
                &guest[..guest.len().min(16)]
            ));
        }
        // The runs hold at most every page of the memory plus 8 bytes per run.
        let cap = (header.memory_bytes as usize).saturating_mul(2) + (1 << 20);
        let runs = memory::decompress(packed, cap)
            .map_err(|e| format!("the record of run {run_id} is refused: {e}"))?;
        Ok((header, runs))
    }

    /// Marks run `run_id` resumed and drops its record; refused if another resume was first.
    pub(crate) async fn claim(&self, run_id: &str) -> Result<(), String> {
        if !self.store.claim(run_id).await.map_err(|e| e.to_string())? {
            return Err(format!(
                "run {run_id} was already resumed; a paused run resumes once"
            ));
        }
        // The tombstone already refuses a second resume; a record left behind is only space.
        if let Err(error) = self.store.remove(run_id).await {
            tracing::warn!(
                "codemode: could not remove the record of resumed run {run_id}: {error}"
            );
        }
        Ok(())
    }
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
            paused_at_ms: 0,
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
            },
        }
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
        assert!(refused.contains("record format 2"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

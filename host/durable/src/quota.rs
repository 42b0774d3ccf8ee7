//! How much of the state store paused runs may take: in all, and per client of a server.
//!
//! A pause is admitted when the records already kept, the records this process is writing
//! and the new one fit the store's quota, and, when the pause is made for a known client
//! ([`pausing_for`]), when that client's records and the new one fit its quota. Records are
//! counted by listing the store (stopping once past the quota, so the cost is bounded by it);
//! a client's by the notes of whose each run is (`StateStore::note_owner`), counting only
//! notes whose record is still kept. The count is not a lock: processes sharing a store and
//! pausing at the same moment each see the others' records only once written, so a store can
//! pass its quota by the records being written at the moment it is full, each at most a
//! record's size (the bound: quota + the sizes of the pauses that overlap in time across the
//! fleet). A pause that does not fit is not written: its run goes on, and the calls it would
//! have paused at fail with the reason (`run/mod.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use super::principal::Principal;
use super::store::StateStore;

/// The most bytes the paused runs of a store may take unless set otherwise: 4 GiB.
pub const DEFAULT_STATE_QUOTA_BYTES: u64 = 4 << 30;

/// The most bytes the paused runs of one client of a server may take unless set otherwise:
/// 1 GiB.
pub const DEFAULT_CLIENT_QUOTA_BYTES: u64 = 1 << 30;

tokio::task_local! {
    /// The client a server runs the current call for: whose the runs it pauses are.
    static PAUSING_FOR: Principal;
}

/// Runs `work` (a server's call of `run_code`) on behalf of `principal`: the runs it pauses
/// count against that client's quota. A run is polled in the task of the call that started
/// it (the runtime spawns no task for it), so the principal reaches the pause without the
/// code runtime's contract carrying servers' clients.
pub async fn pausing_for<F: Future>(principal: Principal, work: F) -> F::Output {
    PAUSING_FOR.scope(principal, work).await
}

/// The client the current call runs for, inside [`pausing_for`].
pub fn current_principal() -> Option<Principal> {
    PAUSING_FOR.try_with(Clone::clone).ok()
}

/// The quotas a store's pauses are held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// All paused runs of the store.
    pub store: u64,
    /// The paused runs of one client, where the pause is made for one.
    pub client: Option<u64>,
}

impl Default for Quota {
    fn default() -> Self {
        Self {
            store: DEFAULT_STATE_QUOTA_BYTES,
            client: Some(DEFAULT_CLIENT_QUOTA_BYTES),
        }
    }
}

/// Why a paused run was not written down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeepError {
    /// It does not fit a quota: the run goes on without pausing. Says which quota and what
    /// to do.
    OverQuota(String),
    /// Anything else: the run fails.
    Failed(String),
}

impl From<String> for KeepError {
    fn from(message: String) -> Self {
        KeepError::Failed(message)
    }
}

/// The records this process is writing, not yet listed by the store.
#[derive(Debug, Default)]
pub struct Writing {
    total: u64,
    by_owner: HashMap<String, u64>,
}

/// A record being written, counted in [`Writing`] until dropped.
pub struct Reservation {
    writing: Arc<Mutex<Writing>>,
    bytes: u64,
    owner: Option<String>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        writing.total = writing.total.saturating_sub(self.bytes);
        if let Some(owner) = &self.owner {
            if let Some(held) = writing.by_owner.get_mut(owner) {
                *held = held.saturating_sub(self.bytes);
                if *held == 0 {
                    writing.by_owner.remove(owner);
                }
            }
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

/// Admits a record of `bytes` for `owner` (a principal's owner id) under `quota`, or says
/// which quota it does not fit. The reservation counts it for other pauses of this process
/// until it is dropped, once the record is written.
pub async fn admit(
    store: &dyn StateStore,
    quota: Quota,
    writing: &Arc<Mutex<Writing>>,
    bytes: u64,
    owner: Option<&str>,
) -> Result<Reservation, KeepError> {
    let reservation = {
        let mut held = writing.lock().unwrap_or_else(|p| p.into_inner());
        held.total = held.total.saturating_add(bytes);
        if let Some(owner) = owner {
            let mine = held.by_owner.entry(owner.to_owned()).or_default();
            *mine = mine.saturating_add(bytes);
        }
        Reservation {
            writing: writing.clone(),
            bytes,
            owner: owner.map(str::to_owned),
        }
    };
    // What else this process is writing, read after the listing so that a record written
    // meanwhile is counted once listed or still held here (at worst twice: refused early).
    let others = |owner: Option<&str>| {
        let held = writing.lock().unwrap_or_else(|p| p.into_inner());
        let total = match owner {
            None => held.total,
            Some(owner) => held.by_owner.get(owner).copied().unwrap_or(0),
        };
        total.saturating_sub(bytes)
    };
    let room = quota.store.saturating_sub(bytes);
    let records = store
        .records(room)
        .await
        .map_err(|e| KeepError::Failed(format!("could not count the paused runs: {e}")))?;
    let used = records.total.saturating_add(others(None));
    if !records.complete || used.saturating_add(bytes) > quota.store {
        return Err(KeepError::OverQuota(format!(
            "the run could not pause: the state store's paused runs take {}{} and this one needs {} more, past the store's quota of {} (--state-quota-mb); answer or abandon paused runs (they expire after --state-ttl), or raise the quota",
            if records.complete { "" } else { "more than " },
            mib(used),
            mib(bytes),
            mib(quota.store),
        )));
    }
    if let (Some(owner), Some(limit)) = (owner, quota.client) {
        let owned = store
            .owned(owner)
            .await
            .map_err(|e| KeepError::Failed(format!("could not count the paused runs: {e}")))?;
        let kept: u64 = owned
            .iter()
            .filter_map(|run_id| records.sizes.get(run_id))
            .sum();
        let used = kept.saturating_add(others(Some(owner)));
        if used.saturating_add(bytes) > limit {
            return Err(KeepError::OverQuota(format!(
                "the run could not pause: this client's paused runs take {} and this one needs {} more, past the quota of {} per client (--state-quota-per-client-mb); answer or abandon this client's paused runs (they expire after --state-ttl), or raise the quota",
                mib(used),
                mib(bytes),
                mib(limit),
            )));
        }
    }
    Ok(reservation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LocalStore;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("codemode-quota-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    const ALICE: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const BOB: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn run(n: u8) -> String {
        format!("{:032x}", n)
    }

    #[tokio::test]
    async fn pauses_fit_the_store_and_their_client_or_are_refused_saying_which() {
        let dir = scratch("admit");
        let store = LocalStore::new(&dir);
        store.check().unwrap();
        let writing = Arc::default();
        let quota = Quota {
            store: 1_000,
            client: Some(400),
        };
        // Alice pauses 300 bytes: it fits both.
        let admitted = admit(&store, quota, &writing, 300, Some(ALICE)).await;
        assert!(admitted.is_ok());
        drop(admitted);
        store.note_owner(ALICE, &run(1)).await.unwrap();
        store.put(&run(1), vec![0; 300]).await.unwrap();

        // A record larger than a quota on its own never fits it.
        for (bytes, owner) in [(401, Some(ALICE)), (1_001, None)] {
            let admitted = admit(&store, quota, &writing, bytes, owner).await;
            assert!(matches!(admitted, Err(KeepError::OverQuota(_))), "{bytes}");
        }
        // 200 more of Alice's would take her past 400.
        let Err(KeepError::OverQuota(refused)) =
            admit(&store, quota, &writing, 200, Some(ALICE)).await
        else {
            panic!("over the client's quota");
        };
        assert!(refused.contains("this client's paused runs"), "{refused}");
        assert!(refused.contains("--state-quota-per-client-mb"), "{refused}");
        // Bob has room; without a client only the store counts.
        assert!(admit(&store, quota, &writing, 200, Some(BOB)).await.is_ok());
        assert!(admit(&store, quota, &writing, 600, None).await.is_ok());

        // A record being written counts for the others until it is written.
        let held = admit(&store, quota, &writing, 400, Some(BOB))
            .await
            .unwrap();
        let Err(KeepError::OverQuota(refused)) = admit(&store, quota, &writing, 400, None).await
        else {
            panic!("over the store's quota with what is being written");
        };
        assert!(refused.contains("--state-quota-mb"), "{refused}");
        drop(held);
        assert!(admit(&store, quota, &writing, 400, None).await.is_ok());

        // Alice's run resumed (its record gone): her note no longer counts.
        store.remove(&run(1)).await.unwrap();
        assert!(admit(&store, quota, &writing, 400, Some(ALICE))
            .await
            .is_ok());

        // Past the store's quota, the listing stops early and says so.
        for n in 2..6 {
            store.put(&run(n), vec![0; 300]).await.unwrap();
        }
        let records = store.records(500).await.unwrap();
        assert!(!records.complete && records.total > 500);
        let Err(KeepError::OverQuota(refused)) = admit(&store, quota, &writing, 1, None).await
        else {
            panic!("over the store's quota");
        };
        assert!(refused.contains("more than"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Where paused runs are kept: a seam with a local directory behind it by default.
//!
//! A store keeps a record per run id and a consumed mark per resumed run. Claiming a run
//! creates its mark only if none exists (atomically), which is what makes a run resumable at
//! most once, also across processes sharing the store; a resume refuses a run with a mark
//! before it reads the record, so a record left behind or put back is never resumed.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::SystemTime;

use futures::future::BoxFuture;

use super::key::is_run_id;
use super::private::{self, Access, PrivateDir};

/// A failure of the storage itself, or a record it refused to read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// Keeps paused-run records by run id, and the consumed marks of resumed runs.
pub trait StateStore: Send + Sync {
    /// Where records go, for messages.
    fn describe(&self) -> String;
    /// Keeps `record` as run `run_id`'s.
    fn put(&self, run_id: &str, record: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Run `run_id`'s record, if kept. A record larger than `max_bytes` is refused from its
    /// size, before its bytes are read.
    fn get(
        &self,
        run_id: &str,
        max_bytes: u64,
    ) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>>;
    /// Marks `run_id` consumed, keeping `identity` (what names the claimed record) with the
    /// mark; false when it already was.
    fn claim(&self, run_id: &str, identity: &str) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// Whether `run_id` was claimed.
    fn claimed(&self, run_id: &str) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// Drops run `run_id`'s record (its consumed mark stays).
    fn remove(&self, run_id: &str) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Keeps `document` as task `task_id`'s, replacing the one kept before.
    fn put_task(&self, task_id: &str, document: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Task `task_id`'s document, if kept; one larger than [`MAX_TASK_BYTES`] is refused.
    fn get_task(&self, task_id: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>>;
    /// Keeps `lease` as task `task_id`'s lease (renewed by the process running the task),
    /// replacing the one kept before.
    fn put_lease(&self, task_id: &str, lease: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Task `task_id`'s lease, if kept; one larger than [`MAX_LEASE_BYTES`] is refused.
    fn get_lease(&self, task_id: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>>;
    /// The records kept and their sizes, listed until their sum passes `stop_past` (past the
    /// room a quota leaves, counting on says nothing more).
    fn records(&self, stop_past: u64) -> BoxFuture<'_, Result<Records, StoreError>>;
    /// Notes that the client named `owner` (a [`super::Principal`]'s owner id) paused run
    /// `run_id`, for the client's quota.
    fn note_owner(&self, owner: &str, run_id: &str) -> BoxFuture<'_, Result<(), StoreError>>;
    /// The run ids noted for `owner`. A note outlives its record (a resume does not know
    /// whose run it claims) until a sweep drops it, so only those whose record is still
    /// kept count.
    fn owned(&self, owner: &str) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;
    /// When a sweep last ran on this store, by any process sharing it.
    fn last_sweep(&self) -> BoxFuture<'_, Result<Option<SystemTime>, StoreError>>;
    /// Drops the records and consumed marks last written before their `cutoffs` (and what
    /// interrupted writes left behind), then notes the sweep's time for
    /// [`StateStore::last_sweep`]. Only names the store itself writes are touched.
    fn sweep(&self, cutoffs: Cutoffs) -> BoxFuture<'_, Result<Swept, StoreError>>;
    /// Keeps `sealed` as the credentials of the upstream server `name` (letters, digits, `_`,
    /// `-`), replacing any; never swept.
    fn put_credentials(&self, name: &str, sealed: Vec<u8>)
        -> BoxFuture<'_, Result<(), StoreError>>;
    /// The credentials of server `name`, if kept; larger than [`MAX_CREDENTIALS_BYTES`] is
    /// refused.
    fn get_credentials(&self, name: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>>;
    /// Forgets server `name`'s credentials; whether there were any.
    fn remove_credentials(&self, name: &str) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// The names of the servers with credentials kept.
    fn credential_names(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;
}

/// The most bytes an upstream server's kept credentials may take (tokens and their metadata
/// are a few kilobytes).
pub const MAX_CREDENTIALS_BYTES: u64 = 1 << 20;

/// Whether `name` can name credentials: it becomes a file or object name.
fn is_credentials_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Refuses a name that cannot name credentials.
pub(crate) fn credentials_name(name: &str) -> Result<&str, StoreError> {
    if is_credentials_name(name) {
        Ok(name)
    } else {
        Err(StoreError(format!(
            "{name:?} cannot name credentials (letters, digits, `_` and `-` only)"
        )))
    }
}

/// The most bytes a task's document may take: its result is a `run_code` result, which its
/// output budget bounds far below this.
pub const MAX_TASK_BYTES: u64 = 256 << 20;

/// The most bytes a task's lease may take: a timestamp and a period, sealed.
pub const MAX_LEASE_BYTES: u64 = 4 << 10;

/// The records a store holds, as far as [`StateStore::records`] counted them.
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// Each record's size, by run id.
    pub sizes: std::collections::HashMap<String, u64>,
    /// Their sum.
    pub total: u64,
    /// False when the count stopped early, past the sum it was asked to look for.
    pub complete: bool,
}

impl Records {
    /// Counts a record of `bytes`; false once the sum is past `stop_past`.
    pub fn count(&mut self, run_id: &str, bytes: u64, stop_past: u64) -> bool {
        self.sizes.insert(run_id.to_owned(), bytes);
        self.total = self.total.saturating_add(bytes);
        self.total <= stop_past
    }

    /// The run id of a name under `runs/` that is a record, `<id>.run`.
    pub fn record_id(name: &str) -> Option<&str> {
        name.strip_suffix(".run").filter(|id| is_run_id(id))
    }
}

/// What a sweep drops: whatever was last written before its kind's cutoff.
#[derive(Debug, Clone, Copy)]
pub struct Cutoffs {
    /// Records, and leftovers of interrupted writes.
    pub records: SystemTime,
    /// Consumed marks.
    pub marks: SystemTime,
}

/// What a sweep dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Records (and leftovers of interrupted writes) removed.
    pub records: u64,
    /// Consumed marks removed.
    pub marks: u64,
}

/// What a file of the store is, from its name; `None` for a name the store never writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    Record,
    Mark,
    /// Whose a paused run is: lives as long as a record, and is not one.
    Note,
}

impl Kept {
    /// A name under `runs/` or `tasks/`: `<id>.run`, a task's `<id>.task` or `<id>.lease`, a
    /// mark of earlier versions `<id>.resumed`, or an interrupted write's `<id>.run.<pid>.tmp`
    /// (or `.task.<pid>.tmp`, `.lease.<pid>.tmp`). A task counts as a record: it lives as long.
    pub fn of_run_file(name: &str) -> Option<Self> {
        let (id, rest) = name.split_once('.')?;
        if !is_run_id(id) {
            return None;
        }
        match rest {
            "run" | "task" | "lease" => Some(Kept::Record),
            "resumed" => Some(Kept::Mark),
            _ => {
                let pid = ["run.", "task.", "lease."]
                    .iter()
                    .find_map(|kind| rest.strip_prefix(kind))?
                    .strip_suffix(".tmp")?;
                (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(Kept::Record)
            }
        }
    }

    /// A note of whose a run is, `<owner id>.<run id>` (a local store's `owners/`): it lives
    /// as long as the record it notes.
    pub fn of_owner_note(name: &str) -> Option<Self> {
        let (owner, run_id) = name.split_once('.')?;
        (is_run_id(owner) && is_run_id(run_id)).then_some(Kept::Note)
    }

    /// Whether a file of this kind last written `at` is past `cutoffs`.
    pub fn is_past(self, at: SystemTime, cutoffs: &Cutoffs) -> bool {
        at < match self {
            Kept::Record | Kept::Note => cutoffs.records,
            Kept::Mark => cutoffs.marks,
        }
    }
}

/// What a file of one directory of the store is, from its name.
type KindOf = fn(&str) -> Option<Kept>;

impl Swept {
    pub(crate) fn count(&mut self, kind: Kept) {
        match kind {
            Kept::Record => self.records += 1,
            Kept::Mark => self.marks += 1,
            Kept::Note => {}
        }
    }
}

/// Records as files `<dir>/runs/<id>.run`; consumed marks as `<dir>/consumed/<id>`, holding
/// the claimed record's tag; tasks as `<dir>/tasks/<id>.task` and `<id>.lease`; whose a
/// paused run is as an empty `<dir>/owners/<owner id>.<run id>`.
///
/// The directory and its subdirectories are used only when they belong to the user and only
/// the user can write them (`fstat` of the descriptor every operation then goes through), and
/// a record only when it is a regular file of the user's, no larger than the cap; see
/// `private.rs`. Marks live apart from the records, so putting a copy of a record back (and
/// removing anything beside it) does not make a resumed run resumable again. Marks written by
/// earlier versions, `<dir>/runs/<id>.resumed`, count too.
#[derive(Debug, Clone)]
pub struct LocalStore {
    dir: PathBuf,
}

const RUNS: &str = "runs";
const CONSUMED: &str = "consumed";
const TASKS: &str = "tasks";
const OWNERS: &str = "owners";
const CREDENTIALS: &str = "credentials";
/// Written at the end of each sweep; its modification time is the sweep's.
pub const SWEPT: &str = "swept";

impl LocalStore {
    /// A store under `dir` (created private to the user on first write, and checked at every
    /// use).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Creates the state directory if missing (`0700`) and checks it, and its subdirectories
    /// where they exist, belong to the user and are written by no one else.
    pub fn check(&self) -> Result<(), StoreError> {
        let state = self.state(true)?.ok_or_else(|| self.vanished())?;
        for sub in [RUNS, CONSUMED] {
            state.sub(sub, false).map_err(StoreError)?;
        }
        Ok(())
    }

    fn vanished(&self) -> StoreError {
        StoreError(format!(
            "the state directory {} vanished while in use",
            self.dir.display()
        ))
    }

    fn state(&self, create: bool) -> Result<Option<PrivateDir>, StoreError> {
        PrivateDir::open(&self.dir, create).map_err(StoreError)
    }

    /// The subdirectory `name`; `None` when it (or the state directory) does not exist and
    /// `create` is false.
    fn sub(&self, name: &str, create: bool) -> Result<Option<PrivateDir>, StoreError> {
        match self.state(create)? {
            Some(state) => state.sub(name, create).map_err(StoreError),
            None => Ok(None),
        }
    }
}

fn io_error(what: &str, dir: &PrivateDir, name: &str, error: &std::io::Error) -> StoreError {
    StoreError(format!(
        "cannot {what} {}: {}",
        dir.path(name).display(),
        private::why(error)
    ))
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError(format!("the storage task failed: {e}")))?
}

/// Refuses a record of `bytes` bytes when it is over `max_bytes`, saying where it is.
pub fn too_large(run_id: &str, at: &str, bytes: u64, max_bytes: u64) -> StoreError {
    StoreError(format!(
        "the record of run {run_id} is refused: {at} is {bytes} bytes, more than the {max_bytes} a paused-run record may hold; it was not read"
    ))
}

impl LocalStore {
    /// Writes `bytes` as `sub/name`: under a new name, then renamed into place, so that a
    /// reader sees the whole file or none.
    async fn write(
        &self,
        sub: &'static str,
        name: String,
        bytes: Vec<u8>,
    ) -> Result<(), StoreError> {
        let store = self.clone();
        blocking(move || {
            let dir = store.sub(sub, true)?.ok_or_else(|| store.vanished())?;
            let tmp = format!("{name}.{}.tmp", std::process::id());
            let _ = dir.remove(&tmp);
            let written = dir
                .create_new(&tmp, 0o600)
                .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_all()))
                .and_then(|()| dir.rename(&tmp, &name))
                .and_then(|()| dir.sync());
            if let Err(error) = written {
                let _ = dir.remove(&tmp);
                return Err(io_error("write", &dir, &name, &error));
            }
            Ok(())
        })
        .await
    }

    /// Reads `sub/<run_id>.<suffix>` when it is a regular file of the user's within
    /// `max_bytes` (refused from its size, unread, when larger).
    async fn read(
        &self,
        sub: &'static str,
        run_id: String,
        suffix: &'static str,
        max_bytes: u64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let store = self.clone();
        blocking(move || {
            let Some(runs) = store.sub(sub, false)? else {
                return Ok(None);
            };
            let name = format!("{run_id}.{suffix}");
            let file = match runs.open_read(&name) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io_error("read", &runs, &name, &e)),
            };
            let at = runs.path(&name).display().to_string();
            let len = private::checked_file(&file, &runs, &name, "the record", Access::OwnerWrites)
                .map_err(StoreError)?;
            if len > max_bytes {
                return Err(too_large(&run_id, &at, len, max_bytes));
            }
            // At most one byte past the cap, should the file grow after its size was read.
            let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
            file.take(max_bytes.saturating_add(1))
                .read_to_end(&mut bytes)
                .map_err(|e| io_error("read", &runs, &name, &e))?;
            if bytes.len() as u64 > max_bytes {
                return Err(too_large(&run_id, &at, bytes.len() as u64, max_bytes));
            }
            Ok(Some(bytes))
        })
        .await
    }
}

impl StateStore for LocalStore {
    fn describe(&self) -> String {
        self.dir.display().to_string()
    }

    fn put_credentials(
        &self,
        name: &str,
        sealed: Vec<u8>,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let name = credentials_name(name).map(str::to_owned);
        Box::pin(async move { self.write(CREDENTIALS, name?, sealed).await })
    }

    fn get_credentials(&self, name: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>> {
        let name = credentials_name(name).map(str::to_owned);
        let store = self.clone();
        Box::pin(async move {
            let name = name?;
            blocking(move || {
                let Some(dir) = store.sub(CREDENTIALS, false)? else {
                    return Ok(None);
                };
                let file = match dir.open_read(&name) {
                    Ok(file) => file,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(io_error("read", &dir, &name, &e)),
                };
                let len = private::checked_file(
                    &file,
                    &dir,
                    &name,
                    "a credentials file",
                    Access::OwnerOnly,
                )
                .map_err(StoreError)?;
                if len > MAX_CREDENTIALS_BYTES {
                    return Err(StoreError(format!(
                        "{} is {len} bytes, more than credentials take; it was not read",
                        dir.path(&name).display()
                    )));
                }
                let mut bytes = Vec::new();
                file.take(MAX_CREDENTIALS_BYTES)
                    .read_to_end(&mut bytes)
                    .map_err(|e| io_error("read", &dir, &name, &e))?;
                Ok(Some(bytes))
            })
            .await
        })
    }

    fn remove_credentials(&self, name: &str) -> BoxFuture<'_, Result<bool, StoreError>> {
        let name = credentials_name(name).map(str::to_owned);
        let store = self.clone();
        Box::pin(async move {
            let name = name?;
            blocking(move || {
                let Some(dir) = store.sub(CREDENTIALS, false)? else {
                    return Ok(false);
                };
                match dir.remove(&name) {
                    Ok(()) => {
                        let _ = dir.sync();
                        Ok(true)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                    Err(e) => Err(io_error("remove", &dir, &name, &e)),
                }
            })
            .await
        })
    }

    fn credential_names(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        let store = self.clone();
        Box::pin(blocking(move || {
            let Some(dir) = store.sub(CREDENTIALS, false)? else {
                return Ok(Vec::new());
            };
            let files = dir.files().map_err(|e| io_error("list", &dir, "", &e))?;
            Ok(files
                .into_iter()
                .map(|file| file.name)
                .filter(|name| is_credentials_name(name))
                .collect())
        }))
    }

    fn put(&self, run_id: &str, record: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.write(RUNS, format!("{run_id}.run"), record))
    }

    fn get(
        &self,
        run_id: &str,
        max_bytes: u64,
    ) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(self.read(RUNS, run_id.to_owned(), "run", max_bytes))
    }

    fn put_task(&self, task_id: &str, document: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.write(TASKS, format!("{task_id}.task"), document))
    }

    fn get_task(&self, task_id: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(self.read(TASKS, task_id.to_owned(), "task", MAX_TASK_BYTES))
    }

    fn put_lease(&self, task_id: &str, lease: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.write(TASKS, format!("{task_id}.lease"), lease))
    }

    fn get_lease(&self, task_id: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(self.read(TASKS, task_id.to_owned(), "lease", MAX_LEASE_BYTES))
    }

    fn records(&self, stop_past: u64) -> BoxFuture<'_, Result<Records, StoreError>> {
        let store = self.clone();
        Box::pin(blocking(move || {
            let mut records = Records {
                complete: true,
                ..Records::default()
            };
            let Some(runs) = store.sub(RUNS, false)? else {
                return Ok(records);
            };
            let files = runs.files().map_err(|e| io_error("list", &runs, "", &e))?;
            for file in files {
                let Some(id) = Records::record_id(&file.name) else {
                    continue;
                };
                if !records.count(id, file.bytes, stop_past) {
                    records.complete = false;
                    break;
                }
            }
            Ok(records)
        }))
    }

    fn note_owner(&self, owner: &str, run_id: &str) -> BoxFuture<'_, Result<(), StoreError>> {
        let store = self.clone();
        let name = format!("{owner}.{run_id}");
        Box::pin(blocking(move || {
            let owners = store.sub(OWNERS, true)?.ok_or_else(|| store.vanished())?;
            match owners.create_new(&name, 0o600) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_error("create", &owners, &name, &e)),
            }
            owners.sync().map_err(|e| io_error("sync", &owners, "", &e))
        }))
    }

    fn owned(&self, owner: &str) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        let store = self.clone();
        let prefix = format!("{owner}.");
        Box::pin(blocking(move || {
            let Some(owners) = store.sub(OWNERS, false)? else {
                return Ok(Vec::new());
            };
            let names = owners
                .names()
                .map_err(|e| io_error("list", &owners, "", &e))?;
            Ok(names
                .into_iter()
                .filter_map(|name| {
                    let run_id = name.strip_prefix(&prefix)?;
                    is_run_id(run_id).then(|| run_id.to_owned())
                })
                .collect())
        }))
    }

    fn claim(&self, run_id: &str, identity: &str) -> BoxFuture<'_, Result<bool, StoreError>> {
        let store = self.clone();
        let run_id = run_id.to_owned();
        let identity = identity.to_owned();
        Box::pin(blocking(move || {
            if let Some(runs) = store.sub(RUNS, false)? {
                let legacy = format!("{run_id}.resumed");
                if runs
                    .exists(&legacy)
                    .map_err(|e| io_error("read", &runs, &legacy, &e))?
                {
                    return Ok(false);
                }
            }
            let consumed = store.sub(CONSUMED, true)?.ok_or_else(|| store.vanished())?;
            // The exclusive create is the claim: of two racing resumes, one creates the mark.
            let mut mark = match consumed.create_new(&run_id, 0o600) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
                Err(e) => return Err(io_error("create", &consumed, &run_id, &e)),
            };
            mark.write_all(format!("{identity}\n").as_bytes())
                .and_then(|()| mark.sync_all())
                .and_then(|()| consumed.sync())
                .map_err(|e| io_error("write", &consumed, &run_id, &e))?;
            Ok(true)
        }))
    }

    fn claimed(&self, run_id: &str) -> BoxFuture<'_, Result<bool, StoreError>> {
        let store = self.clone();
        let run_id = run_id.to_owned();
        Box::pin(blocking(move || {
            let Some(state) = store.state(false)? else {
                return Ok(false);
            };
            for (sub, name) in [
                (CONSUMED, run_id.clone()),
                (RUNS, format!("{run_id}.resumed")),
            ] {
                if let Some(dir) = state.sub(sub, false).map_err(StoreError)? {
                    if dir
                        .exists(&name)
                        .map_err(|e| io_error("read", &dir, &name, &e))?
                    {
                        return Ok(true);
                    }
                }
            }
            Ok(false)
        }))
    }

    fn remove(&self, run_id: &str) -> BoxFuture<'_, Result<(), StoreError>> {
        let store = self.clone();
        let name = format!("{run_id}.run");
        Box::pin(blocking(move || {
            let Some(runs) = store.sub(RUNS, false)? else {
                return Ok(());
            };
            match runs.remove(&name).and_then(|()| runs.sync()) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io_error("remove", &runs, &name, &e)),
            }
        }))
    }

    fn last_sweep(&self) -> BoxFuture<'_, Result<Option<SystemTime>, StoreError>> {
        let store = self.clone();
        Box::pin(blocking(move || {
            let Some(state) = store.state(false)? else {
                return Ok(None);
            };
            state
                .modified(SWEPT)
                .map_err(|e| io_error("read", &state, SWEPT, &e))
        }))
    }

    fn sweep(&self, cutoffs: Cutoffs) -> BoxFuture<'_, Result<Swept, StoreError>> {
        let store = self.clone();
        Box::pin(blocking(move || {
            let Some(state) = store.state(false)? else {
                return Ok(Swept::default());
            };
            let mut swept = Swept::default();
            let subs: [(&str, KindOf); 4] = [
                (RUNS, Kept::of_run_file),
                (TASKS, Kept::of_run_file),
                (OWNERS, Kept::of_owner_note),
                (CONSUMED, |name| is_run_id(name).then_some(Kept::Mark)),
            ];
            for (sub, kind_of) in subs {
                let Some(dir) = state.sub(sub, false).map_err(StoreError)? else {
                    continue;
                };
                let files = dir.files().map_err(|e| {
                    StoreError(format!("cannot list {}: {e}", dir.path("").display()))
                })?;
                for file in files {
                    let name = file.name;
                    let Some(kind) = kind_of(&name).filter(|k| k.is_past(file.modified, &cutoffs))
                    else {
                        continue;
                    };
                    match dir.remove(&name) {
                        Ok(()) => swept.count(kind),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(io_error("remove", &dir, &name, &e)),
                    }
                }
                dir.sync().map_err(|e| io_error("sync", &dir, "", &e))?;
            }
            // Renamed into place, so that its time is this sweep's even when one exists.
            let tmp = format!("{SWEPT}.{}.tmp", std::process::id());
            let _ = state.remove(&tmp);
            state
                .create_new(&tmp, 0o600)
                .and_then(|_| state.rename(&tmp, SWEPT))
                .map_err(|e| {
                    let _ = state.remove(&tmp);
                    io_error("write", &state, SWEPT, &e)
                })?;
            Ok(swept)
        }))
    }
}

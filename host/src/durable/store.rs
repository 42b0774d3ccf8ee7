//! Where paused runs are kept: a seam with a local directory behind it by default.
//!
//! A store keeps a record per run id and a tombstone per resumed run. Claiming a run creates
//! its tombstone only if none exists (atomically), which is what makes a record resumable at
//! most once, also across processes sharing the store.

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;

/// A failure of the storage itself (not of a record).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// Keeps paused-run records by run id, and the tombstones of resumed runs.
pub trait StateStore: Send + Sync {
    /// Where records go, for messages.
    fn describe(&self) -> String;
    /// Keeps `record` as run `run_id`'s.
    fn put(&self, run_id: &str, record: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Run `run_id`'s record, if kept.
    fn get(&self, run_id: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>>;
    /// Marks `run_id` resumed; false when it already was.
    fn claim(&self, run_id: &str) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// Whether `run_id` was claimed.
    fn claimed(&self, run_id: &str) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// Drops run `run_id`'s record (its tombstone stays).
    fn remove(&self, run_id: &str) -> BoxFuture<'_, Result<(), StoreError>>;
}

/// Records as files under `<dir>/runs/`: `<id>.run` and the tombstone `<id>.resumed`.
#[derive(Debug, Clone)]
pub struct LocalStore {
    dir: PathBuf,
}

impl LocalStore {
    /// A store under `dir` (created, private to the user, on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, run_id: &str, suffix: &str) -> PathBuf {
        self.dir.join("runs").join(format!("{run_id}.{suffix}"))
    }
}

fn io_error(what: &str, path: &Path, error: std::io::Error) -> StoreError {
    StoreError(format!("cannot {what} {}: {error}", path.display()))
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError(format!("the storage task failed: {e}")))?
}

/// Creates `path`'s directory private to the user (records hold a program's data).
fn private_dir(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(dir) = path.parent() else {
        return Ok(());
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_error("create", dir, e))
}

impl StateStore for LocalStore {
    fn describe(&self) -> String {
        self.dir.display().to_string()
    }

    fn put(&self, run_id: &str, record: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>> {
        let path = self.path(run_id, "run");
        Box::pin(blocking(move || {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            private_dir(&path)?;
            // A new name per write, renamed into place: a reader sees the whole record or none.
            let tmp = path.with_extension(format!("run.{}.tmp", std::process::id()));
            let written = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .and_then(|mut f| f.write_all(&record).and_then(|()| f.sync_all()))
                .and_then(|()| std::fs::rename(&tmp, &path));
            if let Err(error) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(io_error("write", &path, error));
            }
            Ok(())
        }))
    }

    fn get(&self, run_id: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>> {
        let path = self.path(run_id, "run");
        Box::pin(blocking(move || match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("read", &path, e)),
        }))
    }

    fn claim(&self, run_id: &str) -> BoxFuture<'_, Result<bool, StoreError>> {
        let path = self.path(run_id, "resumed");
        Box::pin(blocking(move || {
            use std::os::unix::fs::OpenOptionsExt;
            private_dir(&path)?;
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(io_error("create", &path, e)),
            }
        }))
    }

    fn claimed(&self, run_id: &str) -> BoxFuture<'_, Result<bool, StoreError>> {
        let path = self.path(run_id, "resumed");
        Box::pin(blocking(move || Ok(path.exists())))
    }

    fn remove(&self, run_id: &str) -> BoxFuture<'_, Result<(), StoreError>> {
        let path = self.path(run_id, "run");
        Box::pin(blocking(move || match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("remove", &path, e)),
        }))
    }
}

//! Paused runs in an S3-compatible object store (`s3://bucket/prefix`), through `object_store`,
//! so that a fleet of codemode processes can pause on one machine and resume on another.
//!
//! Credentials, region and endpoint come from the usual `AWS_*` environment variables
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT` and
//! `AWS_ALLOW_HTTP=true` for a local server). A claim is a conditional create
//! (`If-None-Match: *`) of the run's consumed mark, which the store makes atomic; the record is
//! deleted after it. A record's size is read from the response's headers and checked before its
//! body is downloaded.

use futures::future::BoxFuture;
use futures::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use std::sync::Arc;
use std::time::SystemTime;

use super::key::is_run_id;
use super::store::{
    credentials_name, too_large, Cutoffs, Kept, Records, StateStore, StoreError, Swept,
    MAX_CREDENTIALS_BYTES, MAX_LEASE_BYTES, MAX_TASK_BYTES, SWEPT,
};
use super::DurabilityError;

/// Records as objects `<prefix>/runs/<id>.run`, consumed marks (holding the claimed record's
/// tag) as `<prefix>/runs/<id>.resumed`, tasks as `<prefix>/tasks/<id>.task` and `<id>.lease`,
/// whose a paused run is as an empty `<prefix>/owners/<owner id>/<run id>`, and the time of the
/// last sweep as `<prefix>/swept`.
#[derive(Debug)]
pub struct ObjectStateStore {
    store: AmazonS3,
    bucket: String,
    prefix: String,
    url: String,
}

impl ObjectStateStore {
    /// The store `url` names (`s3://bucket` or `s3://bucket/prefix`), configured from the
    /// environment.
    pub fn s3(url: &str) -> Result<Self, DurabilityError> {
        Self::s3_with(url, &[])
    }

    /// [`ObjectStateStore::s3`] with `options` over the environment's, by `object_store`'s
    /// configuration names (`aws_endpoint`, `aws_allow_http`, `aws_access_key_id`, …).
    pub fn s3_with(url: &str, options: &[(&str, &str)]) -> Result<Self, DurabilityError> {
        let refused =
            |problem: String, source: Option<object_store::Error>| DurabilityError::ObjectStore {
                url: url.to_owned(),
                problem,
                source: source.map(|e| Arc::new(e) as Arc<dyn std::error::Error + Send + Sync>),
            };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| refused("an object store is named s3://bucket/prefix".into(), None))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(refused(
                "the bucket is missing (s3://bucket/prefix)".into(),
                None,
            ));
        }
        // The store's TLS takes the process's crypto provider; ring is codemode's. A provider
        // installed before (by the host, or an upstream's client) stays.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = AmazonS3Builder::from_env();
        for (name, value) in options {
            let key: AmazonS3ConfigKey = name
                .parse()
                .map_err(|e| refused(format!("option {name}: {e}"), Some(e)))?;
            builder = builder.with_config(key, *value);
        }
        let store = builder
            .with_bucket_name(bucket)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .build()
            .map_err(|e| refused(e.to_string(), Some(e)))?;
        Ok(Self {
            store,
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
            url: url.to_owned(),
        })
    }

    fn path(&self, run_id: &str, suffix: &str) -> Path {
        self.key(&format!("runs/{run_id}.{suffix}"))
    }

    /// `name` under the store's prefix.
    fn key(&self, name: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(name)
        } else {
            Path::from(format!("{}/{name}", self.prefix))
        }
    }
}

fn failed(what: &str, path: &Path, error: object_store::Error) -> StoreError {
    StoreError(format!("cannot {what} {path}: {error}"))
}

impl ObjectStateStore {
    /// Writes `bytes` as the object at `path`, replacing it.
    async fn store_at(&self, path: Path, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.store
            .put(&path, PutPayload::from(bytes))
            .await
            .map(drop)
            .map_err(|e| failed("write", &path, e))
    }

    /// The object at `path` when it is within `max_bytes` (refused from the size its response
    /// announces, before the body is downloaded).
    async fn fetch(
        &self,
        path: Path,
        run_id: String,
        max_bytes: u64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let found = match self.store.get(&path).await {
            Ok(found) => found,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(failed("read", &path, e)),
        };
        // The size comes with the response's headers: a record over the cap is refused
        // before its body is downloaded (dropping the stream closes the connection).
        let at = format!("s3://{}/{path}", self.bucket);
        if found.meta.size > max_bytes {
            return Err(too_large(&run_id, &at, found.meta.size, max_bytes));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(found.meta.size).unwrap_or(0));
        let mut body = found.into_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| failed("read", &path, e))?;
            if (bytes.len() + chunk.len()) as u64 > max_bytes {
                return Err(too_large(
                    &run_id,
                    &at,
                    (bytes.len() + chunk.len()) as u64,
                    max_bytes,
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(bytes))
    }
}

impl StateStore for ObjectStateStore {
    fn describe(&self) -> String {
        self.url.clone()
    }

    fn put_credentials(
        &self,
        name: &str,
        sealed: Vec<u8>,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let path = credentials_name(name).map(|name| self.key(&format!("credentials/{name}")));
        Box::pin(async move { self.store_at(path?, sealed).await })
    }

    fn get_credentials(&self, name: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>> {
        let path = credentials_name(name).map(|name| self.key(&format!("credentials/{name}")));
        let name = name.to_owned();
        Box::pin(async move {
            let path = path?;
            match self.store.get(&path).await {
                Ok(found) if found.meta.size > MAX_CREDENTIALS_BYTES => Err(StoreError(format!(
                    "the credentials of {name} at s3://{}/{path} are {} bytes, more than credentials take; they were not read",
                    self.bucket, found.meta.size
                ))),
                Ok(found) => found
                    .bytes()
                    .await
                    .map(|bytes| Some(bytes.to_vec()))
                    .map_err(|e| failed("read", &path, e)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(failed("read", &path, e)),
            }
        })
    }

    fn remove_credentials(&self, name: &str) -> BoxFuture<'_, Result<bool, StoreError>> {
        let path = credentials_name(name).map(|name| self.key(&format!("credentials/{name}")));
        Box::pin(async move {
            let path = path?;
            match self.store.head(&path).await {
                Ok(_) => {}
                Err(object_store::Error::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(failed("read", &path, e)),
            }
            match self.store.delete(&path).await {
                Ok(()) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(failed("remove", &path, e)),
            }
        })
    }

    fn credential_names(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        let folder = self.key("credentials");
        Box::pin(async move {
            let mut names = Vec::new();
            let mut listed = self.store.list(Some(&folder));
            while let Some(meta) = listed.next().await {
                let meta = meta.map_err(|e| failed("list", &folder, e))?;
                if let Some(name) = meta.location.filename() {
                    if credentials_name(name).is_ok() {
                        names.push(name.to_owned());
                    }
                }
            }
            Ok(names)
        })
    }

    fn put(&self, run_id: &str, record: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.store_at(self.path(run_id, "run"), record))
    }

    fn get(
        &self,
        run_id: &str,
        max_bytes: u64,
    ) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(self.fetch(self.path(run_id, "run"), run_id.to_owned(), max_bytes))
    }

    fn put_task(&self, task_id: &str, document: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.store_at(self.key(&format!("tasks/{task_id}.task")), document))
    }

    fn get_task(&self, task_id: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>> {
        let path = self.key(&format!("tasks/{task_id}.task"));
        Box::pin(self.fetch(path, task_id.to_owned(), MAX_TASK_BYTES))
    }

    fn put_lease(&self, task_id: &str, lease: Vec<u8>) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.store_at(self.key(&format!("tasks/{task_id}.lease")), lease))
    }

    fn get_lease(&self, task_id: &str) -> BoxFuture<'_, Result<Option<Vec<u8>>, StoreError>> {
        let path = self.key(&format!("tasks/{task_id}.lease"));
        Box::pin(self.fetch(path, task_id.to_owned(), MAX_LEASE_BYTES))
    }

    fn records(&self, stop_past: u64) -> BoxFuture<'_, Result<Records, StoreError>> {
        Box::pin(async move {
            let runs = self.key("runs");
            let mut records = Records {
                complete: true,
                ..Records::default()
            };
            // A page of a thousand names per request: the count costs one request per
            // thousand records, and stops once past the room asked about.
            let mut listed = self.store.list(Some(&runs));
            while let Some(meta) = listed.next().await {
                let meta = meta.map_err(|e| failed("list", &runs, e))?;
                if meta.location.prefix_match(&runs).map(|rest| rest.count()) != Some(1) {
                    continue;
                }
                let Some(id) = meta.location.filename().and_then(Records::record_id) else {
                    continue;
                };
                if !records.count(id, meta.size, stop_past) {
                    records.complete = false;
                    break;
                }
            }
            Ok(records)
        })
    }

    fn note_owner(&self, owner: &str, run_id: &str) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.store_at(self.key(&format!("owners/{owner}/{run_id}")), Vec::new()))
    }

    fn owned(&self, owner: &str) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        let notes = self.key(&format!("owners/{owner}"));
        Box::pin(async move {
            let mut owned = Vec::new();
            let mut listed = self.store.list(Some(&notes));
            while let Some(meta) = listed.next().await {
                let meta = meta.map_err(|e| failed("list", &notes, e))?;
                if let Some(run_id) = meta.location.filename().filter(|id| is_run_id(id)) {
                    owned.push(run_id.to_owned());
                }
            }
            Ok(owned)
        })
    }

    fn claim(&self, run_id: &str, identity: &str) -> BoxFuture<'_, Result<bool, StoreError>> {
        let path = self.path(run_id, "resumed");
        let mark = PutPayload::from(format!("{identity}\n").into_bytes());
        Box::pin(async move {
            let create = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            match self.store.put_opts(&path, mark, create).await {
                Ok(_) => Ok(true),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Ok(false),
                Err(e) => Err(failed("create", &path, e)),
            }
        })
    }

    fn claimed(&self, run_id: &str) -> BoxFuture<'_, Result<bool, StoreError>> {
        let path = self.path(run_id, "resumed");
        Box::pin(async move {
            match self.store.head(&path).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(failed("read", &path, e)),
            }
        })
    }

    fn remove(&self, run_id: &str) -> BoxFuture<'_, Result<(), StoreError>> {
        let path = self.path(run_id, "run");
        Box::pin(async move {
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(failed("remove", &path, e)),
            }
        })
    }

    fn last_sweep(&self) -> BoxFuture<'_, Result<Option<SystemTime>, StoreError>> {
        let path = self.key(SWEPT);
        Box::pin(async move {
            match self.store.head(&path).await {
                Ok(meta) => Ok(Some(SystemTime::from(meta.last_modified))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(failed("read", &path, e)),
            }
        })
    }

    fn sweep(&self, cutoffs: Cutoffs) -> BoxFuture<'_, Result<Swept, StoreError>> {
        Box::pin(async move {
            let mut swept = Swept::default();
            for folder in ["runs", "tasks"] {
                self.sweep_folder(&self.key(folder), &cutoffs, &mut swept)
                    .await?;
            }
            self.sweep_notes(&cutoffs).await?;
            let marker = self.key(SWEPT);
            self.store
                .put(&marker, PutPayload::new())
                .await
                .map_err(|e| failed("write", &marker, e))?;
            Ok(swept)
        })
    }
}

impl ObjectStateStore {
    /// Drops the notes of whose a run is, `owners/<owner id>/<run id>`, past the records'
    /// cutoff: by then the record they note is gone too.
    async fn sweep_notes(&self, cutoffs: &Cutoffs) -> Result<(), StoreError> {
        let owners = self.key("owners");
        let mut listed = self.store.list(Some(&owners));
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(|e| failed("list", &owners, e))?;
            let Some(parts) = meta.location.prefix_match(&owners) else {
                continue;
            };
            let parts: Vec<String> = parts.map(|part| part.as_ref().to_owned()).collect();
            let ours =
                matches!(&parts[..], [owner, run_id] if is_run_id(owner) && is_run_id(run_id));
            if !ours || !Kept::Note.is_past(SystemTime::from(meta.last_modified), cutoffs) {
                continue;
            }
            match self.store.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(failed("remove", &meta.location, e)),
            }
        }
        Ok(())
    }

    /// Drops the store's own objects directly under `runs` that are past `cutoffs`.
    async fn sweep_folder(
        &self,
        runs: &Path,
        cutoffs: &Cutoffs,
        swept: &mut Swept,
    ) -> Result<(), StoreError> {
        let mut listed = self.store.list(Some(runs));
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(|e| failed("list", runs, e))?;
            let Some(kind) = meta
                .location
                .filename()
                .and_then(Kept::of_run_file)
                .filter(|k| k.is_past(SystemTime::from(meta.last_modified), cutoffs))
            else {
                continue;
            };
            // Only the store's own names directly under the folder, never deeper.
            if meta.location.prefix_match(runs).map(|rest| rest.count()) != Some(1) {
                continue;
            }
            match self.store.delete(&meta.location).await {
                Ok(()) => swept.count(kind),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(failed("remove", &meta.location, e)),
            }
        }
        Ok(())
    }
}

//! What jobs and terminals share: a task that owns a running process and its output pump, and
//! the handle through which anyone else learns how it ended or asks it to stop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::subprocess::{Exit, Process};

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these locks are held; a poisoned lock still holds whole state.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a supervisor stops its process when asked.
#[derive(Clone, Copy)]
pub(crate) enum StopWith {
    /// SIGTERM to the group, SIGKILL after the grace period.
    Terminate,
    /// SIGHUP first, as closing a terminal does (an interactive shell ignores SIGTERM), then
    /// terminate.
    HangUp,
}

type StopRequest = oneshot::Sender<Exit>;

/// The handle to a supervised process.
pub(crate) struct Supervised {
    exit: watch::Receiver<Option<Exit>>,
    stop: Mutex<Option<oneshot::Sender<StopRequest>>>,
}

impl Supervised {
    /// How the process ended; `None` while it runs.
    pub(crate) fn exit(&self) -> Option<Exit> {
        *self.exit.borrow()
    }

    pub(crate) fn exit_changes(&self) -> watch::Receiver<Option<Exit>> {
        self.exit.clone()
    }

    /// Stops the process (and waits until it has ended); `true` when this call ended it.
    pub(crate) async fn stop(&self) -> bool {
        let Some(stop) = lock(&self.stop).take() else {
            // Another caller is ending it: wait for that.
            let mut exit = self.exit.clone();
            let _ = exit.wait_for(Option::is_some).await;
            return false;
        };
        if self.exit().is_some() {
            return false;
        }
        let (reply_tx, reply_rx) = oneshot::channel();
        if stop.send(reply_tx).is_err() {
            return false; // it ended on its own meanwhile
        }
        // An error: it ended on its own just before the request was seen.
        reply_rx.await.is_ok()
    }
}

/// Hands `process` and its output `pump` to a supervisor task. When the process ends, or is
/// stopped, the rest of its session is killed and its output drained for at most `drain` (a
/// process that left the session may hold the output open forever).
pub(crate) fn supervise(
    mut process: Process,
    pump: JoinHandle<()>,
    stop_with: StopWith,
    grace: Duration,
    drain: Duration,
) -> Supervised {
    let (exit_tx, exit_rx) = watch::channel(None);
    let (stop_tx, stop_rx) = oneshot::channel::<StopRequest>();
    tokio::spawn(async move {
        let (exit, reply) = tokio::select! {
            exit = process.wait() => (exit, None),
            Ok(reply) = stop_rx => {
                let exit = match stop_with {
                    StopWith::Terminate => process.terminate(grace).await,
                    StopWith::HangUp => {
                        process.signal(libc::SIGHUP);
                        match tokio::time::timeout(grace, process.wait()).await {
                            Ok(exit) => exit,
                            Err(_) => process.terminate(grace).await,
                        }
                    }
                };
                (exit, Some(reply))
            }
        };
        process.signal(libc::SIGKILL);
        let mut pump = pump;
        if tokio::time::timeout(drain, &mut pump).await.is_err() {
            pump.abort();
        }
        let _ = exit_tx.send(Some(exit));
        if let Some(reply) = reply {
            let _ = reply.send(exit);
        }
    });
    Supervised {
        exit: exit_rx,
        stop: Mutex::new(Some(stop_tx)),
    }
}

/// Removes from `map` the entries `matches` picks.
pub(crate) fn remove_where<T>(
    map: &mut BTreeMap<String, Arc<T>>,
    matches: impl Fn(&T) -> bool,
) -> Vec<Arc<T>> {
    let ids: Vec<String> = map
        .iter()
        .filter(|(_, item)| matches(item))
        .map(|(id, _)| id.clone())
        .collect();
    ids.iter().filter_map(|id| map.remove(id)).collect()
}

/// Stops every one of `items` at once.
pub(crate) async fn stop_all<T>(items: &[Arc<T>], handle: impl Fn(&T) -> &Supervised) {
    futures::future::join_all(items.iter().map(|item| handle(item).stop())).await;
}

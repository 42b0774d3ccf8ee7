//! What jobs and terminals share: a task that owns a running process and its output pump, and
//! the handle through which anyone else learns how it ended or asks it to stop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::stream::Stream;
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

/// Answered `true` when the request ended the process, `false` when it had ended already.
type StopRequest = oneshot::Sender<bool>;

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

    /// Stops the process (and waits until it has ended); `true` when this call ended it.
    pub(crate) async fn stop(&self) -> bool {
        let Some(stop) = lock(&self.stop).take() else {
            // Another caller is ending it: wait for that.
            let mut exit = self.exit.clone();
            let _ = exit.wait_for(Option::is_some).await;
            return false;
        };
        // Sent even when the process has ended: the request also ends the draining of its output.
        let (reply_tx, reply_rx) = oneshot::channel();
        if stop.send(reply_tx).is_err() {
            return false; // its supervisor is done
        }
        reply_rx.await.unwrap_or(false)
    }
}

/// Hands `process` and the `pump` filling `output` to a supervisor task. When the process
/// ends, or is stopped, the rest of its group is killed. Its output is then drained: as long
/// as the pump waits for a reader to make room (what the process wrote is never dropped
/// unread), or otherwise for at most `drain` (a process that left the group may hold the
/// output open forever); a stop request ends the drain at once.
pub(crate) fn supervise(
    mut process: Process,
    output: Arc<Stream>,
    pump: JoinHandle<()>,
    stop_with: StopWith,
    grace: Duration,
    drain: Duration,
) -> Supervised {
    let (exit_tx, exit_rx) = watch::channel(None);
    let (stop_tx, mut stop_rx) = oneshot::channel::<StopRequest>();
    tokio::spawn(async move {
        let (exit, mut reply) = tokio::select! {
            exit = process.wait() => (exit, None),
            Ok(reply) = &mut stop_rx => {
                (stop(&mut process, stop_with, grace).await, Some((reply, true)))
            }
        };
        process.signal(libc::SIGKILL);
        let _ = exit_tx.send(Some(exit));
        let mut pump = pump;
        loop {
            tokio::select! {
                _ = &mut pump => break,
                Ok(late) = &mut stop_rx, if reply.is_none() => {
                    reply = Some((late, false));
                    break;
                }
                () = tokio::time::sleep(drain) => {
                    if !output.waiting_for_reader() {
                        break;
                    }
                }
            }
        }
        pump.abort();
        output.close();
        if let Some((reply, ended_it)) = reply {
            let _ = reply.send(ended_it);
        }
    });
    Supervised {
        exit: exit_rx,
        stop: Mutex::new(Some(stop_tx)),
    }
}

async fn stop(process: &mut Process, stop_with: StopWith, grace: Duration) -> Exit {
    match stop_with {
        StopWith::Terminate => process.terminate(grace).await,
        StopWith::HangUp => {
            process.signal(libc::SIGHUP);
            match tokio::time::timeout(grace, process.wait()).await {
                // What the hangup did not end goes too, once the shell has: a program that
                // ignores it (`nohup`), or a job the shell forked just as it arrived, which
                // still had the shell's handler for it rather than its own program's.
                Ok(exit) => {
                    process.signal(libc::SIGKILL);
                    exit
                }
                Err(_) => process.terminate(grace).await,
            }
        }
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

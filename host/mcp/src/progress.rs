//! Progress of a call that reaches upstream servers, passed back to the client that made it.
//!
//! The server (`server.rs`) opens a route for each call whose client asked for progress, under
//! the call's id; a program's calls of upstream tools (`upstream/call.rs`) find it from their
//! own ids (`<call id>:code:<n>`) and send it what their servers report. Routes live in this
//! process only, for as long as their call runs. Each holds at most `PROGRESS_QUEUE` messages
//! waiting for the client: a client slower than its servers misses some of their progress.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use codemode_runtime::run_code::root_call_id;
use codemode_runtime::tools::events::{EventSink, SessionEvent};
use tokio::sync::mpsc;

use super::upstream::PROGRESS_QUEUE;

type Routes = Mutex<HashMap<String, mpsc::Sender<String>>>;

fn routes() -> &'static Routes {
    static ROUTES: OnceLock<Routes> = OnceLock::new();
    ROUTES.get_or_init(Routes::default)
}

fn lock() -> std::sync::MutexGuard<'static, HashMap<String, mpsc::Sender<String>>> {
    // Every critical section is one map operation: a panic cannot leave the map half-made.
    routes().lock().unwrap_or_else(|p| p.into_inner())
}

/// The messages of the upstream calls made on behalf of `call_id`, while the guard lives.
pub(crate) fn listen(call_id: &str) -> (Listening, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel(PROGRESS_QUEUE);
    lock().insert(call_id.to_owned(), tx);
    (
        Listening {
            call_id: call_id.to_owned(),
        },
        rx,
    )
}

/// Where the progress of a call made on behalf of `call_id` (a program's call, or the call
/// itself) goes, if its client listens.
pub(crate) fn sender_for(call_id: &str) -> Option<mpsc::Sender<String>> {
    lock().get(root_call_id(call_id)).cloned()
}

/// Tells a client that asked for progress about each call its program makes, as the call
/// starts and as it settles (tool, sub-call id, outcome), on the same route as upstream
/// servers' progress. Install it as `run_code`'s event sink (`RunCodeConfig::events`).
pub struct NestedCalls;

impl EventSink for NestedCalls {
    fn append(&self, event: &SessionEvent) -> std::io::Result<()> {
        if let Some((sub_call_id, line)) = event.sub_call_progress() {
            if let Some(route) = sender_for(sub_call_id) {
                // A client slower than its calls misses some lines, never holds the run.
                let _ = route.try_send(line);
            }
        }
        Ok(())
    }
}

/// Keeps a route open.
pub(crate) struct Listening {
    call_id: String,
}

impl Drop for Listening {
    fn drop(&mut self) {
        lock().remove(&self.call_id);
    }
}

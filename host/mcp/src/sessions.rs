//! Bounded MCP sessions for the streamable HTTP transport: at most a fixed number live at
//! once, and one that is idle (no request for a while, none running) is closed.
//!
//! [`BoundedSessions`] is an rmcp [`SessionManager`] over rmcp's in-memory
//! [`LocalSessionManager`]. It counts the sessions that exist and the new ones being made, so
//! that a front end can refuse a session before any of it is built
//! ([`BoundedSessions::reserve`]); a task closes idle sessions, which drops their handler
//! state (and, in `codemode mcp`, ends their jobs and terminals).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::WorkerTransport;

/// Most sessions at once by default.
pub const DEFAULT_MAX_SESSIONS: u64 = 256;
/// How long an unused session lives by default (ten minutes).
pub const DEFAULT_SESSION_IDLE_MS: u64 = 600_000;

/// How many sessions may live and how long an unused one lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Most sessions at once, those being made included.
    pub max_sessions: usize,
    /// A session with no request for this long, and none running, is closed.
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_sessions: DEFAULT_MAX_SESSIONS as usize,
            idle: Duration::from_millis(DEFAULT_SESSION_IDLE_MS),
        }
    }
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// Every session the limits allow exists.
    #[error("the server already holds its most sessions ({0}); retry later")]
    Full(usize),
    /// The in-memory session store failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// One live session's use.
struct Use {
    /// When its last request arrived or its last stream ended.
    last: Instant,
    /// Requests of it whose response streams are open (calls running).
    running: usize,
}

#[derive(Default)]
struct Count {
    live: HashMap<SessionId, Use>,
    /// New sessions admitted by [`BoundedSessions::reserve`] and not yet settled.
    reserved: usize,
}

/// rmcp's in-memory sessions, bounded in number and closed when idle. Build with
/// [`BoundedSessions::new`] inside a Tokio runtime (it starts the task that closes idle
/// sessions; the task ends with the last handle).
pub struct BoundedSessions {
    /// This value's own handle, for the guards of running requests.
    me: Weak<BoundedSessions>,
    inner: LocalSessionManager,
    limits: SessionLimits,
    count: Mutex<Count>,
}

/// A place for one new session, taken by [`BoundedSessions::reserve`] and given back when
/// dropped (by then the session exists and counts itself, or was never made).
pub struct Reservation(Arc<BoundedSessions>);

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut count = self.0.count();
        count.reserved = count.reserved.saturating_sub(1);
    }
}

/// Marks a session's request as running until dropped with its response stream.
struct Running {
    sessions: Weak<BoundedSessions>,
    id: SessionId,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(sessions) = self.sessions.upgrade() {
            let mut count = sessions.count();
            if let Some(used) = count.live.get_mut(&self.id) {
                used.running = used.running.saturating_sub(1);
                used.last = Instant::now();
            }
        }
    }
}

impl BoundedSessions {
    /// Sessions under `limits`. Must be called inside a Tokio runtime.
    pub fn new(limits: SessionLimits) -> Arc<Self> {
        let mut inner = LocalSessionManager::default();
        // Idleness is judged here, where a running call keeps its session alive; rmcp's own
        // keep-alive would close a session in the middle of a long call.
        inner.session_config.keep_alive = None;
        let sessions = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            inner,
            limits: SessionLimits {
                max_sessions: limits.max_sessions.max(1),
                idle: limits.idle.max(Duration::from_millis(1)),
            },
            count: Mutex::default(),
        });
        tokio::spawn(close_idle(Arc::downgrade(&sessions)));
        sessions
    }

    /// The limits in force.
    pub fn limits(&self) -> SessionLimits {
        self.limits
    }

    /// Sessions that exist now.
    pub fn live(&self) -> usize {
        self.count().live.len()
    }

    /// A place for a new session, or, when every place is taken, how long until an idle
    /// session expires at the soonest (the limits' idle time when every session is busy).
    pub fn reserve(self: &Arc<Self>) -> Result<Reservation, Duration> {
        let mut count = self.count();
        if count.live.len() + count.reserved < self.limits.max_sessions {
            count.reserved += 1;
            return Ok(Reservation(self.clone()));
        }
        let now = Instant::now();
        let soonest = count
            .live
            .values()
            .filter(|used| used.running == 0)
            .map(|used| (used.last + self.limits.idle).saturating_duration_since(now))
            .min()
            .unwrap_or(self.limits.idle);
        Err(soonest)
    }

    fn count(&self) -> MutexGuard<'_, Count> {
        self.count.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self, id: &SessionId) {
        if let Some(used) = self.count().live.get_mut(id) {
            used.last = Instant::now();
        }
    }

    /// Counts a request of `id` as running while `stream` is open.
    fn running<S>(
        &self,
        id: &SessionId,
        stream: S,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static
    where
        S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        if let Some(used) = self.count().live.get_mut(id) {
            used.running += 1;
            used.last = Instant::now();
        }
        let running = Running {
            sessions: self.me.clone(),
            id: id.clone(),
        };
        stream.map(move |message| {
            let _running = &running;
            message
        })
    }

    /// The sessions idle past the limit.
    fn expired(&self) -> Vec<SessionId> {
        let now = Instant::now();
        self.count()
            .live
            .iter()
            .filter(|(_, used)| {
                used.running == 0 && now.duration_since(used.last) >= self.limits.idle
            })
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// Closes idle sessions until the sessions are dropped.
async fn close_idle(sessions: Weak<BoundedSessions>) {
    let every = match sessions.upgrade() {
        Some(sessions) => {
            (sessions.limits.idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(5))
        }
        None => return,
    };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut closed_some = false;
    loop {
        ticks.tick().await;
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        let expired = sessions.expired();
        if expired.is_empty() && closed_some {
            // The closed sessions' tasks have ended by now; give their memory back.
            release_free_memory();
        }
        closed_some = !expired.is_empty();
        for id in expired {
            let _ = sessions.close_session(&id).await;
        }
    }
}

/// Returns the allocator's free memory to the system, so that closed sessions leave the
/// process's footprint where it was.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() {
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no pointers and
    // may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}

/// A session's stream of server messages.
type SseStream = Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync + 'static>>;

/// The session operations that answer with a stream, through the trait (whose bounds the
/// streams are known to meet).
async fn request_stream<M: SessionManager>(
    sessions: &M,
    id: &SessionId,
    message: ClientJsonRpcMessage,
) -> Result<SseStream, M::Error> {
    Ok(Box::pin(sessions.create_stream(id, message).await?))
}

async fn standalone_stream<M: SessionManager>(
    sessions: &M,
    id: &SessionId,
) -> Result<SseStream, M::Error> {
    Ok(Box::pin(sessions.create_standalone_stream(id).await?))
}

async fn resumed_stream<M: SessionManager>(
    sessions: &M,
    id: &SessionId,
    last_event_id: String,
) -> Result<SseStream, M::Error> {
    Ok(Box::pin(sessions.resume(id, last_event_id).await?))
}

/// Every operation on a session counts as its use; creation is refused past the limit.
impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        {
            let count = self.count();
            // Reserved places were taken by requests like this one, so only the sessions that
            // exist can make this one too many.
            if count.live.len() >= self.limits.max_sessions {
                return Err(SessionsError::Full(self.limits.max_sessions));
            }
        }
        let (id, transport) = self.inner.create_session().await?;
        self.count().live.insert(
            id.clone(),
            Use {
                last: Instant::now(),
                running: 0,
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.count().live.remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        let stream = request_stream(&self.inner, id, message).await?;
        Ok(self.running(id, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        // A client listening for notifications is using its session.
        let stream = standalone_stream(&self.inner, id).await?;
        Ok(self.running(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(resumed_stream(&self.inner, id, last_event_id).await?)
    }
}

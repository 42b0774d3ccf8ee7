//! Cancellation with a reason, shared by code runs and tool calls.
//!
//! An [`AbortSignal`] fires at most once and remembers why. Signals can be fused
//! ([`AbortSignal::any`]) so a callee observes its caller's cancellation as well as its own
//! deadline. Firing is synchronous and never blocks; waiting is async.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use tokio::sync::Notify;

/// The reader's side of a cancellation: cheap to clone, shared by everyone who must stop.
#[derive(Clone)]
pub struct AbortSignal {
    inner: Arc<Inner>,
}

/// The writer's side: owns the right to fire its signal.
pub struct AbortController {
    signal: AbortSignal,
}

struct Inner {
    reason: OnceLock<String>,
    notify: Notify,
    /// Signals fused from this one; they fire when this one fires. Weak, so a long-lived source
    /// does not keep every short-lived fusion alive.
    dependents: Mutex<Vec<Weak<Inner>>>,
    /// What this signal was fused from. Strong, so a fusion in the middle of a chain stays alive
    /// as long as anything fused from it does.
    sources: Vec<Arc<Inner>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Release a long chain of fusions iteratively instead of one drop per link.
        let mut pending = std::mem::take(&mut self.sources);
        while let Some(source) = pending.pop() {
            if let Ok(mut unique) = Arc::try_unwrap(source) {
                pending.append(&mut unique.sources);
            }
        }
    }
}

impl Inner {
    fn new() -> Arc<Self> {
        Self::fused_from(Vec::new())
    }

    fn fused_from(sources: Vec<Arc<Inner>>) -> Arc<Self> {
        Arc::new(Self {
            reason: OnceLock::new(),
            notify: Notify::new(),
            dependents: Mutex::new(Vec::new()),
            sources,
        })
    }

    fn fire(self: &Arc<Self>, reason: &str) {
        // Iterative so that long fusion chains cannot overflow the stack.
        let mut pending = vec![self.clone()];
        while let Some(node) = pending.pop() {
            if node.reason.set(reason.to_owned()).is_err() {
                continue;
            }
            node.notify.notify_waiters();
            let dependents = std::mem::take(&mut *lock(&node.dependents));
            pending.extend(dependents.iter().filter_map(Weak::upgrade));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding this lock cannot leave the list inconsistent (push/take only).
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Default for AbortController {
    fn default() -> Self {
        Self::new()
    }
}

impl AbortController {
    /// A controller whose signal has not fired.
    pub fn new() -> Self {
        Self {
            signal: AbortSignal {
                inner: Inner::new(),
            },
        }
    }

    /// The signal this controller fires, to hand to whoever must stop.
    pub fn signal(&self) -> AbortSignal {
        self.signal.clone()
    }

    /// Fires the signal with `reason`. Later calls keep the first reason.
    pub fn abort(&self, reason: impl AsRef<str>) {
        self.signal.inner.fire(reason.as_ref());
    }

    /// Whether the signal has fired.
    pub fn is_aborted(&self) -> bool {
        self.signal.is_aborted()
    }
}

impl std::fmt::Debug for AbortSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortSignal")
            .field("reason", &self.reason())
            .finish()
    }
}

impl AbortSignal {
    /// A signal that never fires.
    pub fn never() -> Self {
        Self {
            inner: Inner::new(),
        }
    }

    /// A signal that has already fired with `reason`.
    pub fn aborted_with(reason: impl AsRef<str>) -> Self {
        let controller = AbortController::new();
        controller.abort(reason);
        controller.signal()
    }

    /// Whether the signal has fired.
    pub fn is_aborted(&self) -> bool {
        self.inner.reason.get().is_some()
    }

    /// Why the signal fired, if it has.
    pub fn reason(&self) -> Option<String> {
        self.inner.reason.get().cloned()
    }

    /// Resolves with the reason once the signal fires (immediately if it already has).
    pub async fn aborted(&self) -> String {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            // Register interest before checking, so a fire between the check and the await is seen.
            notified.as_mut().enable();
            if let Some(reason) = self.inner.reason.get() {
                return reason.clone();
            }
            notified.await;
        }
    }

    /// A signal that fires when any of `signals` fires, with that signal's reason.
    pub fn any(signals: &[AbortSignal]) -> AbortSignal {
        let fused = Inner::fused_from(signals.iter().map(|s| s.inner.clone()).collect());
        for signal in signals {
            if let Some(reason) = signal.inner.reason.get() {
                fused.fire(reason);
                break;
            }
            let mut dependents = lock(&signal.inner.dependents);
            dependents.retain(|weak| weak.strong_count() > 0);
            dependents.push(Arc::downgrade(&fused));
            drop(dependents);
            // The source may have fired between the check and the registration.
            if let Some(reason) = signal.inner.reason.get() {
                fused.fire(reason);
                break;
            }
        }
        AbortSignal { inner: fused }
    }

    /// Whether two handles refer to the same signal.
    pub fn same(&self, other: &AbortSignal) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reason_wins() {
        let c = AbortController::new();
        assert!(!c.is_aborted());
        c.abort("one");
        c.abort("two");
        assert_eq!(c.signal().reason().as_deref(), Some("one"));
    }

    #[test]
    fn fused_signal_follows_any_source() {
        let a = AbortController::new();
        let b = AbortController::new();
        let fused = AbortSignal::any(&[a.signal(), b.signal()]);
        assert!(!fused.is_aborted());
        b.abort("b-fired");
        assert_eq!(fused.reason().as_deref(), Some("b-fired"));
        assert!(!a.is_aborted());
    }

    #[test]
    fn fusing_an_aborted_signal_is_aborted_at_once() {
        let fused = AbortSignal::any(&[AbortSignal::never(), AbortSignal::aborted_with("late")]);
        assert_eq!(fused.reason().as_deref(), Some("late"));
    }

    #[test]
    fn long_fusion_chains_fire_without_recursion() {
        let root = AbortController::new();
        let mut last = root.signal();
        let mut keep = Vec::new();
        for _ in 0..100_000 {
            let next = AbortSignal::any(&[last.clone()]);
            keep.push(last);
            last = next;
        }
        root.abort("deep");
        assert_eq!(last.reason().as_deref(), Some("deep"));
    }

    #[test]
    fn a_dropped_middle_of_a_chain_still_propagates() {
        let root = AbortController::new();
        let end = {
            let middle = AbortSignal::any(&[root.signal()]);
            AbortSignal::any(&[middle])
        };
        root.abort("through");
        assert_eq!(end.reason().as_deref(), Some("through"));
    }

    #[tokio::test]
    async fn waiting_resolves_with_the_reason() {
        let c = AbortController::new();
        let s = c.signal();
        let waiter = tokio::spawn(async move { s.aborted().await });
        tokio::task::yield_now().await;
        c.abort("go");
        assert_eq!(waiter.await.unwrap(), "go");
    }
}

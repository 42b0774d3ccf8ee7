//! The host memory a run holds outside its sandbox on the program's behalf: the arguments of
//! its calls in flight, the results waiting for the program to take them, and what its calls
//! hand to the loop (deferred images and contexts). A program decides how much of it exists
//! (a hundred reads of a large file, started at once and never awaited, are a hundred copies),
//! so it is counted against the run's own memory budget rather than left outside every budget.
//!
//! One [`HeldMemory`] per run, shared by whoever holds such values: the runtime (arguments as
//! it parses them, results as calls complete, until the guest takes them) and `run_code`'s
//! scheduler (results between a body's end and the program's call taking them). The runtime
//! sets the limit; a result that passes it *overdraws* the account, which ends the run with
//! its memory cause, and no call starts after that.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::Value;

use crate::json;

/// One run's account of the host memory it holds outside its sandbox (see the module docs).
/// Counts are heap bytes as [`json::heap_bytes`] measures values, and as the system allocator
/// sizes strings.
#[derive(Debug)]
pub struct HeldMemory {
    limit: AtomicUsize,
    used: AtomicUsize,
    overdrawn: AtomicBool,
}

impl Default for HeldMemory {
    /// An account without a limit until the runtime sets one.
    fn default() -> Self {
        Self {
            limit: AtomicUsize::new(usize::MAX),
            used: AtomicUsize::new(0),
            overdrawn: AtomicBool::new(false),
        }
    }
}

impl HeldMemory {
    /// An account holding at most `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        let account = Self::default();
        account.set_limit(limit);
        account
    }

    /// Sets the most the account may hold: the runtime's memory budget for the run.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// The most the account may hold.
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// What it holds now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// What it may still take.
    pub fn room(&self) -> usize {
        self.limit().saturating_sub(self.used())
    }

    /// Counts `bytes` the caller holds now (a result that arrived, arguments just parsed).
    /// They are counted whether or not they fit, since they exist either way, and the caller
    /// releases them as usual; `false` when they do not fit, and from then on the account is
    /// overdrawn: the run must end.
    pub fn charge(&self, bytes: usize) -> bool {
        let before = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                Some(used.saturating_add(bytes))
            })
            .unwrap_or_else(|used| used);
        let fits = before
            .checked_add(bytes)
            .is_some_and(|after| after <= self.limit());
        if !fits {
            self.overdrawn.store(true, Ordering::Relaxed);
        }
        fits
    }

    /// Uncounts `bytes` charged before, once they are freed or handed on.
    pub fn release(&self, bytes: usize) {
        // Never below zero: a release that matched no charge (a caller's mistake) must not
        // turn into a huge count that fails every later run of the account.
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    /// Whether a charge ever passed the limit: the run holds more than its budget allows and
    /// is to fail with its memory cause.
    pub fn overdrawn(&self) -> bool {
        self.overdrawn.load(Ordering::Relaxed)
    }
}

/// Host memory a call's answer holds: its value's heap as [`json::heap_bytes`] counts it, or
/// its error message's buffer.
pub fn answer_bytes(answer: &Result<Value, crate::code::CallFailure>) -> usize {
    match answer {
        Ok(value) => json::heap_bytes(value),
        Err(failure) => failure.message.capacity(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_past_the_limit_is_counted_and_overdraws_for_good() {
        let account = HeldMemory::with_limit(100);
        assert!(account.charge(60));
        assert_eq!(account.room(), 40);
        assert!(!account.charge(41));
        assert!(account.overdrawn());
        assert_eq!(account.used(), 101);
        account.release(101);
        assert_eq!(account.used(), 0);
        assert!(account.overdrawn(), "a run that passed its budget fails");
        account.release(5);
        assert_eq!(account.used(), 0);
        let unlimited = HeldMemory::default();
        assert!(unlimited.charge(1 << 40));
        assert!(!unlimited.overdrawn());
    }

    #[test]
    fn answers_cost_their_heap() {
        assert_eq!(answer_bytes(&Ok(Value::Null)), 0);
        let text = "x".repeat(1000);
        assert!(answer_bytes(&Ok(Value::String(text.clone()))) >= 1000);
        assert!(answer_bytes(&Err(text.into())) >= 1000);
    }
}

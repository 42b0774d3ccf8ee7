//! A waiting run gives its stack back.
//!
//! Rust in the guest keeps the frames wasm's own stack cannot hold on a shadow stack in linear
//! memory, between the module's `__stack_low` and `__stack_high` (exported as globals holding
//! those addresses). Every export returns with the stack pointer back at `__stack_high`, so
//! while the host waits for a call or a timer nothing lives there. Yet each page a parse or a
//! deep recursion touched stays the instance's private copy for as long as the run waits: ten
//! pages for a small program, a fifth of a waiting instance's private memory. Returning them
//! with `madvise(MADV_DONTNEED)` costs a system call and, later, a page fault per page touched
//! again, so the event loop does it only once a run has lived `GIVE_BACK_AFTER`, and then at
//! most once per that interval.

use std::time::Duration;

use wasmtime::{Instance, Store};

use crate::store::RunState;

/// How long a run lives, and then how long after each give-back, before a wait gives its stack
/// back: at most one system call and a few page faults per this much of a run's life, and none
/// for runs that end sooner (the fast path).
pub(super) const GIVE_BACK_AFTER: Duration = Duration::from_millis(10);

/// Returns the pages of the guest's shadow stack to the kernel; the next touch of each maps
/// the image's page (or zeroes) again, which is all a dead stack may hold. Call it only while
/// the guest is not running. Says whether any pages were returned.
pub(super) fn give_back(store: &mut Store<RunState>, instance: &Instance) -> bool {
    let (Some(low), Some(high)) = (
        address(store, instance, "__stack_low"),
        address(store, instance, "__stack_high"),
    ) else {
        return false;
    };
    let Some(memory) = store.data().memory else {
        return false;
    };
    discard(memory.data_mut(store), low, high)
}

/// The address an exported immutable `i32` global holds.
fn address(store: &mut Store<RunState>, instance: &Instance, name: &str) -> Option<usize> {
    let global = instance.get_global(&mut *store, name)?;
    // Addresses of a 32-bit memory, stored as `i32` bit patterns.
    Some(global.get(&mut *store).i32()? as u32 as usize)
}

/// Drops the whole pages of `memory[low..high]`.
#[cfg(target_os = "linux")]
fn discard(memory: &mut [u8], low: usize, high: usize) -> bool {
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(0);
    let high = high.min(memory.len());
    if page == 0 || low >= high {
        return false;
    }
    let base = memory.as_mut_ptr() as usize;
    let start = (base + low).next_multiple_of(page);
    let end = (base + high) / page * page;
    if start >= end {
        return false;
    }
    // SAFETY: `[start, end)` lies inside `memory`, which this function borrows mutably, so no
    // other reference reads or writes those bytes during the call, and none into them outlives
    // it. wasmtime maps linear memory privately (anonymous, or copy-on-write over the module's
    // image), and MADV_DONTNEED on a private mapping only replaces the bytes of those pages
    // with zeroes or the image's bytes: the same effect as writing them through `memory`.
    let status =
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    status == 0
}

/// Elsewhere the pages stay: `MADV_DONTNEED` is only advice there, and the memory is counted
/// the same either way.
#[cfg(not(target_os = "linux"))]
fn discard(_memory: &mut [u8], _low: usize, _high: usize) -> bool {
    false
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::discard;

    /// Only whole pages inside the range are dropped (and read back as zeroes); the bytes of
    /// pages the range covers in part, and everything outside it, keep their values.
    #[test]
    fn drops_only_whole_pages_inside_the_range() {
        // SAFETY: sysconf reads a constant of the system; it has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let mut memory = vec![0xABu8; 6 * page];
        let (low, high) = (100, 5 * page - 7);
        assert!(discard(&mut memory, low, high));
        let base = memory.as_ptr() as usize;
        let start = (base + low).next_multiple_of(page) - base;
        let end = (base + high) / page * page - base;
        assert!(end - start >= 3 * page);
        for (i, byte) in memory.iter().enumerate() {
            let dropped = (start..end).contains(&i);
            assert_eq!(*byte, if dropped { 0 } else { 0xAB }, "byte {i}");
        }
        // An empty or reversed range, or one past the end, drops nothing.
        assert!(!discard(&mut memory, 5, 5));
        assert!(!discard(&mut memory, 3 * page, page));
        assert!(!discard(&mut memory, 7 * page, 8 * page));
    }
}

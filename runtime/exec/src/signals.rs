//! The signal dispositions a command starts with. Across exec a program keeps the signals its
//! parent ignores (only handlers are reset): codemode started in the background by a shell
//! without job control ignores SIGINT and SIGQUIT, under `nohup` it ignores SIGHUP, and every
//! command it started would ignore them too, so that `terminal_signal`'s SIGINT (Ctrl-C) would
//! stop no program. Commands start with every signal at its default action instead.
//!
//! The kernel is asked directly (`rt_sigaction`): the C library refuses to touch the two
//! signals it keeps for its threads (32 and 33), which a parent may have left ignored too.

use std::io;

/// Linux's signals are 1 to 64.
const SIGNALS: std::ops::RangeInclusive<libc::c_long> = 1..=64;

/// The kernel's `struct sigaction`, all zero: `SIG_DFL`, no flags, an empty mask. Large enough
/// for every layout (with or without `sa_restorer`).
const DEFAULT_ACTION: [u64; 4] = [0; 4];

/// The size of the kernel's signal set.
const SIGSET_BYTES: libc::size_t = 8;

fn disposition(signal: libc::c_long) -> Option<u64> {
    let mut current = [0u64; 4];
    // SAFETY: a null new action only writes the current one into `current`, which is large
    // enough for the kernel's structure.
    let done = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signal,
            std::ptr::null::<u64>(),
            current.as_mut_ptr(),
            SIGSET_BYTES,
        )
    };
    (done == 0).then_some(current[0])
}

/// Whether this process ignores a signal that a command must not inherit ignored. SIGPIPE is
/// left out: the standard library resets it in every child it starts.
pub(crate) fn any_ignored() -> bool {
    SIGNALS
        .filter(|&s| s != libc::SIGPIPE as libc::c_long)
        .any(|signal| disposition(signal) == Some(libc::SIG_IGN as u64))
}

/// Sets every signal that can be caught to its default action. One system call each, so it
/// runs between fork and exec; the numbers the kernel refuses (SIGKILL, SIGSTOP) are skipped.
pub(crate) fn reset_to_default() -> io::Result<()> {
    for signal in SIGNALS {
        // SAFETY: the new action is a constant of the kernel's layout; no old one is asked for.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                DEFAULT_ACTION.as_ptr(),
                std::ptr::null_mut::<u64>(),
                SIGSET_BYTES,
            );
        }
    }
    Ok(())
}

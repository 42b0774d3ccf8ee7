//! The signal dispositions a command starts with. Across exec a program keeps the signals its
//! parent ignores (only handlers are reset): codemode started in the background by a shell
//! without job control ignores SIGINT and SIGQUIT, under `nohup` it ignores SIGHUP, and every
//! command it started would ignore them too, so that `terminal_signal`'s SIGINT (Ctrl-C) would
//! stop no program. Commands start with every signal at its default action instead.

use std::io;

/// Linux's signals are 1 to 64.
const SIGNALS: std::ops::RangeInclusive<libc::c_int> = 1..=64;

/// Whether this process ignores a signal that a command must not inherit ignored. SIGPIPE is
/// left out: the standard library resets it in every child it starts.
pub(crate) fn any_ignored() -> bool {
    SIGNALS.filter(|&s| s != libc::SIGPIPE).any(|signal| {
        // SAFETY: a null new action only reads the disposition into `current`.
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, std::ptr::null(), &mut current) == 0
                && current.sa_sigaction == libc::SIG_IGN
        }
    })
}

/// Sets every signal that can be caught to its default action. Only `sigaction`, so it runs
/// between fork and exec; the numbers the kernel refuses (SIGKILL, SIGSTOP, those the C
/// library keeps for itself) are skipped.
pub(crate) fn reset_to_default() -> io::Result<()> {
    for signal in SIGNALS {
        // SAFETY: the action is a plain value on this stack frame; SIG_DFL installs no handler.
        unsafe {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &default, std::ptr::null_mut());
        }
    }
    Ok(())
}

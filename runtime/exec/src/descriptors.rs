//! Keeping codemode's descriptors out of commands.

use std::io;

/// Marks every descriptor above 2 close-on-exec: whatever this process inherited or opened
/// without the flag stays out of the program it executes. (Marked rather than closed: the
/// standard library reports a failed exec through one of them.)
///
/// Async-signal-safe (one system call), so it also runs between fork and exec. The local
/// backend starts commands with `posix_spawn`, which runs nothing in the child, so there it
/// runs in the parent before each spawn; an embedder that wants a descriptor inherited by
/// its own children must set that up after the execution tools last started a command.
pub fn close_on_exec_above_stdio() -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range takes only integers.
    let done = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

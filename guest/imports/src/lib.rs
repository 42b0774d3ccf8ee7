//! The guests' only door to the host: the `codemode` imports, wrapped in safe functions.
//!
//! The frame layouts are defined once in the `codemode-wire` crate (`host/wire/`), which the host
//! builds too. Both guests (Boa's in `guest/`, Monty's in `guest/python/`) reach the host through
//! this crate and nothing else. A guest links only the imports it calls: the Python guest arms
//! no timers, so its module does not import them.

#[link(wasm_import_module = "codemode")]
extern "C" {
    fn boot_len() -> u32;
    fn boot_read(ptr: *mut u8, len: u32) -> u32;
    fn reply_read(ptr: *mut u8, len: u32) -> u32;
    fn log(ptr: *const u8, len: u32);
    fn call(id: u32, ptr: *const u8, len: u32) -> u32;
    fn timer_start(id: u32, delay_ms: f64) -> u32;
    fn timer_cancel(id: u32);
    fn done(ptr: *const u8, len: u32);
}

/// Copies the boot frame (program and binding declarations) out of the host.
pub fn read_boot() -> Vec<u8> {
    // SAFETY: imports are plain host functions; they only read or write the byte range we pass,
    // which is a live, exclusively borrowed buffer of exactly that length.
    unsafe {
        let len = boot_len();
        let mut buf = vec![0u8; len as usize];
        let copied = boot_read(buf.as_mut_ptr(), len);
        buf.truncate(copied as usize);
        buf
    }
}

/// Copies the pending delivery (a reply or a timer) of `len` bytes out of the host.
pub fn read_reply(len: u32) -> Vec<u8> {
    let mut buf = vec![0u8; len as usize];
    // SAFETY: as in `read_boot`: the host writes at most `len` bytes into our buffer.
    let copied = unsafe { reply_read(buf.as_mut_ptr(), len) };
    buf.truncate(copied as usize);
    buf
}

/// Streams one log entry to the host.
pub fn send_log(text: &str) {
    // SAFETY: the host only reads `text`'s bytes.
    unsafe { log(text.as_ptr(), text.len() as u32) }
}

/// Starts a binding call; true when the host accepted it and will deliver exactly one reply.
pub fn send_call(id: u32, frame: &[u8]) -> bool {
    // SAFETY: the host only reads `frame`'s bytes.
    unsafe { call(id, frame.as_ptr(), frame.len() as u32) == codemode_wire::CALL_ACCEPTED }
}

/// Arms a host timer; false when the host refused it (too many armed).
pub fn start_timer(id: u32, delay_ms: f64) -> bool {
    // SAFETY: no memory is passed.
    unsafe { timer_start(id, delay_ms) == codemode_wire::TIMER_ARMED }
}

/// Disarms a timer armed by [`start_timer`].
pub fn cancel_timer(id: u32) {
    // SAFETY: no memory is passed.
    unsafe { timer_cancel(id) }
}

/// Reports the program's outcome. The host ignores everything after the first.
pub fn send_done(frame: &[u8]) {
    // SAFETY: the host only reads `frame`'s bytes.
    unsafe { done(frame.as_ptr(), frame.len() as u32) }
}

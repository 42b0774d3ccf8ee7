//! A background process's output: one byte stream (stdout and stderr interleaved as produced),
//! bounded, that a reader consumes by offset.
//!
//! Offsets are absolute positions in everything the process wrote. The stream retains at most
//! `cap` bytes: bytes already read are dropped first to make room, and when the unread bytes
//! alone fill the cap the pump stops reading the pipe, so the process blocks on its next write
//! instead of losing output nobody has read yet.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

/// Largest slice one read returns.
pub const MAX_READ_BYTES: usize = 1024 * 1024;

pub struct Stream {
    state: Mutex<State>,
    /// Woken when bytes arrive, the stream closes, or a reader frees room.
    changed: Notify,
}

struct State {
    /// Retained bytes; the first is at offset `base`.
    data: VecDeque<u8>,
    base: u64,
    /// The end of what a reader has been given.
    read: u64,
    closed: bool,
    cap: usize,
    /// Scrollback: the oldest bytes go, read or not, and the writer never waits.
    lossy: bool,
}

impl State {
    fn end(&self) -> u64 {
        self.base + self.data.len() as u64
    }

    fn unread(&self) -> usize {
        (self.end() - self.read) as usize
    }
}

/// A slice of the stream: its text, and the offset just past it.
#[derive(Debug)]
pub struct Slice {
    pub text: String,
    pub next: u64,
    /// The offset the slice starts at (later than asked when older bytes were dropped).
    pub start: u64,
}

impl Stream {
    /// A stream that never drops unread bytes (its writer waits for a reader).
    pub fn new(cap: usize) -> Self {
        Self::with(cap, false)
    }

    /// A terminal's scrollback: the last `cap` bytes, whether read or not.
    pub fn scrollback(cap: usize) -> Self {
        Self::with(cap, true)
    }

    fn with(cap: usize, lossy: bool) -> Self {
        Self {
            state: Mutex::new(State {
                data: VecDeque::new(),
                base: 0,
                read: 0,
                closed: false,
                cap: cap.max(1),
                lossy,
            }),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; a poisoned lock still holds whole state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copies `reader` into the stream until it ends, never holding more unread bytes than the
    /// cap.
    pub async fn pump(&self, mut reader: impl AsyncRead + Unpin) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let room = loop {
                let notified = self.changed.notified();
                let room = {
                    let state = self.lock();
                    if state.lossy {
                        state.cap
                    } else {
                        state.cap - state.unread().min(state.cap)
                    }
                };
                if room > 0 {
                    break room;
                }
                notified.await;
            };
            let want = room.min(buf.len());
            let n = match reader.read(&mut buf[..want]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut state = self.lock();
            let overflow = (state.data.len() + n).saturating_sub(state.cap);
            // Only bytes already read are dropped (`room` kept the unread ones within the cap),
            // unless this is scrollback.
            let droppable = if state.lossy {
                state.data.len()
            } else {
                (state.read - state.base) as usize
            };
            let dropped = overflow.min(droppable);
            state.data.drain(..dropped);
            state.base += dropped as u64;
            state.read = state.read.max(state.base);
            let keep = n.min(state.cap);
            let skipped = n - keep;
            state.base += skipped as u64;
            state.read = state.read.max(state.base);
            state.data.extend(&buf[n - keep..n]);
            drop(state);
            self.changed.notify_waiters();
        }
        self.lock().closed = true;
        self.changed.notify_waiters();
    }

    /// The bytes from `offset` (the reader's own position when `None`), at most
    /// [`MAX_READ_BYTES`], cut at a character boundary.
    pub fn read(&self, offset: Option<u64>) -> Slice {
        let mut state = self.lock();
        let start = offset.unwrap_or(state.read).clamp(state.base, state.end());
        let from = (start - state.base) as usize;
        let to = (from + MAX_READ_BYTES).min(state.data.len());
        let bytes: Vec<u8> = state.data.range(from..to).copied().collect();
        let whole = if to == state.data.len() && state.closed {
            bytes.len()
        } else {
            complete_utf8(&bytes)
        };
        let next = start + whole as u64;
        state.read = state.read.max(next);
        drop(state);
        self.changed.notify_waiters();
        Slice {
            text: String::from_utf8_lossy(&bytes[..whole]).into_owned(),
            next,
            start,
        }
    }

    /// Whether bytes past `offset` exist or the stream ended.
    pub fn ready(&self, offset: Option<u64>) -> bool {
        let state = self.lock();
        state.closed || state.end() > offset.unwrap_or(state.read)
    }

    pub fn closed(&self) -> bool {
        self.lock().closed
    }

    /// Ends the stream where it is (its pump was stopped): readers stop waiting for more.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_waiters();
    }

    /// Whether the stream has ended and nothing lies past `offset`.
    pub fn ended_at(&self, offset: u64) -> bool {
        let state = self.lock();
        state.closed && state.end() <= offset
    }

    /// Whether the pump waits for a reader to make room (unread bytes fill the cap).
    pub fn waiting_for_reader(&self) -> bool {
        let state = self.lock();
        !state.lossy && !state.closed && state.unread() >= state.cap
    }

    /// Waits until bytes past `offset` exist or the stream ended, for at most `wait` and not
    /// past `signal`.
    pub async fn wait_ready(
        &self,
        offset: Option<u64>,
        wait: std::time::Duration,
        signal: &codemode_runtime::signal::AbortSignal,
    ) {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the check, so that a change between the two is not missed.
            let notified = self.notified();
            if self.ready(offset) {
                return;
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(deadline) => return,
                _ = signal.aborted() => return,
            }
        }
    }

    /// The notification a waiter registers before checking [`Stream::ready`], so that a change
    /// between the check and the wait is not missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

/// The length of `bytes` without a trailing, incomplete UTF-8 sequence (which the next read
/// returns whole).
pub(crate) fn complete_utf8(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=3.min(len) {
        let b = bytes[len - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back for the lead
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return len,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_multibyte_character_waits_for_its_rest() {
        let euro = "€".as_bytes(); // three bytes
        assert_eq!(complete_utf8(&euro[..2]), 0);
        assert_eq!(complete_utf8(euro), 3);
        assert_eq!(complete_utf8(b"ab"), 2);
        let mut cut = b"ab".to_vec();
        cut.push(0xF0);
        assert_eq!(complete_utf8(&cut), 2);
    }

    #[tokio::test]
    async fn unread_output_is_never_dropped_and_read_output_makes_room() {
        let stream = std::sync::Arc::new(Stream::new(8));
        let (mut writer, reader) = tokio::io::duplex(64);
        let pump = {
            let stream = stream.clone();
            tokio::spawn(async move { stream.pump(reader).await })
        };
        use tokio::io::AsyncWriteExt;
        writer.write_all(b"0123456789abcdef").await.unwrap();
        drop(writer);
        // The pump stops at the cap until something is read.
        loop {
            let notified = stream.notified();
            if stream.ready(Some(7)) {
                break;
            }
            notified.await;
        }
        let first = stream.read(None);
        assert_eq!(first.text, "01234567");
        let mut rest = String::new();
        loop {
            let closed = stream.closed();
            let slice = stream.read(None);
            rest.push_str(&slice.text);
            if !slice.text.is_empty() {
                continue;
            }
            if closed {
                break;
            }
            // Registered after the read, which wakes every waiter registered before it.
            let notified = stream.notified();
            if !stream.ready(Some(slice.next)) {
                notified.await;
            }
        }
        assert_eq!(rest, "89abcdef");
        pump.await.unwrap();
        // Re-reading from 0 gives what is still retained: the last 8 bytes.
        let again = stream.read(Some(0));
        assert_eq!((again.start, again.text.as_str()), (8, "89abcdef"));
    }
}

//! Persistent terminals: an interactive `bash` on a real pseudo-terminal (`nix`'s `openpty`),
//! started through the same backend as every other process, that keeps its state (working
//! directory, variables, running programs) from one call to the next. Each terminal belongs to
//! the agent that opened it (another agent's id is unknown to it), keeps a bounded scrollback,
//! and is closed when it has been idle too long or its owner opens more than allowed.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, ReadBuf};

use crate::jobs::Owner;
use crate::stream::{Slice, Stream};
use crate::subprocess::{Process, Spawn};
use crate::supervisor::{lock, remove_where, stop_all, supervise, StopWith, Supervised};
use crate::Exec;

/// Limits of the terminals runtime.
#[derive(Clone, Debug)]
pub struct TerminalLimits {
    /// Terminals one owner may have open at once.
    pub per_owner: usize,
    /// Terminals open at once across every owner.
    pub total: usize,
    /// Bytes of scrollback kept per terminal (the oldest go first).
    pub scrollback_bytes: usize,
    /// A terminal nobody sent to or read from for this long is closed.
    pub idle: Duration,
    /// Largest input one `terminal_send` writes.
    pub max_input_bytes: usize,
}

impl Default for TerminalLimits {
    fn default() -> Self {
        Self {
            per_owner: 8,
            total: 32,
            scrollback_bytes: 256 * 1024,
            idle: Duration::from_secs(30 * 60),
            max_input_bytes: 64 * 1024,
        }
    }
}

/// The signals `terminal_signal` delivers.
pub const SIGNALS: [(&str, i32); 4] = [
    ("SIGINT", libc::SIGINT),
    ("SIGTERM", libc::SIGTERM),
    ("SIGKILL", libc::SIGKILL),
    ("SIGHUP", libc::SIGHUP),
];

pub struct Terminals {
    limits: TerminalLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next: u64,
    open: BTreeMap<String, Arc<Terminal>>,
}

struct Terminal {
    id: String,
    owner: Owner,
    cwd: String,
    master: Arc<AsyncFd<OwnedFd>>,
    scrollback: Arc<Stream>,
    shell: Supervised,
    used: Mutex<Instant>,
    sequence: u64,
}

/// One terminal as `terminal_list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalInfo {
    pub id: String,
    pub cwd: String,
    pub running: bool,
}

impl Terminal {
    fn running(&self) -> bool {
        self.shell.exit().is_none()
    }

    fn touch(&self) {
        *lock(&self.used) = Instant::now();
    }
}

/// Reads a non-blocking terminal master through the reactor.
struct MasterReader(Arc<AsyncFd<OwnedFd>>);

impl AsyncRead for MasterReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = match self.0.poll_read_ready(cx) {
                Poll::Ready(Ok(guard)) => guard,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            let unfilled = buf.initialize_unfilled();
            match guard
                .try_io(|fd| nix::unistd::read(fd.get_ref(), unfilled).map_err(io::Error::from))
            {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // EIO: every process holding the terminal's other side has exited.
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Poll::Ready(Ok(())),
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl Terminals {
    pub fn new(limits: TerminalLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    /// Closes the terminals idle for longer than the limit.
    async fn close_idle(&self) {
        let idle = remove_where(&mut lock(&self.state).open, |t| {
            lock(&t.used).elapsed() > self.limits.idle
        });
        stop_all(&idle, |t| &t.shell).await;
    }

    /// Opens a terminal for `owner` in `cwd` (relative to the workspace).
    pub(crate) async fn open(
        &self,
        exec: &Exec,
        owner: Owner,
        cwd: Option<&str>,
        cols: u16,
        rows: u16,
    ) -> Result<String, String> {
        self.close_idle().await;
        let (open, total) = {
            let state = lock(&self.state);
            let total = state.open.len();
            (
                state.open.values().filter(|t| t.owner == owner).count(),
                total,
            )
        };
        if total >= self.limits.total {
            return Err(format!(
                "{total} terminals are open across all sessions, the most this server allows; close one (terminal_close) or try again later"
            ));
        }
        if open >= self.limits.per_owner {
            return Err(format!(
                "{} terminals are already open; close one (terminal_close) first",
                self.limits.per_owner
            ));
        }
        let permit = exec.admit()?;
        let workdir = exec.workspace.open(cwd)?;
        let (master, slave) =
            open_pty(cols, rows).map_err(|e| format!("cannot open a pseudo-terminal: {e}"))?;
        let mut process = Process::spawn_pty(
            Spawn {
                program: &exec.bash,
                args: vec![
                    OsString::from("--noprofile"),
                    OsString::from("--norc"),
                    OsString::from("-i"),
                ],
                cwd: workdir.child_path(),
                env: vec![("TERM".into(), "dumb".into()), ("PS1".into(), "$ ".into())],
            },
            exec.backend.as_ref(),
            slave,
        )?;
        drop(workdir);
        process.hold(permit);
        // SAFETY: `master` is an open descriptor the AsyncFd owns (an OwnedFd), so it stays
        // open and the same for the AsyncFd's whole life.
        let master = Arc::new(
            unsafe { AsyncFd::register(master) }
                .map_err(|e| format!("cannot watch the pseudo-terminal: {e}"))?,
        );
        let scrollback = Arc::new(Stream::scrollback(self.limits.scrollback_bytes));
        let pump = {
            let scrollback = scrollback.clone();
            let reader = MasterReader(master.clone());
            tokio::spawn(async move { scrollback.pump(reader).await })
        };
        let (id, sequence) = {
            let mut state = lock(&self.state);
            state.next += 1;
            (format!("term-{}", state.next), state.next)
        };
        let terminal = Arc::new(Terminal {
            id: id.clone(),
            owner,
            cwd: cwd.filter(|c| !c.is_empty()).unwrap_or(".").to_owned(),
            master,
            scrollback: scrollback.clone(),
            shell: supervise(
                process,
                scrollback.clone(),
                pump,
                StopWith::HangUp,
                exec.config.grace,
                Duration::from_millis(500),
            ),
            used: Mutex::new(Instant::now()),
            sequence,
        });
        lock(&self.state).open.insert(id.clone(), terminal);
        Ok(id)
    }

    fn find(&self, owner: Owner, id: &str) -> Result<Arc<Terminal>, String> {
        let terminal = lock(&self.state)
            .open
            .get(id)
            .filter(|t| t.owner == owner)
            .cloned()
            .ok_or_else(|| {
                format!("unknown terminal {id:?}; terminal_list shows this agent's terminals")
            })?;
        terminal.touch();
        Ok(terminal)
    }

    /// Writes `input` to the terminal, as if typed.
    pub(crate) async fn send(&self, owner: Owner, id: &str, input: &str) -> Result<usize, String> {
        if input.len() > self.limits.max_input_bytes {
            return Err(format!(
                "input is {} bytes; send at most {} at a time",
                input.len(),
                self.limits.max_input_bytes
            ));
        }
        let terminal = self.find(owner, id)?;
        if !terminal.running() {
            return Err(format!(
                "terminal {id:?} has exited; close it and open another"
            ));
        }
        let mut rest = input.as_bytes();
        while !rest.is_empty() {
            let mut guard = terminal
                .master
                .writable()
                .await
                .map_err(|e| format!("cannot write to the terminal: {e}"))?;
            match guard.try_io(|fd| nix::unistd::write(fd.get_ref(), rest).map_err(io::Error::from))
            {
                Ok(Ok(n)) => rest = &rest[n..],
                Ok(Err(e)) => return Err(format!("cannot write to the terminal: {e}")),
                Err(_would_block) => {}
            }
        }
        Ok(input.len())
    }

    /// Output from `offset` (the reader's own position when `None`), waiting up to `wait` for
    /// some when there is none yet.
    pub(crate) async fn read(
        &self,
        owner: Owner,
        id: &str,
        offset: Option<u64>,
        wait: Duration,
        signal: &codemode_runtime::signal::AbortSignal,
    ) -> Result<(Slice, bool), String> {
        let terminal = self.find(owner, id)?;
        // The scrollback ends when the shell and everything holding the terminal have exited.
        terminal.scrollback.wait_ready(offset, wait, signal).await;
        let exited = !terminal.running();
        Ok((terminal.scrollback.read(offset), exited))
    }

    /// Delivers `signal` to the terminal's foreground process group.
    pub(crate) fn signal(&self, owner: Owner, id: &str, name: &str) -> Result<bool, String> {
        let signal = SIGNALS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
            .ok_or_else(|| {
                format!("unknown signal {name:?}; one of SIGINT, SIGTERM, SIGKILL, SIGHUP")
            })?;
        let terminal = self.find(owner, id)?;
        let Ok(group) = nix::unistd::tcgetpgrp(terminal.master.get_ref()) else {
            return Ok(false);
        };
        // SAFETY: killpg only reads its integer arguments.
        Ok(unsafe { libc::killpg(group.as_raw(), signal) } == 0)
    }

    /// Closes a terminal: SIGHUP to its session, SIGKILL after the grace period.
    pub(crate) async fn close(&self, owner: Owner, id: &str) -> Result<(), String> {
        let terminal = self.find(owner, id)?;
        lock(&self.state).open.remove(id);
        terminal.shell.stop().await;
        Ok(())
    }

    /// The owner's terminals, oldest first.
    pub fn list(&self, owner: Owner) -> Vec<TerminalInfo> {
        let state = lock(&self.state);
        let mut open: Vec<&Arc<Terminal>> =
            state.open.values().filter(|t| t.owner == owner).collect();
        open.sort_by_key(|t| t.sequence);
        open.into_iter()
            .map(|t| TerminalInfo {
                id: t.id.clone(),
                cwd: t.cwd.clone(),
                running: t.running(),
            })
            .collect()
    }

    /// Closes every terminal of `owner`: the owner is gone.
    pub async fn dispose_owner(&self, owner: Owner) {
        let closing = remove_where(&mut lock(&self.state).open, |t| t.owner == owner);
        stop_all(&closing, |t| &t.shell).await;
    }

    /// Closes every terminal: the runtime is going away.
    pub async fn shutdown(&self) {
        let closing = remove_where(&mut lock(&self.state).open, |_| true);
        stop_all(&closing, |t| &t.shell).await;
    }
}

/// A pseudo-terminal pair, both ends close-on-exec from the moment they exist (`openpty`
/// sets the flag afterwards, so a command forked meanwhile by another call would inherit
/// them), the master non-blocking. The slave reaches only the shell it is handed to as its
/// standard streams.
fn open_pty(cols: u16, rows: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::OFlag;
    let master = nix::pty::posix_openpt(
        OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
    )?;
    nix::pty::grantpt(&master)?;
    nix::pty::unlockpt(&master)?;
    let master = OwnedFd::from(master);
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `winsize`, which lives across the call; TIOCGPTPEER
    // takes open flags and returns a new descriptor, owned right away.
    unsafe {
        if libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) < 0 {
            return Err(io::Error::last_os_error());
        }
        let slave = libc::ioctl(
            master.as_raw_fd(),
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if slave < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((master, OwnedFd::from_raw_fd(slave)))
    }
}

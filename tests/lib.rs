//! Shared helpers for the end-to-end suites: build a runtime, bind tools, run a program, know
//! when a program has started, find the `codemode` binary, make temporary directories; (in
//! [`harness`]) a Code Mode registry over the real runtime; and (in [`mcp_wire`]) a client of
//! MCP 2026-07-28 over plain HTTP.

pub mod fuzz_targets;
pub mod harness;
pub mod mcp_wire;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use codemode_host::{Budgets, WasmCodeRuntime};
use codemode_runtime::code::{
    binding, BindingFn, BindingNamespace, CodeRuntime, ErrorClass, FailureKind, RunRequest,
    RunResult,
};
use codemode_runtime::signal::AbortSignal;
use serde_json::Value;

pub use serde_json::json;

/// This crate's directory: as `cargo test` names it when it runs the tests, else as it was at
/// build time. A test binary reused from another checkout of the same sources (a shared target
/// directory is not rebuilt for a new path) would otherwise read that checkout's files.
pub fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The repository's `fixtures/` directory.
pub fn fixtures() -> PathBuf {
    crate::manifest_dir().join("../fixtures")
}

/// Every `.ts` file of `fixtures/<dir>`, sorted: its name without the extension, and its text.
pub fn typescript_fixtures(dir: &str) -> Vec<(String, String)> {
    fixtures_with_extension(dir, "ts")
}

/// Every `.py` file of `fixtures/<dir>`, by name without extension, in name order.
pub fn python_fixtures(dir: &str) -> Vec<(String, String)> {
    fixtures_with_extension(dir, "py")
}

fn fixtures_with_extension(dir: &str, extension: &str) -> Vec<(String, String)> {
    let dir = fixtures().join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == extension))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect()
}

/// A runtime with the default budgets.
pub fn runtime() -> WasmCodeRuntime {
    runtime_with(Budgets::default())
}

pub fn runtime_with(budgets: Budgets) -> WasmCodeRuntime {
    WasmCodeRuntime::new(budgets).expect("runtime")
}

/// A `tools` namespace with `ToolCallError` / `toolName`.
pub fn tools(functions: Vec<(&str, BindingFn)>) -> BindingNamespace {
    namespace("tools", functions, Some(("ToolCallError", "toolName")))
}

pub fn namespace(
    global: &str,
    functions: Vec<(&str, BindingFn)>,
    class: Option<(&str, &str)>,
) -> BindingNamespace {
    BindingNamespace {
        global: global.into(),
        functions: functions
            .into_iter()
            .map(|(n, f)| (n.to_owned(), f))
            .collect::<BTreeMap<_, _>>(),
        error_class: class.map(|(name, member)| ErrorClass {
            name: name.into(),
            member_name_property: member.into(),
        }),
    }
}

/// A binding that returns its arguments.
pub fn echo() -> BindingFn {
    binding(|args, _| async move { Ok(args) })
}

/// A binding that counts its invocations and returns its arguments.
pub fn counted(counter: Arc<AtomicUsize>) -> BindingFn {
    binding(move |args, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { Ok(args) }
    })
}

/// A binding that resolves with `value` after `ms` milliseconds, or rejects as soon as the
/// run tells it to stop.
pub fn slow(ms: u64, value: Value) -> BindingFn {
    binding(move |_, signal| {
        let value = value.clone();
        async move {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => Ok(value),
                reason = signal.aborted() => Err(reason),
            }
        }
    })
}

/// Tells a test that its program called a binding (see [`announced`]).
pub struct Started {
    calls: tokio::sync::watch::Receiver<usize>,
    seen: usize,
}

impl Started {
    /// Waits for one more call of the announced binding than the last wait saw (the first
    /// call, the first time). Panics if the binding was dropped (its run ended) without it.
    pub async fn wait(&mut self) {
        self.wait_for(self.seen + 1).await;
    }

    /// Waits until the announced binding has been called `calls` times in all. Panics if it
    /// was dropped (every run given it ended) before.
    pub async fn wait_for(&mut self, calls: usize) {
        self.calls
            .wait_for(|made| *made >= calls)
            .await
            .unwrap_or_else(|_| panic!("the announced binding was dropped before call {calls}"));
        self.seen = self.seen.max(calls);
    }
}

/// `inner`, announcing each call on the returned [`Started`] before it runs: the announcement
/// is made when the program makes the call, so a test that waits for it knows the program got
/// that far (a start handshake, where a sleep would only guess). Clones of the binding (one per
/// run, say) count their calls together.
pub fn announced(inner: BindingFn) -> (BindingFn, Started) {
    let (sender, receiver) = tokio::sync::watch::channel(0usize);
    let wrapped: BindingFn = Arc::new(move |args, signal| {
        sender.send_modify(|made| *made += 1);
        inner(args, signal)
    });
    (
        wrapped,
        Started {
            calls: receiver,
            seen: 0,
        },
    )
}

/// A binding that returns its arguments and announces each call: a program calls it (without
/// awaiting it) right before the part a test must catch it in.
pub fn start_marker() -> (BindingFn, Started) {
    announced(echo())
}

/// A binding that always rejects with `message`.
pub fn failing(message: &str) -> BindingFn {
    let message = message.to_owned();
    binding(move |_, _| {
        let message = message.clone();
        async move { Err(message) }
    })
}

pub async fn run_on(
    rt: &WasmCodeRuntime,
    program: &str,
    bindings: Vec<BindingNamespace>,
    signal: Option<AbortSignal>,
) -> RunResult {
    rt.run(RunRequest {
        program: program.into(),
        bindings,
        signal,
        ..Default::default()
    })
    .await
    .expect("run resolves")
}

/// Runs `program` with the default budgets and an echo tool.
pub async fn run(program: &str) -> RunResult {
    run_on(
        &runtime(),
        program,
        vec![tools(vec![("echo", echo())])],
        None,
    )
    .await
}

/// Asserts a failure of `kind` and returns its message.
#[track_caller]
pub fn failure(result: &RunResult, kind: FailureKind) -> String {
    let error = result
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("expected a {kind} failure, got {result:?}"));
    assert_eq!(error.kind, kind, "{result:?}");
    assert!(result.value.is_none(), "a failed run carries no value");
    error.message.clone()
}

/// Asserts success and returns the value.
#[track_caller]
pub fn value(result: &RunResult) -> Value {
    assert!(
        result.error.is_none(),
        "expected success, got {:?}",
        result.error
    );
    result
        .value
        .as_ref()
        .map(codemode_runtime::json::clone_deep)
        .unwrap_or(Value::Null)
}

/// Runs the program `fixtures/<fixture>` as the body of an async function in Node and in
/// codemode (default budgets, an echo tool) and returns the cases each made, Node's first.
/// Both must return arrays of the same length, of at least `at_least` cases.
pub async fn fixture_cases_beside_node(fixture: &str, at_least: usize) -> (Vec<Value>, Vec<Value>) {
    let path = crate::manifest_dir().join("../fixtures").join(fixture);
    let body = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the fixture {}: {e}", path.display()));
    let script = format!(
        "(async function () {{'use strict';\n{body}\n}})().then((v) => process.stdout.write(JSON.stringify(v)), (e) => {{ console.error(e); process.exit(1); }});"
    );
    let out = std::process::Command::new("node")
        .args(["-e", &script])
        .output()
        .expect("node must be on PATH (.ci/run installs it with the test toolchain)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node: Value = serde_json::from_slice(&out.stdout).expect("node's JSON");
    let result = run(&body).await;
    assert!(result.error.is_none(), "{:?}", result.error);
    let (Value::Array(node), Some(Value::Array(ours))) = (node, result.value) else {
        panic!("both return arrays");
    };
    assert!(node.len() >= at_least, "the fixture makes its cases");
    assert_eq!(ours.len(), node.len());
    (node, ours)
}

/// Whether `id` is a run id: a random (version 4) UUID, unique across processes.
pub fn is_run_id(id: &str) -> bool {
    uuid::Uuid::parse_str(id).is_ok_and(|uuid| uuid.get_version_num() == 4) && id.len() == 36
}

/// Replaces the run id that begins any string of `value` (a call or sub-call id) with `run`,
/// after checking it is one, so that outputs of different runs compare equal.
pub fn name_run_ids_run(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Some(head) = text.get(..36).filter(|head| is_run_id(head)) {
                let rest = &text[head.len()..];
                if rest.is_empty() || rest.starts_with(':') {
                    *text = format!("run{rest}");
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(name_run_ids_run),
        Value::Object(map) => map.values_mut().for_each(name_run_ids_run),
        _ => {}
    }
}

/// The `codemode` binary of this build: the test binary lives in `target/<profile>/deps`, the
/// CLI in `target/<profile>`. `cargo test` does not build it (it is another package's binary).
pub fn codemode_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let cli = dir.join(format!("codemode{}", std::env::consts::EXE_SUFFIX));
    assert!(
        cli.exists(),
        "{} is missing: build it with `cargo build -p codemode-cli --features bench`",
        cli.display()
    );
    cli
}

/// A pid as a command wrote it, `PID PID_NAMESPACE` (`echo $$ $(readlink /proc/self/ns/pid)`),
/// numbered as this process sees it: a sandboxed command sees the pids of its own namespace.
/// `None` while the text is incomplete; `Some(None)` when no such process lives any more.
pub fn host_pid(text: &str) -> Option<Option<i32>> {
    let line = text.strip_suffix('\n')?;
    let (pid, namespace) = line.split_once(' ')?;
    let pid: i32 = pid.parse().ok()?;
    let found = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let host: i32 = entry.file_name().to_str()?.parse().ok()?;
            let ns = std::fs::read_link(entry.path().join("ns/pid")).ok()?;
            if ns.to_str() != Some(namespace) {
                return None;
            }
            let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
            let innermost = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))?
                .split_whitespace()
                .last()?
                .parse::<i32>()
                .ok()?;
            (innermost == pid).then_some(host)
        });
    Some(found)
}

/// A child process killed and reaped when dropped, so that a failing test leaves none behind.
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` (a `codemode mcp --http …`) with no input, its output dropped and its
/// stderr piped, and waits for the URL it announces (`http://HOST:PORT/mcp`). Returns the child,
/// the URL and the whole line it was on; the rest of its stderr is drained on a thread, so the
/// child never blocks on a full pipe.
pub fn spawn_announced(
    command: &mut std::process::Command,
) -> (std::process::Child, String, String) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut lines = BufReader::new(stderr).lines();
    let (url, line) = loop {
        let line = lines
            .next()
            .expect("codemode mcp prints its address")
            .expect("stderr is text");
        if let Some(at) = line.find("http://") {
            break (line[at..].trim().to_owned(), line);
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, url, line)
}

/// The socket address in a URL [`spawn_announced`] gave.
pub fn url_address(url: &str) -> std::net::SocketAddr {
    let rest = url.strip_prefix("http://").expect("an http URL");
    rest[..rest.find('/').expect("an address and a path")]
        .parse()
        .expect("a socket address")
}

/// Runs `command` with `stdin` written to its standard input, and collects its exit status,
/// standard output and standard error. A command that exits before reading its input (a CLI
/// refusing its arguments) closes the pipe under the write; that is expected, and the status
/// and stderr say what happened.
pub fn output_with_stdin(command: &mut std::process::Command, stdin: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    let written = child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin.as_bytes());
    if let Err(error) = written {
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::BrokenPipe,
            "write to {command:?}: {error}"
        );
    }
    child.wait_with_output().expect("the command exits")
}

/// A fresh directory under the system's temporary directory, made for one test and removed
/// with everything in it when dropped, so also when the test panics. Its path is canonical
/// (what a process running in it sees as its working directory).
pub struct TempDir {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// A [`TempDir`] named `codemode-<label>-<random>`, private to this user (mode 0700).
pub fn temp_dir(label: &str) -> TempDir {
    temp_dir_in(&std::env::temp_dir(), label)
}

/// A temporary directory beneath `base`, removed when dropped.
pub fn temp_dir_in(base: &Path, label: &str) -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("codemode-{label}-"))
        .tempdir_in(base)
        .expect("a temporary directory");
    let path = dir
        .path()
        .canonicalize()
        .expect("a canonical temporary path");
    TempDir { path, _dir: dir }
}

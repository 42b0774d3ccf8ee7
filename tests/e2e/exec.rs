//! The execution tools (`bash`, `job_output`, `job_list`, `job_kill`) on real processes, on
//! both backends: the same behavioural suite runs on `local` and on `sandbox`, then what only
//! the sandbox refuses, then a `run_code` program and the CLI.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use codemode_e2e::*;
use codemode_exec::backend::{Backend, Local};
use codemode_exec::jobs::JobLimits;
use codemode_exec::sandbox::{Sandbox, SandboxOptions};
use codemode_exec::terminal::TerminalLimits;
use codemode_exec::{Exec, ExecConfig};
use codemode_runtime::signal::{AbortController, AbortSignal};
use codemode_runtime::tools::{
    AgentScope, RegistrationGuard, Registry, ToolExecutionInput, ToolExecutionResult,
};
use serde_json::Value;

mod confinement;
mod isolation;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Local,
    Sandbox,
}

struct Rig {
    registry: Registry,
    exec: Arc<Exec>,
    root: TempDir,
    _guard: RegistrationGuard,
}

/// Set to skip the sandbox's cases on a kernel that cannot enforce it (they fail otherwise).
const SKIP_SANDBOX: &str = "CODEMODE_TEST_SKIP_SANDBOX";

/// A registry with the execution tools on `kind`. `None` only when this kernel cannot
/// enforce the sandbox and [`SKIP_SANDBOX`] says to skip it; the refusal must say why.
fn rig(kind: Kind, config: ExecConfig) -> Option<Rig> {
    rig_with(kind, config, SandboxOptions::default())
}

fn rig_with(kind: Kind, config: ExecConfig, options: SandboxOptions) -> Option<Rig> {
    let root = temp_dir("exec-root");
    let backend: Arc<dyn Backend> = match kind {
        Kind::Local => Arc::new(Local),
        Kind::Sandbox => match Sandbox::with_options(root.path(), options) {
            Ok(sandbox) => Arc::new(sandbox),
            Err(refusal) => {
                let message = refusal.to_string();
                assert!(
                    message.contains("cannot enforce the sandbox"),
                    "an unclear refusal: {message}"
                );
                assert!(
                    std::env::var_os(SKIP_SANDBOX).is_some(),
                    "{message} (set {SKIP_SANDBOX}=1 to skip the sandbox's cases on this kernel)"
                );
                eprintln!("sandbox suite skipped on this kernel: {message}");
                return None;
            }
        },
    };
    let exec = Exec::new(root.path(), backend, config).expect("exec runtime");
    let registry = Registry::new();
    let guard = codemode_exec::register(&registry, &exec).expect("register");
    Some(Rig {
        registry,
        exec,
        root,
        _guard: guard,
    })
}

impl Rig {
    async fn call_with(
        &self,
        agent: &AgentScope,
        tool: &str,
        args: Value,
        signal: AbortSignal,
    ) -> Arc<ToolExecutionResult> {
        self.registry
            .execute(ToolExecutionInput::new("c", tool, args, signal).agent(agent))
            .await
    }

    async fn call(&self, agent: &AgentScope, tool: &str, args: Value) -> Arc<ToolExecutionResult> {
        self.call_with(agent, tool, args, AbortSignal::never())
            .await
    }

    async fn bash(&self, agent: &AgentScope, command: &str) -> Value {
        let result = self
            .call(
                agent,
                "bash",
                json!({"command": command, "description": "Test command"}),
            )
            .await;
        assert!(!result.is_error(), "{command}: {}", result.text());
        result.value().cloned().expect("a value")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

fn alive(pid: Option<i32>) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid.is_some_and(|pid| unsafe { libc::kill(pid, 0) == 0 })
}

/// The process a command named in `path` (see [`host_pid`]) as this process numbers it, once
/// the file is written; `None` when that process is already gone.
async fn read_pid(path: &Path) -> Option<i32> {
    for _ in 0..3000 {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Some(found) = host_pid(&text) {
                return found;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} never held a pid", path.display())
}

async fn gone(pid: Option<i32>) -> bool {
    // A killed process may take a moment to be reaped by its new parent.
    for _ in 0..1500 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Waits until a process running exactly `argv` leads its terminal's foreground process group
/// (its group is the terminal's foreground group, `/proc/PID/stat` fields 5 and 8).
async fn in_the_foreground(argv: &[&str]) -> bool {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    for _ in 0..250 {
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let dir = entry.path();
            if std::fs::read(dir.join("cmdline")).ok().as_deref() != Some(&wanted[..]) {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
                continue;
            };
            // The fields after the command name, which is in parentheses and may hold spaces.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().collect())
                .unwrap_or_default();
            // state, ppid, pgrp, session, tty_nr, tpgid
            if fields.len() > 5 && fields[2] == fields[5] {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The behaviour both backends must share.
async fn shared_behaviour(kind: Kind) {
    let Some(rig) = rig(kind, ExecConfig::default()) else {
        return;
    };
    let agent = AgentScope::root();

    // Output interleaved as produced, the exit code, and the content's last line.
    let result = rig
        .call(
            &agent,
            "bash",
            json!({"command": "echo out; echo err 1>&2; echo out2; exit 3", "description": "Print and fail"}),
        )
        .await;
    assert_eq!(
        result.value(),
        Some(
            &json!({"output": "out\nerr\nout2\n", "exitCode": 3, "timedOut": false, "truncated": false})
        )
    );
    assert_eq!(result.text(), "out\nerr\nout2\n[exit code: 3]");

    // Nothing carries over between calls.
    rig.bash(&agent, "export CARRIED=1; cd /").await;
    let fresh = rig.bash(&agent, "echo \"[$CARRIED]\"; pwd").await;
    assert_eq!(
        fresh["output"],
        format!("[]\n{}\n", rig.root.path().display())
    );

    // The working directory stays inside the workspace.
    std::fs::create_dir_all(rig.path("sub")).unwrap();
    let outside = temp_dir("exec-outside");
    std::os::unix::fs::symlink(outside.path(), rig.path("out")).unwrap();
    let inside = rig
        .call(
            &agent,
            "bash",
            json!({"command": "pwd", "description": "Where", "workdir": "sub"}),
        )
        .await;
    assert_eq!(
        inside.value().and_then(|v| v["output"].as_str()),
        Some(format!("{}\n", rig.path("sub").display()).as_str())
    );
    for escape in ["..", "sub/../..", "/tmp", "out", "missing"] {
        let refused = rig
            .call(
                &agent,
                "bash",
                json!({"command": "pwd", "description": "Escape", "workdir": escape}),
            )
            .await;
        assert!(refused.is_error(), "{escape}: {}", refused.text());
    }

    // A timeout kills the whole group, including a child left in the background.
    let timed = rig
        .call(
            &agent,
            "bash",
            json!({"command": "sleep 30 & echo $! $(readlink /proc/self/ns/pid) > bg.pid; sleep 30", "description": "Hang", "timeoutMs": 300}),
        )
        .await;
    assert_eq!(
        timed.value().map(|v| v["timedOut"].clone()),
        Some(json!(true))
    );
    assert!(timed.text().contains("[timed out"), "{}", timed.text());
    assert!(
        gone(read_pid(&rig.path("bg.pid")).await).await,
        "the group outlived its timeout"
    );

    // A finished command leaves nothing running behind it.
    rig.bash(
        &agent,
        "sleep 30 & echo $! $(readlink /proc/self/ns/pid) > left.pid",
    )
    .await;
    assert!(
        gone(read_pid(&rig.path("left.pid")).await).await,
        "a detached child survived its call"
    );

    // Long output keeps its head and tail around a marker.
    let long = rig
        .bash(
            &agent,
            "head -c 200000 /dev/zero | tr '\\0' a; echo; echo end",
        )
        .await;
    assert_eq!(long["truncated"], json!(true));
    let text = long["output"].as_str().unwrap();
    assert!(text.starts_with("aaaa") && text.ends_with("a\nend\n"));
    assert!(text.contains("bytes of output omitted"), "{}", &text[..100]);

    // A cancelled call stops its command.
    let controller = AbortController::new();
    let signal = controller.signal();
    let cancelled = {
        let call = rig.call_with(
            &agent,
            "bash",
            json!({"command": "echo $$ $(readlink /proc/self/ns/pid) > fg.pid; sleep 30", "description": "Hang"}),
            signal,
        );
        tokio::pin!(call);
        let pid_file = rig.path("fg.pid");
        let pid = tokio::select! {
            pid = read_pid(&pid_file) => pid,
            _ = &mut call => panic!("the call ended by itself"),
        };
        controller.abort("stop");
        let result = call.await;
        assert!(gone(pid).await, "a cancelled command kept running");
        result
    };
    assert!(cancelled.is_error());

    jobs_behaviour(&rig).await;
    terminals_behaviour(kind).await;
}

/// Reads a terminal until its output (from offset 0) contains `wanted`; returns it all.
async fn read_until(rig: &Rig, agent: &AgentScope, id: &str, wanted: &str) -> String {
    let mut seen = String::new();
    // Bounded by time, not by reads: a large output arrives in as many small reads as the
    // terminal hands it over.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let read = rig
            .call(
                agent,
                "terminal_read",
                json!({"terminalId": id, "waitMs": 200}),
            )
            .await;
        assert!(!read.is_error(), "{}", read.text());
        seen.push_str(read.value().unwrap()["output"].as_str().unwrap());
        if seen.contains(wanted) {
            return seen;
        }
    }
    panic!("{wanted:?} never appeared in {seen:?}")
}

async fn send(rig: &Rig, agent: &AgentScope, id: &str, input: &str) {
    let sent = rig
        .call(
            agent,
            "terminal_send",
            json!({"terminalId": id, "input": input}),
        )
        .await;
    assert!(!sent.is_error(), "{}", sent.text());
}

async fn terminals_behaviour(kind: Kind) {
    let Some(rig) = rig(kind, ExecConfig::default()) else {
        return;
    };
    let agent = AgentScope::root();
    let other = AgentScope::root();
    std::fs::create_dir_all(rig.path("sub")).unwrap();
    let opened = rig
        .call(
            &agent,
            "terminal_open",
            json!({"cwd": "sub", "cols": 100, "rows": 30}),
        )
        .await;
    assert!(!opened.is_error(), "{}", opened.text());
    let id = opened.value().unwrap()["terminalId"]
        .as_str()
        .unwrap()
        .to_owned();

    // State lasts from one call to the next, on a real terminal.
    send(&rig, &agent, &id, "export X=42\n").await;
    send(&rig, &agent, &id, "echo x=$X; pwd; tty\n").await;
    let seen = read_until(&rig, &agent, &id, "/dev/pts/").await;
    assert!(seen.contains("x=42"), "{seen}");
    assert!(
        seen.contains(&format!("{}", rig.path("sub").display())),
        "{seen}"
    );

    // A signal reaches the foreground program, and the shell goes on.
    // The terminal echoes what is typed: `sl""ept` is printed as `slept` only when it runs.
    // The sleep's length names it (each backend's suite runs one at the same time), and the
    // signal waits until it leads the terminal's foreground group: a signal sent while the
    // shell was still handing the terminal over would reach the shell, which ignores it.
    let naptime = match kind {
        Kind::Local => "30.01",
        Kind::Sandbox => "30.02",
    };
    send(
        &rig,
        &agent,
        &id,
        &format!("(echo ready-\"\"sleep; exec sleep {naptime}); echo sl\"\"ept\n"),
    )
    .await;
    read_until(&rig, &agent, &id, "ready-sleep").await;
    assert!(
        in_the_foreground(&["sleep", naptime]).await,
        "the sleep never led its terminal's foreground group"
    );
    let signalled = rig
        .call(
            &agent,
            "terminal_signal",
            json!({"terminalId": id, "signal": "SIGINT"}),
        )
        .await;
    assert_eq!(
        signalled.value(),
        Some(&json!({"terminalId": id, "delivered": true}))
    );
    send(&rig, &agent, &id, "echo after-$X\n").await;
    let seen = read_until(&rig, &agent, &id, "after-42").await;
    assert!(!seen.contains("slept"), "{seen}");

    // Another agent's id is unknown.
    for (tool, args) in [
        ("terminal_read", json!({"terminalId": id})),
        (
            "terminal_send",
            json!({"terminalId": id, "input": "exit\n"}),
        ),
        (
            "terminal_signal",
            json!({"terminalId": id, "signal": "SIGKILL"}),
        ),
        ("terminal_close", json!({"terminalId": id})),
    ] {
        let refused = rig.call(&other, tool, args).await;
        assert!(
            refused.is_error() && refused.text().contains("unknown terminal"),
            "{tool}: {}",
            refused.text()
        );
    }
    let theirs = rig.call(&other, "terminal_list", json!({})).await;
    assert_eq!(theirs.value(), Some(&json!({"terminals": []})));
    let mine = rig.call(&agent, "terminal_list", json!({})).await;
    assert_eq!(
        mine.value(),
        Some(&json!({"terminals": [{"terminalId": id, "cwd": "sub", "running": true}]}))
    );

    // The scrollback is bounded: offset 0 gives what is left of it.
    send(
        &rig,
        &agent,
        &id,
        "head -c 400000 /dev/zero | tr '\\0' c; echo; echo big-\"\"done\n",
    )
    .await;
    read_until(&rig, &agent, &id, "big-done").await;
    let all = rig
        .call(
            &agent,
            "terminal_read",
            json!({"terminalId": id, "offset": 0}),
        )
        .await;
    let kept = all.value().unwrap()["output"].as_str().unwrap().len();
    assert!(kept <= 256 * 1024, "{kept} bytes of scrollback");

    // Closing ends everything in it.
    send(
        &rig,
        &agent,
        &id,
        "sleep 30 & echo $! $(readlink /proc/self/ns/pid) > term.pid\n",
    )
    .await;
    let pid = read_pid(&rig.path("sub/term.pid")).await;
    let closed = rig
        .call(&agent, "terminal_close", json!({"terminalId": id}))
        .await;
    assert_eq!(
        closed.value(),
        Some(&json!({"terminalId": id, "closed": true}))
    );
    assert!(
        gone(pid).await,
        "a terminal's program outlived terminal_close"
    );
    let after = rig.call(&agent, "terminal_list", json!({})).await;
    assert_eq!(after.value(), Some(&json!({"terminals": []})));

    // Closing ends a program that ignores the hangup too, once the shell has gone.
    let opened = rig.call(&agent, "terminal_open", json!({})).await;
    let id = opened.value().unwrap()["terminalId"]
        .as_str()
        .unwrap()
        .to_owned();
    send(
        &rig,
        &agent,
        &id,
        "nohup sleep 30 >/dev/null 2>&1 & echo $! $(readlink /proc/self/ns/pid) > hup.pid\n",
    )
    .await;
    let pid = read_pid(&rig.path("hup.pid")).await;
    let closed = rig
        .call(&agent, "terminal_close", json!({"terminalId": id}))
        .await;
    assert!(!closed.is_error(), "{}", closed.text());
    assert!(
        gone(pid).await,
        "a program that ignores SIGHUP outlived terminal_close"
    );

    // Teardown closes what is left.
    let opened = rig.call(&agent, "terminal_open", json!({})).await;
    let id = opened.value().unwrap()["terminalId"]
        .as_str()
        .unwrap()
        .to_owned();
    send(
        &rig,
        &agent,
        &id,
        "echo $$ $(readlink /proc/self/ns/pid) > shell.pid\n",
    )
    .await;
    let pid = read_pid(&rig.path("shell.pid")).await;
    rig.exec.shutdown().await;
    assert!(gone(pid).await, "teardown left a terminal's shell running");
}

async fn start_job(rig: &Rig, agent: &AgentScope, command: &str) -> String {
    let started = rig
        .call(
            agent,
            "bash",
            json!({"command": command, "description": "Background", "run_in_background": true}),
        )
        .await;
    assert!(!started.is_error(), "{}", started.text());
    let value = started.value().unwrap();
    assert_eq!(value["kind"], "background");
    let id = value["jobId"].as_str().unwrap().to_owned();
    assert_eq!(started.text(), format!("started background job {id}"));
    id
}

/// Reads a job until it ends; returns everything it wrote and its last read.
async fn drain(rig: &Rig, agent: &AgentScope, id: &str) -> (String, Value) {
    let mut all = String::new();
    loop {
        let read = rig
            .call(agent, "job_output", json!({"jobId": id, "waitMs": 2000}))
            .await;
        assert!(!read.is_error(), "{}", read.text());
        let value = read.value().unwrap().clone();
        all.push_str(value["output"].as_str().unwrap());
        if value["running"] == json!(false) && value["output"] == "" {
            return (all, value);
        }
    }
}

async fn jobs_behaviour(rig: &Rig) {
    let agent = AgentScope::root();
    let other = AgentScope::root();

    // Output arrives incrementally and the exit code with the end.
    let id = start_job(
        rig,
        &agent,
        "for i in 1 2 3; do echo line$i; sleep 0.05; done; exit 4",
    )
    .await;
    let (all, last) = drain(rig, &agent, &id).await;
    assert_eq!(all, "line1\nline2\nline3\n");
    assert_eq!(last["exitCode"], json!(4));
    // Offset 0 re-reads what is retained.
    let again = rig
        .call(&agent, "job_output", json!({"jobId": id, "offset": 0}))
        .await;
    assert_eq!(again.value().unwrap()["output"], "line1\nline2\nline3\n");
    let from = rig
        .call(&agent, "job_output", json!({"jobId": id, "offset": 6}))
        .await;
    assert_eq!(from.value().unwrap()["output"], "line2\nline3\n");

    // Another agent cannot see or touch it.
    for (tool, args) in [
        ("job_output", json!({"jobId": id})),
        ("job_kill", json!({"jobId": id})),
    ] {
        let refused = rig.call(&other, tool, args).await;
        assert!(
            refused.is_error() && refused.text().contains("unknown job"),
            "{}",
            refused.text()
        );
    }
    let listed = rig.call(&other, "job_list", json!({})).await;
    assert_eq!(listed.value(), Some(&json!({"jobs": []})));

    // Kill: the whole group, then `killed: false` for a job already ended.
    let id = start_job(
        rig,
        &agent,
        "sleep 30 & echo $! $(readlink /proc/self/ns/pid) > job.pid; sleep 30",
    )
    .await;
    let pid = read_pid(&rig.path("job.pid")).await;
    let killed = rig.call(&agent, "job_kill", json!({"jobId": id})).await;
    assert_eq!(killed.value(), Some(&json!({"jobId": id, "killed": true})));
    assert!(gone(pid).await, "job_kill left a group member running");
    let twice = rig.call(&agent, "job_kill", json!({"jobId": id})).await;
    assert_eq!(twice.value(), Some(&json!({"jobId": id, "killed": false})));
    let list = rig.call(&agent, "job_list", json!({})).await;
    let jobs = list.value().unwrap()["jobs"].as_array().unwrap().clone();
    let entry = jobs
        .iter()
        .find(|j| j["jobId"] == id.as_str())
        .expect("listed");
    assert_eq!(entry["running"], json!(false));
    assert_eq!(
        entry["command"],
        "sleep 30 & echo $! $(readlink /proc/self/ns/pid) > job.pid; sleep 30"
    );

    // The starting call's cancellation does not kill a published job.
    let controller = AbortController::new();
    let started = rig
        .call_with(
            &agent,
            "bash",
            json!({"command": "echo $$ $(readlink /proc/self/ns/pid) > pub.pid; sleep 30", "description": "Background", "run_in_background": true}),
            controller.signal(),
        )
        .await;
    controller.abort("the caller stopped waiting");
    let pid = read_pid(&rig.path("pub.pid")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(alive(pid), "a published job died with its call");
    let id = started.value().unwrap()["jobId"]
        .as_str()
        .unwrap()
        .to_owned();

    // A call cancelled before it starts starts nothing.
    let pre = rig
        .call_with(
            &agent,
            "bash",
            json!({"command": "echo $$ $(readlink /proc/self/ns/pid) > pre.pid", "description": "Background", "run_in_background": true}),
            AbortSignal::aborted_with("cancelled"),
        )
        .await;
    assert!(pre.is_error());
    assert!(!rig.path("pre.pid").exists());

    // The owner's disposal ends its jobs.
    rig.exec.jobs.dispose_owner(agent.id()).await;
    assert!(gone(pid).await, "owner disposal left a job running");
    let after = rig.call(&agent, "job_output", json!({"jobId": id})).await;
    assert!(after.is_error());

    // Output beyond the retained bytes waits for its reader instead of being lost.
    let big = start_job(rig, &agent, "head -c 3000000 /dev/zero | tr '\\0' b").await;
    let (all, last) = drain(rig, &agent, &big).await;
    assert_eq!(all.len(), 3_000_000);
    assert!(all.bytes().all(|b| b == b'b'));
    assert_eq!(last["exitCode"], json!(0));

    // A job that ends with more output than its buffer holds, read only later: the rest
    // waited in the pipe, and `running` stays true until it is all read.
    let slow = start_job(rig, &agent, "head -c 1060000 /dev/zero | tr '\\0' s").await;
    // The process ends once what it wrote fits the buffer and the pipe; the list says so.
    let mut ended = false;
    for _ in 0..3000 {
        let listed = rig.call(&agent, "job_list", json!({})).await;
        let entry = listed.value().unwrap()["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["jobId"] == slow.as_str())
            .cloned()
            .expect("listed");
        if entry["running"] == json!(false) {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ended, "the process itself never ended");
    let (all, last) = drain(rig, &agent, &slow).await;
    assert_eq!(all.len(), 1_060_000);
    assert_eq!(last["exitCode"], json!(0));

    // Teardown ends what is left.
    let id = start_job(
        rig,
        &agent,
        "echo $$ $(readlink /proc/self/ns/pid) > last.pid; sleep 30",
    )
    .await;
    let pid = read_pid(&rig.path("last.pid")).await;
    rig.exec.shutdown().await;
    assert!(gone(pid).await, "teardown left job {id} running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_backend_runs_the_shared_suite() {
    shared_behaviour(Kind::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_backend_runs_the_shared_suite() {
    shared_behaviour(Kind::Sandbox).await;
}

#[tokio::test]
async fn a_job_beyond_the_owners_limit_is_refused_and_its_process_ended() {
    let config = ExecConfig {
        jobs: JobLimits {
            running_per_owner: 1,
            ..JobLimits::default()
        },
        terminals: TerminalLimits {
            per_owner: 1,
            idle: Duration::from_millis(300),
            ..TerminalLimits::default()
        },
        ..ExecConfig::default()
    };
    let rig = rig(Kind::Local, config).expect("local");
    let agent = AgentScope::root();
    start_job(&rig, &agent, "sleep 30").await;
    let refused = rig
        .call(
            &agent,
            "bash",
            json!({"command": "echo $$ $(readlink /proc/self/ns/pid) > second.tmp && mv second.tmp second.pid; sleep 30", "description": "Second", "run_in_background": true}),
        )
        .await;
    assert!(
        refused.is_error() && refused.text().contains("already running"),
        "{}",
        refused.text()
    );
    // The pid file appears whole (written aside, then renamed), so one that exists holds the
    // pid of a process that must be gone; a job ended before the rename leaves none.
    if rig.path("second.pid").exists() {
        assert!(gone(read_pid(&rig.path("second.pid")).await).await);
    }

    // One terminal per owner here; an idle one is closed to make room.
    let first = rig.call(&agent, "terminal_open", json!({})).await;
    let first = first.value().unwrap()["terminalId"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = rig.call(&agent, "terminal_open", json!({})).await;
    assert!(
        refused.is_error() && refused.text().contains("already open"),
        "{}",
        refused.text()
    );
    // Idle is counted from the terminal's last output, which a busy machine may deliver late:
    // ask again until the first terminal has been idle long enough to be closed.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let second = loop {
        let second = rig.call(&agent, "terminal_open", json!({})).await;
        if !second.is_error() || std::time::Instant::now() > deadline {
            break second;
        }
        assert!(second.text().contains("already open"), "{}", second.text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!second.is_error(), "{}", second.text());
    let stale = rig
        .call(&agent, "terminal_read", json!({"terminalId": first}))
        .await;
    assert!(stale.is_error() && stale.text().contains("unknown terminal"));
    rig.exec.shutdown().await;
}

/// What only the sandbox refuses: a write outside the workspace and a TCP connection, both of
/// which the local backend makes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_refuses_writes_outside_the_workspace_and_the_network() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().unwrap().port();
    let outside = temp_dir("exec-target");
    let agent = AgentScope::root();
    for kind in [Kind::Local, Kind::Sandbox] {
        let Some(rig) = rig(kind, ExecConfig::default()) else {
            continue;
        };
        let file = outside.join(format!("{kind:?}"));
        let write = rig
            .bash(
                &agent,
                &format!("echo hi > {} && echo wrote", file.display()),
            )
            .await;
        let inside = rig
            .bash(
                &agent,
                "echo hi > here && cat here && echo tmp > \"$TMPDIR/t\" 2>&1 || echo notmp",
            )
            .await;
        let connect = rig
            .bash(
                &agent,
                &format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused"),
            )
            .await;
        match kind {
            Kind::Local => {
                assert_eq!(write["output"], "wrote\n");
                assert_eq!(connect["output"], "connected\n");
            }
            Kind::Sandbox => {
                assert_eq!(write["exitCode"], json!(1), "{write}");
                assert!(!file.exists(), "the sandbox wrote outside its workspace");
                assert_eq!(connect["output"], "refused\n");
            }
        }
        assert_eq!(inside["output"], "hi\n", "{kind:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_starts_a_background_job_polls_it_and_kills_it() {
    let root = temp_dir("exec-program");
    let exec = Exec::new(root.path(), Arc::new(Local), ExecConfig::default()).expect("exec");
    let mut cm = harness::CodeMode::new();
    cm.keep(codemode_exec::register(&cm.registry, &exec).expect("register"));
    let result = cm
        .run(
            r#"
const started = await tools.bash({ command: "echo $$ $(readlink /proc/self/ns/pid) > job.pid; i=0; while true; do echo tick$i; i=$((i+1)); sleep 0.05; done", description: "Tick forever", run_in_background: true });
let seen = "";
let offset = 0;
while (!seen.includes("tick3")) {
  const read = await tools.job_output({ jobId: started.jobId, offset, waitMs: 1000 });
  seen += read.output;
  offset = read.offset;
}
const killed = await tools.job_kill({ jobId: started.jobId });
const list = await tools.job_list({});
return { kind: started.kind, first: seen.split("\n")[0], killed: killed.killed, running: list.jobs[0].running };
"#,
        )
        .await;
    assert!(!result.is_error(), "{}", result.text());
    assert_eq!(
        result.value().unwrap()["result"],
        json!({"kind": "background", "first": "tick0", "killed": true, "running": false})
    );
    let pid = read_pid(&root.join("job.pid")).await;
    assert!(gone(pid).await);
}

/// `codemode run --exec`: a job the program leaves running ends with the CLI.
#[test]
fn the_cli_leaves_no_process_behind() {
    for backend in ["local", "sandbox"] {
        let root = temp_dir("exec-cli");
        let program = root.join("prog.ts");
        std::fs::write(
            &program,
            "const job = await tools.bash({ command: 'echo $$ $(readlink /proc/self/ns/pid) > job.pid; echo started; sleep 60', description: 'Sleep', run_in_background: true });\nwhile (!(await tools.job_output({ jobId: job.jobId, offset: 0, waitMs: 1000 })).output.includes('started')) {}\nreturn job.kind;",
        )
        .unwrap();
        let out = std::process::Command::new(codemode_binary())
            .args(["run", "--json", "--exec", backend, "--root"])
            .arg(root.path())
            .arg(&program)
            .output()
            .expect("codemode runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if backend == "sandbox"
            && stderr.contains("cannot enforce the sandbox")
            && std::env::var_os(SKIP_SANDBOX).is_some()
        {
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            continue;
        }
        let stdout: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{backend}: {stderr}"));
        assert_eq!(stdout["result"], "background", "{backend}: {stdout}");
        let written = std::fs::read_to_string(root.join("job.pid")).expect("the job ran");
        let pid = host_pid(&written).expect("a whole pid file");
        assert!(!alive(pid), "{backend}: the job outlived the CLI");
    }
}

#[test]
fn without_exec_the_tools_do_not_exist() {
    let out = std::process::Command::new(codemode_binary())
        .args(["sdk"])
        .output()
        .expect("codemode runs");
    let sdk = String::from_utf8_lossy(&out.stdout);
    assert!(!sdk.contains("bash"), "{sdk}");
    let out = std::process::Command::new(codemode_binary())
        .args(["sdk", "--exec"])
        .output()
        .expect("codemode runs");
    let sdk = String::from_utf8_lossy(&out.stdout);
    for tool in ["bash", "job_output", "job_list", "job_kill"] {
        assert!(sdk.contains(tool), "{tool} missing from {sdk}");
    }
}

/// `codemode` started with SIGINT, SIGQUIT and SIGHUP ignored (in the background of a shell
/// without job control, under `nohup`): its commands and terminals start with every signal at
/// its default action, so a terminal's SIGINT still stops the program in its foreground.
#[test]
fn commands_do_not_inherit_the_signals_codemode_ignores() {
    use std::os::unix::process::CommandExt;
    let program = r#"
        const ignored = /^SigIgn:\s*(\S+)/m;
        const bash = await tools.bash({ command: "grep SigIgn /proc/self/status", description: "Ignored signals" });
        const opened = await tools.terminal_open({});
        await tools.terminal_send({ terminalId: opened.terminalId, input: "grep Sig\"\"Ign /proc/self/status; echo do\"\"ne\n" });
        let seen = "";
        while (!seen.includes("done")) {
            seen += (await tools.terminal_read({ terminalId: opened.terminalId, waitMs: 1000 })).output;
        }
        return [bash.output.match(ignored)[1], seen.match(ignored)[1]];
    "#;
    for backend in ["local", "sandbox"] {
        let root = temp_dir("exec-signals");
        let mut command = std::process::Command::new(codemode_binary());
        command
            .args(["run", "--json", "--exec", backend, "--root"])
            .arg(root.path())
            .arg("-")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // SAFETY: between fork and exec the closure only calls `signal`.
        unsafe {
            command.pre_exec(|| {
                for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP] {
                    libc::signal(signal, libc::SIG_IGN);
                }
                Ok(())
            });
        }
        let mut child = command.spawn().expect("codemode runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(program.as_bytes())
            .unwrap();
        let out = child.wait_with_output().expect("codemode ends");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if backend == "sandbox"
            && stderr.contains("cannot enforce the sandbox")
            && std::env::var_os(SKIP_SANDBOX).is_some()
        {
            continue;
        }
        let stdout: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{backend}: {stderr}"));
        assert_eq!(
            stdout["result"],
            json!(["0000000000000000", "0000000000000000"]),
            "{backend}: {stdout}"
        );
    }
}

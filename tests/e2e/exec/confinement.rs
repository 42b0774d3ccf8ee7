//! What the sandbox backend refuses that the local one allows, reproduced as an attacker
//! would try it: capabilities, device nodes, the hostname, other terminals, signals to
//! codemode and to other sessions, unix sockets, inherited descriptors, the environment and
//! codemode's own secrets; and the limits that hold across every session. CI runs these as
//! root, where each of them once gave way.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::*;

/// Runs `script` with `bash -c` on the rig's backend and returns its output.
async fn output(rig: &Rig, agent: &AgentScope, script: &str) -> String {
    rig.bash(agent, script).await["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn sandbox() -> Rig {
    rig(Kind::Sandbox, ExecConfig::default()).expect("the sandbox")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxed_commands_hold_no_capability_and_gain_none() {
    let rig = sandbox();
    let agent = AgentScope::root();
    let status = output(
        &rig,
        &agent,
        "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status",
    )
    .await;
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            status.contains(&format!("{set}:\t0000000000000000")),
            "{set} is not empty:\n{status}"
        );
    }
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    // A set-user-id program grants nothing either.
    let su = output(&rig, &agent, "su -c id root 2>&1; echo exit=$?").await;
    assert!(!su.contains("exit=0"), "{su}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_makes_no_device_node_and_keeps_the_hostname() {
    let rig = sandbox();
    let agent = AgentScope::root();
    let before = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let tried = output(
        &rig,
        &agent,
        "mknod blk b 7 0 2>/dev/null; echo blk=$?; mknod chr c 1 3 2>/dev/null; echo chr=$?; hostname codemode-renamed 2>/dev/null; echo host=$?",
    )
    .await;
    assert!(!tried.contains("blk=0"), "{tried}");
    assert!(!tried.contains("chr=0"), "{tried}");
    assert!(!tried.contains("host=0"), "{tried}");
    assert!(!rig.path("blk").exists() && !rig.path("chr").exists());
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap(),
        before
    );
}

/// A pseudo-terminal pair this process holds, standing for another session's terminal.
fn outside_terminal() -> (OwnedFd, String) {
    // SAFETY: posix_openpt, grantpt, unlockpt and ptsname_r work on the descriptor this
    // function owns and a buffer it passes with its length.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(master >= 0, "posix_openpt");
        let master = OwnedFd::from_raw_fd(master);
        assert_eq!(libc::grantpt(master.as_raw_fd()), 0);
        assert_eq!(libc::unlockpt(master.as_raw_fd()), 0);
        let mut name = [0 as libc::c_char; 64];
        assert_eq!(
            libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()),
            0
        );
        let name = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        (master, name)
    }
}

/// What arrived on `master` before a marker this process types into it now: the echo of
/// input injected earlier comes through the line discipline in order, so everything injected
/// before the marker is echoed before it.
async fn terminal_output(master: &OwnedFd) -> Vec<u8> {
    const MARKER: &[u8] = b"#end-of-test#";
    // SAFETY: fcntl on a descriptor the caller owns; a write of a buffer of the given length.
    unsafe {
        libc::fcntl(master.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
        assert_eq!(
            libc::write(master.as_raw_fd(), MARKER.as_ptr().cast(), MARKER.len()),
            MARKER.len() as isize
        );
    }
    let mut seen = Vec::new();
    for _ in 0..3000 {
        if let Some(at) = seen.windows(MARKER.len()).position(|w| w == MARKER) {
            seen.truncate(at);
            return seen;
        }
        let mut buf = [0u8; 64];
        // SAFETY: a non-blocking read into a buffer of the given length.
        let read = unsafe { libc::read(master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if read > 0 {
            seen.extend_from_slice(&buf[..read as usize]);
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    panic!("the marker never came back: {seen:?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_terminal_can_be_neither_read_nor_driven() {
    // The local backend shows the attack works here: as root, where the kernel still allows
    // TIOCSTI at all.
    // SAFETY: geteuid only returns this process's id.
    let local_can_inject = unsafe { libc::geteuid() } == 0
        && std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
            .is_ok_and(|v| v.trim() == "1");
    for kind in [Kind::Local, Kind::Sandbox] {
        if matches!(kind, Kind::Local) && !local_can_inject {
            continue;
        }
        let rig = rig(kind, ExecConfig::default()).expect("rig");
        let agent = AgentScope::root();
        let (master, slave) = outside_terminal();
        // Opening the terminal read-only and pushing keystrokes into it, as the reproduction
        // did.
        let script = format!(
            "python3 -c 'import fcntl, os, termios\ntry:\n    fd = os.open(\"{slave}\", os.O_RDONLY | os.O_NOCTTY)\nexcept OSError as e:\n    print(\"open refused\", e.errno)\nelse:\n    try:\n        fcntl.ioctl(fd, termios.TIOCSTI, b\"x\")\n        print(\"injected\")\n    except OSError as e:\n        print(\"ioctl refused\", e.errno)\n'"
        );
        let tried = output(&rig, &agent, &script).await;
        let arrived = terminal_output(&master).await;
        match kind {
            Kind::Local => {
                assert_eq!(tried, "injected\n");
                assert_eq!(arrived, b"x", "the echo of the injected key");
            }
            Kind::Sandbox => {
                assert!(tried.contains("refused"), "{tried}");
                assert!(arrived.is_empty(), "the terminal received {arrived:?}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_can_signal_neither_codemode_nor_another_sessions_commands() {
    for kind in [Kind::Local, Kind::Sandbox] {
        let rig = rig(kind, ExecConfig::default()).expect("rig");
        let victim = AgentScope::root();
        let attacker = AgentScope::root();
        start_job(
            &rig,
            &victim,
            "echo $$ $(readlink /proc/self/ns/pid) > victim.pid; exec sleep 30",
        )
        .await;
        let pid = read_pid(&rig.path("victim.pid")).await;
        let pid = pid.expect("the victim runs");
        let codemode = std::process::id();
        let tried = output(
            &rig,
            &attacker,
            &format!("kill -0 {pid} 2>/dev/null; echo job=$?; kill -0 {codemode} 2>/dev/null; echo codemode=$?; kill -CONT {codemode} 2>/dev/null; echo cont=$?"),
        )
        .await;
        match kind {
            Kind::Local => assert_eq!(tried, "job=0\ncodemode=0\ncont=0\n", "{kind:?}"),
            Kind::Sandbox => {
                assert_eq!(tried, "job=1\ncodemode=1\ncont=1\n", "{kind:?}");
                let killed = output(&rig, &attacker, &format!("kill -9 {pid}; echo $?")).await;
                assert!(!killed.ends_with("0\n"), "{killed}");
                assert!(alive(Some(pid)), "another session killed the job");
            }
        }
        rig.exec.shutdown().await;
    }
}

/// A unix socket server this process runs: an abstract name, or a path outside every
/// workspace (standing for a Docker or D-Bus socket).
fn listen_unix(
    abstract_name: Option<&str>,
    path: Option<&Path>,
) -> std::os::unix::net::UnixListener {
    use std::os::linux::net::SocketAddrExt;
    let address = match (abstract_name, path) {
        (Some(name), _) => std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap(),
        (None, Some(path)) => std::os::unix::net::SocketAddr::from_pathname(path).unwrap(),
        (None, None) => unreachable!("a test names one address"),
    };
    std::os::unix::net::UnixListener::bind_addr(&address).expect("listen")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_sockets_outside_the_workspace_are_out_of_reach() {
    let outside = temp_dir("exec-sockets");
    let path = outside.join("daemon.sock");
    let name = format!("codemode-test-{}", std::process::id());
    let _path_server = listen_unix(None, Some(&path));
    let _abstract_server = listen_unix(Some(&name), None);
    let connect = |address: &str| {
        format!(
            "python3 -c 'import socket\ntry:\n    s = socket.socket(socket.AF_UNIX)\n    s.connect({address})\n    print(\"connected\")\nexcept OSError as e:\n    print(\"refused\", e.errno)\n' 2>&1 | tail -1"
        )
    };
    let path_script = connect(&format!("\"{}\"", path.display()));
    let abstract_script = connect(&format!("\"\\0{name}\""));
    for kind in [Kind::Local, Kind::Sandbox] {
        let rig = rig(kind, ExecConfig::default()).expect("rig");
        let agent = AgentScope::root();
        let by_path = output(&rig, &agent, &path_script).await;
        let by_name = output(&rig, &agent, &abstract_script).await;
        match kind {
            Kind::Local => {
                assert_eq!(by_path, "connected\n");
                assert_eq!(by_name, "connected\n");
            }
            Kind::Sandbox => {
                assert!(by_path.starts_with("refused"), "{by_path}");
                assert!(by_name.starts_with("refused"), "{by_name}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_codemode_holds_do_not_reach_commands() {
    let outside = temp_dir("exec-descriptors");
    let log = outside.join("log");
    let path = CString::new(log.as_os_str().as_encoded_bytes()).unwrap();
    // Opened without close-on-exec, as a descriptor inherited from codemode's parent is.
    // SAFETY: a NUL-terminated path and integer flags.
    let opened = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o600) };
    assert!(opened > 2);
    // SAFETY: `opened` was just opened and is owned here.
    let opened = unsafe { OwnedFd::from_raw_fd(opened) };
    // Moved to 100 or above: bash keeps the stderr it saves around `2>/dev/null` at the lowest
    // free descriptor from 10, so a descriptor numbered 10 or 11 would be bash's own copy of
    // stderr in the command, and the write would succeed whatever codemode did.
    // SAFETY: fcntl on a descriptor this test owns; F_DUPFD makes a copy without close-on-exec.
    let fd = unsafe { libc::fcntl(opened.as_raw_fd(), libc::F_DUPFD, 100) };
    assert!(fd >= 100);
    drop(opened);
    // SAFETY: `fd` was just made and is owned here.
    let _held = unsafe { OwnedFd::from_raw_fd(fd) };
    for kind in [Kind::Local, Kind::Sandbox] {
        // Inheritable again: the local backend marks this process's descriptors before it
        // spawns, which must not stand in for the sandbox's own marking.
        // SAFETY: fcntl on a descriptor this test owns.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }, 0);
        let rig = rig(kind, ExecConfig::default()).expect("rig");
        let agent = AgentScope::root();
        let tried = output(
            &rig,
            &agent,
            &format!("{{ echo leaked >&{fd}; }} 2>/dev/null; echo write=$?; ls /proc/self/fd | sort -n | tr '\\n' ' '"),
        )
        .await;
        assert!(tried.starts_with("write=1\n"), "{kind:?}: {tried}");
        // 0-2, and the directory `ls` itself reads.
        assert_eq!(tried.lines().nth(1), Some("0 1 2 3 "), "{kind:?}: {tried}");
    }
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_reaches_only_its_own_shell() {
    for kind in [Kind::Sandbox, Kind::Local] {
        terminals_beside_commands(kind).await;
    }
}

/// Opens 4 terminals while 32 commands list their descriptors: none may hold a terminal's.
async fn terminals_beside_commands(kind: Kind) {
    let rig = rig(kind, ExecConfig::default()).expect("rig");
    let agents: Vec<AgentScope> = (0..4).map(|_| AgentScope::root()).collect();
    let checks = (0..32).map(|_| {
        output(
            &rig,
            &agents[0],
            "ls -l /proc/self/fd | grep -cE 'ptmx|/dev/pts' || true",
        )
    });
    let opens = agents
        .iter()
        .map(|agent| rig.call(agent, "terminal_open", json!({})));
    let (checks, opens) = tokio::join!(
        futures::future::join_all(checks),
        futures::future::join_all(opens)
    );
    for opened in opens {
        assert!(!opened.is_error(), "{}", opened.text());
    }
    for seen in checks {
        assert_eq!(
            seen, "0\n",
            "{kind:?}: a command held a terminal's descriptor"
        );
    }
    rig.exec.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_every_session() {
    let config = ExecConfig {
        jobs: JobLimits {
            running_total: 2,
            ..JobLimits::default()
        },
        terminals: TerminalLimits {
            total: 1,
            ..TerminalLimits::default()
        },
        max_processes: 3,
        ..ExecConfig::default()
    };
    let rig = rig(Kind::Local, config).expect("local");
    let [a, b, c] = [AgentScope::root(), AgentScope::root(), AgentScope::root()];
    start_job(&rig, &a, "sleep 30").await;
    let second = start_job(&rig, &b, "sleep 30").await;
    let refused = rig
        .call(
            &c,
            "bash",
            json!({"command": "sleep 30", "description": "Third", "run_in_background": true}),
        )
        .await;
    assert!(
        refused.is_error() && refused.text().contains("across all sessions"),
        "{}",
        refused.text()
    );
    assert!(!rig.call(&a, "terminal_open", json!({})).await.is_error());
    let refused = rig.call(&b, "terminal_open", json!({})).await;
    assert!(
        refused.is_error() && refused.text().contains("across all sessions"),
        "{}",
        refused.text()
    );
    // Two jobs and a terminal: the third command of any kind waits for one to end.
    let refused = rig
        .call(
            &c,
            "bash",
            json!({"command": "true", "description": "Fourth"}),
        )
        .await;
    assert!(
        refused.is_error() && refused.text().contains("commands are already running"),
        "{}",
        refused.text()
    );
    let killed = rig.call(&b, "job_kill", json!({"jobId": second})).await;
    assert!(!killed.is_error(), "{}", killed.text());
    assert_eq!(output(&rig, &c, "echo ok").await, "ok\n");
    rig.exec.shutdown().await;
}

/// Runs `codemode run --json --exec BACKEND` on a program whose only call is `bash(script)`,
/// with codemode's secrets and two other variables in its environment.
fn cli_bash(backend: &str, extra: &[&str], script: &str) -> (Value, String) {
    let root = temp_dir("exec-environment");
    let program = root.join("prog.ts");
    std::fs::write(
        &program,
        format!(
            "return (await tools.bash({{ command: {}, description: 'Show the environment' }})).output;",
            serde_json::to_string(script).unwrap()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(codemode_binary())
        .args(["run", "--json", "--exec", backend])
        .args(extra)
        .arg("--root")
        .arg(root.path())
        .arg(&program)
        .env(
            "CODEMODE_STATE_KEY",
            "state-key-secret-0123456789abcdef0123456789",
        )
        .env("CODEMODE_MCP_TOKEN", "mcp-token-secret")
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret-value")
        .env("PASSED_VAR", "passed-value")
        .env("OTHER_VAR", "other-value")
        // The sandbox's protections are reported at `info`.
        .env("RUST_LOG", "info")
        .output()
        .expect("codemode runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (stdout, stderr)
}

#[test]
fn commands_get_a_minimal_environment_and_none_of_codemodes_secrets() {
    // Every process the command can see, its parent included, and what their environments hold.
    let script = "env; echo; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null; echo environ=done";
    let secrets = ["state-key-secret", "mcp-token-secret", "aws-secret-value"];
    for backend in ["local", "sandbox"] {
        let (result, stderr) = cli_bash(backend, &["--exec-env", "PASSED_VAR"], script);
        let seen = result["result"]
            .as_str()
            .unwrap_or_else(|| panic!("{backend}: {result} {stderr}"));
        let (env, parent) = seen.split_once("\n\n").unwrap_or((seen, ""));
        for secret in secrets {
            assert!(
                !env.contains(secret),
                "{backend}: {secret} reached the command"
            );
        }
        assert!(env.contains("PASSED_VAR=passed-value"), "{backend}: {env}");
        match backend {
            "local" => assert!(env.contains("OTHER_VAR=other-value"), "{env}"),
            _ => {
                assert!(!env.contains("OTHER_VAR"), "{env}");
                assert!(env.contains("PATH=") && env.contains("TMPDIR="), "{env}");
                // codemode's own environment cannot be read through /proc either: no process
                // the command sees holds it.
                for secret in secrets {
                    assert!(
                        !parent.contains(secret),
                        "{secret} read from /proc: {parent}"
                    );
                }
                assert!(parent.contains("environ=done"), "{parent}");
                assert!(stderr.contains("--exec sandbox: bubblewrap"), "{stderr}");
                assert!(stderr.contains("no capabilities"), "{stderr}");
            }
        }
    }
    for backend in ["local", "sandbox"] {
        let (result, stderr) = cli_bash(backend, &["--exec-env", "CODEMODE_STATE_KEY"], "true");
        assert!(
            stderr.contains("CODEMODE_STATE_KEY holds one of codemode's own credentials"),
            "{backend}: {stderr}"
        );
        assert!(result.is_null(), "{backend}: nothing runs: {result}");
    }
}

//! The sandbox's own view of the filesystem and its own process tree, tried as an attacker
//! would: metadata written outside the workspace, set-user-id programs left in it, codemode's
//! own files and the user's credentials read, processes that outlive their call, their job and
//! codemode itself, sockets of other families, the session keyring, a fork bomb, and a system
//! that cannot give the sandbox. CI runs these as root; where the suite runs as root, the
//! cases of an unprivileged codemode run it as `nobody`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use codemode_exec::sandbox::SandboxOptions;

use super::*;

fn root() -> bool {
    // SAFETY: geteuid only returns this process's id.
    unsafe { libc::geteuid() == 0 }
}

/// A temporary directory a sandboxed command can see (read-only), unlike one beneath `/tmp`,
/// which the sandbox replaces with its own: beneath `/var/lib` as root, else the home.
fn visible_dir(label: &str) -> TempDir {
    let base = if root() {
        PathBuf::from("/var/lib")
    } else {
        PathBuf::from(std::env::var_os("HOME").expect("a home directory"))
    };
    temp_dir_in(&base, label)
}

/// The processes running exactly `argv`, as this process numbers them.
fn running(argv: &[&str]) -> Vec<i32> {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline")).ok().as_deref() == Some(&wanted[..])
        })
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

/// Waits until a process runs `argv` (`true`), or until none does (`false`), within a bound
/// that only guards against a hang.
async fn until_running(argv: &[&str], wanted: bool) -> bool {
    for _ in 0..1500 {
        if running(argv).is_empty() != wanted {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn sandbox_with(options: SandboxOptions) -> Rig {
    rig_with(Kind::Sandbox, ExecConfig::default(), options).expect("the sandbox")
}

async fn output(rig: &Rig, script: &str) -> String {
    rig.bash(&AgentScope::root(), script).await["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_outside_the_workspace_cannot_be_changed() {
    let outside = visible_dir("exec-outside");
    let dir = outside.join("dir");
    let file = outside.join("file");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(&file, "mine").unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.mode(), m.uid(), m.gid(), m.mtime())
    };
    let (dir_before, file_before) = (before(&dir), before(&file));
    let rig = sandbox_with(SandboxOptions::default());
    let (d, f) = (dir.display(), file.display());
    // A system file is only given its own mode, owner and times: a write that went through
    // would change nothing, and is seen by its exit status.
    let tried = output(
        &rig,
        &format!(
            "chmod 0777 {d}; echo dir-mode=$?; chmod 0666 {f}; echo file-mode=$?; chown 1:1 {f}; echo owner=$?; touch -d 2001-01-01 {f}; echo times=$?; \
             python3 -c 'import os, sys\ntry:\n    os.setxattr(sys.argv[1], \"user.planted\", b\"1\"); print(\"xattr=0\")\nexcept OSError as e:\n    print(\"xattr=\", e.errno)' {f}; \
             chmod $(stat -c %a /etc/hostname) /etc/hostname; echo system-mode=$?; touch -r /etc/hostname /etc/hostname; echo system-times=$?; \
             mkdir {d}/planted; echo planted=$?"
        ),
    )
    .await;
    for refused in [
        "dir-mode=0",
        "file-mode=0",
        "owner=0",
        "times=0",
        "xattr=0",
        "system-mode=0",
        "system-times=0",
        "planted=0",
    ] {
        assert!(
            !tried.contains(&format!("{refused}\n")),
            "{refused}: {tried}"
        );
    }
    assert_eq!(before(&dir), dir_before, "{tried}");
    assert_eq!(before(&file), file_before, "{tried}");
    assert!(xattr_absent(&file), "an attribute was planted: {tried}");
    assert!(!dir.join("planted").exists());
}

fn xattr_absent(path: &Path) -> bool {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and name; a null buffer of length 0 asks for the size.
    let size = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"user.planted".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    size < 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_file_a_command_writes_raises_whoever_runs_it() {
    let rig = sandbox_with(SandboxOptions::default());
    let tried = output(
        &rig,
        "cp /bin/sh sh; chmod u+s sh; echo setuid=$?; chmod g+s sh; echo setgid=$?; chmod 4755 sh; echo octal=$?; \
         install -m 4755 /bin/sh installed; echo install=$?; \
         python3 -c 'import os\nfor name, call in [(\"open\", lambda: os.close(os.open(\"created\", os.O_CREAT | os.O_WRONLY, 0o4755))), (\"mknod\", lambda: os.mknod(\"node\", 0o104755)), (\"fchmod\", lambda: os.fchmod(os.open(\"sh\", os.O_RDONLY), 0o6755))]:\n    try:\n        call(); print(name + \"=0\")\n    except OSError as e:\n        print(name + \"=\", e.errno)'",
    )
    .await;
    for refused in [
        "setuid=0",
        "setgid=0",
        "octal=0",
        "install=0",
        "open=0",
        "mknod=0",
        "fchmod=0",
    ] {
        assert!(
            !tried.contains(&format!("{refused}\n")),
            "{refused}: {tried}"
        );
    }
    // SAFETY: geteuid only returns this process's id.
    let me = unsafe { libc::geteuid() };
    for entry in std::fs::read_dir(rig.root.path()).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        assert_eq!(
            meta.mode() & 0o6000,
            0,
            "{} raises whoever runs it: {tried}",
            entry.path().display()
        );
        // Written through the idmapping (as root) or as this user: the workspace's owner.
        assert_eq!(meta.uid(), me, "{}", entry.path().display());
    }
    // The shell the reproduction ran as another user does not run as this one.
    if root() {
        let shell = rig.path("sh");
        let mut command = std::process::Command::new(&shell);
        command.args(["-p", "-c", "id -u"]);
        as_nobody(&mut command);
        let out = command.output().expect("the copied shell runs");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "65534\n");
    }
}

/// Runs `command` as `nobody` (this process runs as root).
fn as_nobody(command: &mut std::process::Command) {
    // SAFETY: between fork and exec the closure makes only setgroups, setgid and setuid calls.
    unsafe {
        command.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(SANDBOX_ID) != 0
                || libc::setuid(SANDBOX_ID) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

const SANDBOX_ID: u32 = codemode_exec::sandbox::SANDBOX_ID;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_outlives_its_call_or_its_job() {
    let rig = sandbox_with(SandboxOptions::default());
    let agent = AgentScope::root();
    // A new session, a double fork and a process that ignores the hangup, left behind by a
    // call that returns at once.
    let left = [
        ["sleep", "1000.41"],
        ["sleep", "1000.42"],
        ["sleep", "1000.43"],
    ];
    let done = output(
        &rig,
        "setsid -f sleep 1000.41; (sleep 1000.42 &) ; nohup sleep 1000.43 >/dev/null 2>&1 & echo started",
    )
    .await;
    assert_eq!(done, "started\n");
    for argv in left {
        assert!(
            until_running(&argv, false).await,
            "{argv:?} outlived its call"
        );
    }
    // A job's escaped process ends with the job.
    let id = start_job(
        &rig,
        &agent,
        "setsid -f sleep 1000.44; echo started; exec sleep 1000.45",
    )
    .await;
    assert!(until_running(&["sleep", "1000.44"], true).await);
    let killed = rig.call(&agent, "job_kill", json!({"jobId": id})).await;
    assert!(!killed.is_error(), "{}", killed.text());
    for argv in [["sleep", "1000.44"], ["sleep", "1000.45"]] {
        assert!(
            until_running(&argv, false).await,
            "{argv:?} outlived job_kill"
        );
    }
}

/// `codemode run --exec sandbox --root workspace -` started with `program` on its input (and
/// `TMPDIR` set to `tmp`, if given); its output is piped, its input closed.
fn start_sandboxed_run(workspace: &Path, tmp: Option<&Path>, program: &str) -> std::process::Child {
    let mut command = std::process::Command::new(codemode_binary());
    command
        .args(["run", "--exec", "sandbox", "--root"])
        .arg(workspace)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(tmp) = tmp {
        command.env("TMPDIR", tmp);
    }
    let mut child = command.spawn().expect("codemode runs");
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(program.as_bytes()).unwrap();
    child
}

/// `codemode run --exec sandbox` killed with SIGKILL while a job's escaped process runs: the
/// whole sandbox goes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_outlives_a_killed_codemode() {
    let root = temp_dir("exec-killed");
    let program = "await tools.bash({ command: 'setsid -f sleep 1000.46; exec sleep 1000.47', description: 'Escape', run_in_background: true }); await tools.sleep({ ms: 600000 });";
    let child = Reaped(start_sandboxed_run(root.path(), None, program));
    assert!(until_running(&["sleep", "1000.46"], true).await);
    assert!(until_running(&["sleep", "1000.47"], true).await);
    drop(child);
    for argv in [["sleep", "1000.46"], ["sleep", "1000.47"]] {
        assert!(
            until_running(&argv, false).await,
            "{argv:?} outlived codemode"
        );
    }
}

/// A command that fills its `/tmp` with a tree deeper than a removal recursing in codemode's
/// process could go (a descriptor and a stack frame a level) leaves nothing once its sandbox is
/// dropped: the tree is removed by `rm` as the user who made it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_tree_a_command_leaves_in_tmp_goes_with_its_sandbox() {
    let marker = format!("deep-{}", std::process::id());
    // Past this process's limit of open files (a descriptor a level), within reason.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct it is given.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    let depth = limit.rlim_cur.saturating_add(100).min(70_000);
    let rig = sandbox_with(SandboxOptions::default());
    let made = output(
        &rig,
        &format!(
            "cd /tmp && touch {marker} && python3 -c 'import os\nfor _ in range({depth}):\n    os.mkdir(\"d\"); os.chdir(\"d\")\nprint(\"nested\")'"
        ),
    )
    .await;
    assert_eq!(made, "nested\n");
    let dir = sandbox_dirs(&std::env::temp_dir())
        .into_iter()
        .find(|dir| dir.join(&marker).exists())
        .expect("the sandbox's temporary directory holds the marker");
    drop(rig);
    assert!(!dir.exists(), "{} is left", dir.display());
}

/// The directories a sandbox made in `tmp`, by the names it gives them.
fn sandbox_dirs(tmp: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(tmp)
        .expect("the temporary directory is read")
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with("codemode-sandbox-tmp-") || name.starts_with("codemode-sandbox-stage-")
        })
        .map(|entry| entry.path())
        .collect();
    found.sort();
    found
}

/// The cgroup directories process `pid` is in that a sandbox made (`codemode-<pid>-<n>`), where
/// this system mounts them: none where commands get no cgroups.
fn command_cgroups(pid: i32) -> Vec<PathBuf> {
    let membership = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    membership
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let last = path.rsplit('/').next()?;
            if !last.starts_with("codemode-") {
                return None;
            }
            let relative = path.trim_start_matches('/');
            [
                Path::new("/sys/fs/cgroup").join(controllers).join(relative),
                Path::new("/sys/fs/cgroup").join(relative),
            ]
            .into_iter()
            .find(|dir| dir.is_dir())
        })
        .collect()
}

/// `codemode run --exec sandbox` killed with SIGKILL cannot remove its sandbox's temporary
/// directory (every command's `/tmp`, with what the client's commands wrote there), its
/// workspace stage or its commands' cgroups: the next sandbox made beside them does, and
/// leaves what a live sandbox holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_killed_codemode_leaves_goes_when_the_next_sandbox_starts() {
    let workspace = temp_dir("exec-left");
    let tmp = temp_dir("exec-left-tmp");
    // The sandbox's user must pass through it to its own directory.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let start = |program: &str| start_sandboxed_run(workspace.path(), Some(tmp.path()), program);
    let killed = Reaped(start(
        "await tools.bash({ command: 'echo a client wrote this > /tmp/left-behind; exec sleep 1000.52', description: 'Hold', run_in_background: true }); await tools.sleep({ ms: 600000 });",
    ));
    assert!(until_running(&["sleep", "1000.52"], true).await);
    let held = sandbox_dirs(tmp.path());
    assert_eq!(held.len(), if root() { 2 } else { 1 }, "{held:?}");
    let written = held
        .iter()
        .map(|dir| dir.join("left-behind"))
        .find(|f| f.exists());
    assert!(written.is_some(), "the command's /tmp is one of {held:?}");
    let cgroups = running(&["sleep", "1000.52"])
        .first()
        .map(|&pid| command_cgroups(pid))
        .unwrap_or_default();
    drop(killed);
    assert!(until_running(&["sleep", "1000.52"], false).await);
    assert_eq!(
        sandbox_dirs(tmp.path()),
        held,
        "left behind by the killed process"
    );
    let next = start("return 1");
    let next = tokio::task::spawn_blocking(move || next.wait_with_output())
        .await
        .unwrap()
        .expect("the next codemode ran");
    assert!(
        next.status.success(),
        "{}",
        String::from_utf8_lossy(&next.stderr)
    );
    assert_eq!(sandbox_dirs(tmp.path()), Vec::<PathBuf>::new());
    for dir in &cgroups {
        assert!(!dir.exists(), "{} is left", dir.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_socket_families_and_the_keyrings_are_refused() {
    // A key of this process's session keyring, which a command must not reach.
    let description = format!("codemode-e2e-{}", std::process::id());
    let name = std::ffi::CString::new(description.clone()).unwrap();
    // SAFETY: NUL-terminated type and description, a payload of the given length, and the
    // session keyring's special id.
    let key = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            c"user".as_ptr(),
            name.as_ptr(),
            b"secret".as_ptr(),
            6usize,
            -3i32,
        )
    };
    let rig = sandbox_with(SandboxOptions::default());
    let tried = output(
        &rig,
        "python3 -c 'import socket\nfor family, kind in [(\"AF_VSOCK\", socket.SOCK_STREAM), (\"AF_NETLINK\", socket.SOCK_DGRAM), (\"AF_PACKET\", socket.SOCK_DGRAM), (\"AF_ALG\", socket.SOCK_SEQPACKET), (\"AF_UNIX\", socket.SOCK_STREAM), (\"AF_INET\", socket.SOCK_STREAM), (\"AF_INET6\", socket.SOCK_STREAM)]:\n    try:\n        socket.socket(getattr(socket, family), kind).close(); print(family, \"made\")\n    except OSError as e:\n        print(family, \"refused\", e.errno)'; \
         python3 -c 'import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(\"keyctl\", libc.syscall(250, 0, -3, 0), ctypes.get_errno())'; cat /proc/keys",
    )
    .await;
    for family in ["AF_VSOCK", "AF_NETLINK", "AF_PACKET", "AF_ALG"] {
        assert!(
            tried.contains(&format!("{family} refused {}\n", libc::EAFNOSUPPORT)),
            "{family}: {tried}"
        );
    }
    for family in ["AF_UNIX", "AF_INET", "AF_INET6"] {
        assert!(tried.contains(&format!("{family} made\n")), "{tried}");
    }
    assert!(
        tried.contains(&format!("keyctl -1 {}\n", libc::EPERM)),
        "{tried}"
    );
    if key > 0 {
        assert!(!tried.contains(&description), "{tried}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processes_of_every_sandboxed_command_are_capped() {
    if !root() {
        eprintln!("the cap holds where codemode runs as root; skipped as another user");
        return;
    }
    // The cap counts the sandbox's user across every sandbox, those of tests running beside
    // this one too: it is set well above what they run, and the command forks past it.
    let rig = sandbox_with(SandboxOptions {
        max_processes: 200,
        ..SandboxOptions::default()
    });
    let tried = output(
        &rig,
        "python3 -c 'import os\nstarted = 0\nfor _ in range(300):\n    try:\n        pid = os.fork()\n    except OSError as e:\n        print(\"refused\", e.errno); break\n    if pid == 0:\n        os.execvp(\"sleep\", [\"sleep\", \"1000.48\"])\n    started += 1\nprint(\"started\", started)'",
    )
    .await;
    assert!(
        tried.contains(&format!("refused {}", libc::EAGAIN)),
        "{tried}"
    );
    let started: usize = tried
        .lines()
        .find_map(|l| l.strip_prefix("started "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{tried}"));
    assert!(started < 200, "{tried}");
    assert!(until_running(&["sleep", "1000.48"], false).await);
}

#[test]
fn a_system_that_cannot_give_the_sandbox_is_refused_naming_what_is_missing() {
    let root = temp_dir("exec-refused");
    let missing = codemode_exec::sandbox::Sandbox::with_options(
        root.path(),
        SandboxOptions {
            bwrap: Some(PathBuf::from("/nonexistent/bwrap")),
            ..SandboxOptions::default()
        },
    )
    .err()
    .expect("refused");
    let said = missing.to_string();
    assert!(said.contains("cannot enforce the sandbox"), "{said}");
    assert!(said.contains("/nonexistent/bwrap cannot be run"), "{said}");
    let old = root.join("bwrap");
    std::fs::write(&old, "#!/bin/sh\necho bubblewrap 0.4.1\n").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    let said = codemode_exec::sandbox::Sandbox::with_options(
        root.path(),
        SandboxOptions {
            bwrap: Some(old),
            ..SandboxOptions::default()
        },
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(said.contains("bubblewrap 0.4.1 is too old"), "{said}");
}

/// What `codemode run --exec sandbox` hides: its state directory and key, its configuration,
/// what `--exec-hide` names (all in the workspace, where commands would see them otherwise),
/// and the credentials in the home directory.
#[test]
fn codemodes_files_and_the_users_credentials_are_out_of_sight() {
    let root = visible_dir("exec-hidden");
    let workspace = root.join("workspace");
    let home = root.join("home");
    let state = workspace.join(".state");
    for dir in [&workspace, &home.join(".aws"), &home.join(".ssh")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(home.join(".aws/credentials"), "aws-credential").unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "ssh-credential").unwrap();
    std::fs::write(workspace.join("token"), "token-credential").unwrap();
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(state.join("key"), "state-key-credential-0123456789a").unwrap();
    std::fs::set_permissions(state.join("key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(workspace.join("servers.json"), "{\"mcpServers\": {}}").unwrap();
    let script = format!(
        "cat {h}/.aws/credentials {h}/.ssh/id_ed25519 token servers.json .state/key 2>&1; ls -a .state; tr '\\0' ' ' < /proc/1/cmdline",
        h = home.display()
    );
    let program = format!(
        "await tools.bash({{ command: 'true', description: 'First' }}); return (await tools.bash({{ command: {}, description: 'Look' }})).output;",
        serde_json::to_string(&script).unwrap()
    );
    let out = output_with_stdin(
        std::process::Command::new(codemode_binary())
            .args(["run", "--json", "--exec", "sandbox", "--pause-on", "echo"])
            .arg("--state")
            .arg(&state)
            .arg("--config")
            .arg(workspace.join("servers.json"))
            .args(["--exec-hide", "token", "--root"])
            .arg(&workspace)
            .arg("-")
            .current_dir(&workspace)
            .env("HOME", &home)
            .env_remove("CODEMODE_STATE_KEY"),
        &program,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    let seen = result["result"]
        .as_str()
        .unwrap_or_else(|| panic!("{result} {stderr}"));
    for secret in [
        "aws-credential",
        "ssh-credential",
        "token-credential",
        "mcpServers",
        "state-key-credential",
    ] {
        assert!(!seen.contains(secret), "{secret} was read: {seen}");
    }
    assert!(seen.contains(".state/key: No such file"), "{seen}");
    // The sandbox's settings, hidden paths included, are not on its first process's command
    // line.
    assert!(!seen.contains("--tmpfs"), "{seen}");
}

/// The binary and the module cache copied where `nobody` may read them, once per process.
/// A static is never dropped, so the copy of an earlier test process (hundreds of megabytes)
/// is removed by the next one: each copy is named after the process that made it.
fn unprivileged_install() -> &'static (TempDir, PathBuf, PathBuf) {
    static INSTALL: std::sync::OnceLock<(TempDir, PathBuf, PathBuf)> = std::sync::OnceLock::new();
    INSTALL.get_or_init(|| {
        const LABEL: &str = "exec-unprivileged";
        let prefix = format!("codemode-{LABEL}-");
        for entry in std::fs::read_dir(std::env::temp_dir())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name();
            let Some(owner) = name
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{owner}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = temp_dir(&format!("{LABEL}-{}", std::process::id()));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let binary = dir.join("codemode");
        std::fs::copy(codemode_binary(), &binary).expect("the binary copied");
        let cache = dir.join("cache");
        std::fs::create_dir(&cache).unwrap();
        if let Some(modules) = std::env::var_os("CODEMODE_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/codemode")))
        {
            for entry in std::fs::read_dir(modules).into_iter().flatten().flatten() {
                let _ = std::fs::copy(entry.path(), cache.join(entry.file_name()));
            }
        }
        chown_tree(&cache);
        (dir, binary, cache)
    })
}

fn chown_tree(path: &Path) {
    std::os::unix::fs::chown(path, Some(SANDBOX_ID), Some(SANDBOX_ID)).unwrap();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            chown_tree(&entry.path());
        }
    }
}

/// A codemode running as a user other than root (`nobody` here): its commands cannot change
/// the user's own files outside the workspace (`chmod 0666 ~/.bashrc` worked before), nor read
/// its credentials or its state key.
#[test]
fn an_unprivileged_codemodes_commands_leave_its_home_alone() {
    if !root() {
        eprintln!("run as another user already: the other cases cover it");
        return;
    }
    let (_, binary, cache) = unprivileged_install();
    let root = visible_dir("exec-nobody");
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = root.join("home");
    let workspace = root.join("workspace");
    let key_dir = home.join(".local/state/codemode");
    std::fs::create_dir_all(&key_dir).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(home.join(".bashrc"), "# mine\n").unwrap();
    std::fs::write(home.join(".aws/credentials"), "aws-credential").unwrap();
    std::fs::write(key_dir.join("key"), "k".repeat(32)).unwrap();
    chown_tree(&home);
    chown_tree(&workspace);
    std::fs::set_permissions(home.join(".bashrc"), std::fs::Permissions::from_mode(0o644)).unwrap();
    // The other reproductions as this user: metadata and writes outside, set-user-id bits,
    // other socket families, keyrings, and a process left behind (seen from here afterwards).
    let script = "chmod 0666 ~/.bashrc; echo chmod=$?; echo x >> ~/.bashrc; echo append=$?; touch -d 2001-01-01 ~/.bashrc; echo times=$?; \
        cat ~/.aws/credentials ~/.local/state/codemode/key; cp /bin/sh sh; chmod u+s sh; echo setuid=$?; \
        python3 -c 'import socket, ctypes\nfor f in (\"AF_VSOCK\", \"AF_NETLINK\"):\n    try:\n        socket.socket(getattr(socket, f), socket.SOCK_DGRAM); print(f, \"made\")\n    except OSError as e:\n        print(f, \"refused\")\nprint(\"keyctl\", ctypes.CDLL(None).syscall(250, 0, -3, 0))'; \
        setsid -f sleep 1000.49; id -u";
    let program = format!(
        "return (await tools.bash({{ command: {}, description: 'Try' }})).output;",
        serde_json::to_string(script).unwrap()
    );
    let mut command = std::process::Command::new(binary);
    command
        .args(["run", "--json", "--exec", "sandbox", "--root"])
        .arg(&workspace)
        .arg("-")
        .current_dir(&workspace)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &home)
        .env("CODEMODE_CACHE_DIR", cache);
    as_nobody(&mut command);
    let out = output_with_stdin(&mut command, &program);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    let seen = result["result"]
        .as_str()
        .unwrap_or_else(|| panic!("{result} {stderr}"));
    assert!(
        !seen.contains("chmod=0\n") && !seen.contains("append=0\n"),
        "{seen}"
    );
    assert!(
        !seen.contains("setuid=0\n") && !seen.contains("times=0\n"),
        "{seen}"
    );
    assert!(
        seen.contains("AF_VSOCK refused") && seen.contains("AF_NETLINK refused"),
        "{seen}"
    );
    assert!(seen.contains("keyctl -1"), "{seen}");
    let left = (0..1500).all(|_| {
        let alive = !running(&["sleep", "1000.49"]).is_empty();
        if alive {
            std::thread::sleep(Duration::from_millis(20));
        }
        alive
    });
    assert!(!left, "a process outlived its call");
    assert!(
        !seen.contains("aws-credential") && !seen.contains("kkkk"),
        "{seen}"
    );
    let bashrc = std::fs::metadata(home.join(".bashrc")).unwrap();
    assert_eq!(bashrc.mode() & 0o777, 0o644, "{seen}");
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        "# mine\n"
    );
    assert_eq!(
        std::fs::metadata(workspace.join("sh")).unwrap().mode() & 0o6000,
        0
    );
}

/// Where codemode runs as root and can write the kernel's cgroups, each command's tree is held
/// to its own memory limit, and its cgroup goes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commands_memory_is_capped_where_cgroups_allow() {
    let rig = sandbox_with(SandboxOptions {
        max_memory_bytes: 64 << 20,
        ..SandboxOptions::default()
    });
    let sandbox = codemode_exec::sandbox::Sandbox::with_options(
        rig.root.path(),
        SandboxOptions {
            max_memory_bytes: 64 << 20,
            ..SandboxOptions::default()
        },
    )
    .expect("the sandbox");
    let Some(cgroups) = sandbox.protections().cgroups.clone() else {
        assert!(
            !root() || !Path::new("/sys/fs/cgroup").exists(),
            "root, with cgroups mounted, but none per command: {}",
            sandbox.protections()
        );
        eprintln!("no cgroup per command here: {}", sandbox.protections());
        return;
    };
    assert!(cgroups.contains("64 MiB"), "{cgroups}");
    let tried = output(
        &rig,
        "python3 -c 'b = bytearray(256 << 20); b[::4096] = b\"x\" * len(b[::4096]); print(\"allocated\")'; echo exit=$?",
    )
    .await;
    assert!(!tried.lines().any(|l| l == "allocated"), "{tried}");
    assert!(!tried.contains("exit=0"), "{tried}");
    // A small allocation goes through.
    let fine = output(
        &rig,
        "python3 -c 'b = bytearray(8 << 20); print(\"allocated\")'",
    )
    .await;
    assert_eq!(fine, "allocated\n");
}

/// Anyone could once stop `--exec sandbox` by making its temporary directory's predictable name
/// first; the name is random now, and a directory planted under the old name changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_temporary_directory_does_not_stop_the_sandbox() {
    let planted: Vec<PathBuf> = (0..4)
        .map(|n| std::env::temp_dir().join(format!("codemode-sandbox-{}-{n}", std::process::id())))
        .collect();
    for dir in &planted {
        let _ = std::fs::create_dir(dir);
    }
    let rig = sandbox_with(SandboxOptions::default());
    let tmp = output(
        &rig,
        "echo made > /tmp/mine && cat /tmp/mine && ls -a /tmp | grep -c codemode-sandbox-",
    )
    .await;
    assert_eq!(tmp, "made\n0\n");
    for dir in &planted {
        let _ = std::fs::remove_dir(dir);
    }
}

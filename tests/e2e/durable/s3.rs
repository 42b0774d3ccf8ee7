//! Runs kept in an S3-compatible store (a local moto server): resumed in other processes, each
//! exactly once, through the store's conditional create.

use super::*;

/// moto's server, with one change: it answers one request at a time. moto checks a
/// conditional create (`If-None-Match: *`) and then writes, and its server is threaded, so two
/// racing creates of one object could both succeed; S3 itself makes the check and the write
/// one step, and the claim of a paused run relies on that. Answering in turn gives the racing
/// resumes below the store S3 is.
const SERIAL_MOTO: &str = r#"
import sys, threading
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
turn = threading.Lock()
def one_at_a_time(environ, start_response):
    with turn:
        body = app(environ, start_response)
        try:
            return [b"".join(body)]
        finally:
            getattr(body, "close", lambda: None)()
run_simple(sys.argv[1], int(sys.argv[2]), one_at_a_time, threaded=True, request_handler=MotoRequestHandler)
"#;

/// A local S3-compatible server (moto, installed by `.ci/run` from PyPI) on a free port, with
/// one bucket; killed on drop. Its log goes to `log`.
pub(crate) struct S3Server {
    child: std::process::Child,
    endpoint: String,
}

impl S3Server {
    pub(crate) fn start(bucket: &str, log: &Path) -> Self {
        // The port is free when asked for, but another test may take it before moto binds it:
        // a server that exits at once for that reason is started again on another port.
        for _ in 0..5 {
            match Self::try_start(bucket, log) {
                Ok(server) => return server,
                Err(why) if why.contains("Address already in use") => eprintln!("{why}"),
                Err(why) => panic!("{why}"),
            }
        }
        panic!("moto did not start on any of five free ports");
    }

    fn try_start(bucket: &str, log: &Path) -> Result<Self, String> {
        use std::io::{Read, Write};
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("python3")
            .args(["-c", SERIAL_MOTO, "127.0.0.1", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log).expect("moto's log"))
            .spawn()
            .expect("python3 runs");
        let mut server = S3Server {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = server.child.try_wait().expect("moto's status") {
                return Err(format!(
                    "moto on port {port} exited ({status}; `pip install -r tests/toolchain/requirements.txt` installs it): {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                ));
            }
            if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                let request = format!(
                    "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                stream.write_all(request.as_bytes()).unwrap();
                let mut reply = String::new();
                let _ = stream.read_to_string(&mut reply);
                assert!(
                    reply.starts_with("HTTP/1.1 200"),
                    "bucket creation: {reply}"
                );
                return Ok(server);
            }
            assert!(std::time::Instant::now() < deadline, "moto did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl S3Server {
    /// Points `command`'s S3 client at this server.
    pub(crate) fn serve(&self, command: &mut Command) {
        command.envs(self.env());
    }

    /// The environment that reaches this server.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
        ]
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn runs_kept_in_an_s3_store_resume_in_other_processes_exactly_once() {
    let (temp, dir) = state_dir("s3");
    let server = S3Server::start("paused-runs", &temp.join("moto.log"));
    let program = program_in(&dir, "const big = Array.from({ length: 5000 }, (_, i) => i); const v = await tools.echo({}); return [v, big.length];");
    let program = program.as_str();
    let codemode = |args: &[&str]| {
        let mut command = Command::new(codemode_binary());
        server.serve(&mut command);
        command
            .args(args)
            .args(["--state", "s3://paused-runs/fleet/one"])
            .env(
                "CODEMODE_STATE_KEY",
                "a fleet's shared key, at least 32 bytes",
            )
            .env("CODEMODE_STATE_DIR", dir.join("unused"));
        command
    };
    let mut run_ids = Vec::new();
    for _ in 0..3 {
        let out = codemode(&["run", program, "--pause-on", "echo", "--json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        let paused: Value = serde_json::from_slice(&out.stdout).unwrap();
        run_ids.push(paused["paused"]["runId"].as_str().unwrap().to_owned());
    }
    assert!(!dir.join("unused").exists(), "nothing was kept locally");
    claims_against(&server);
    for run_id in &run_ids {
        // Two processes race to resume the run; the store's conditional create picks one.
        let racers: Vec<_> = (0..2)
            .map(|n| {
                codemode(&["resume", run_id, "--reply", &format!("1={n}"), "--json"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outcomes: Vec<_> = racers
            .into_iter()
            .map(|child| child.wait_with_output().unwrap())
            .collect();
        let winners: Vec<_> = outcomes
            .iter()
            .filter(|out| out.status.code() == Some(0))
            .collect();
        assert_eq!(winners.len(), 1, "exactly one resume wins");
        let done: Value = serde_json::from_slice(&winners[0].stdout).unwrap();
        assert_eq!(done["result"][1], json!(5000));
        let loser = outcomes
            .iter()
            .find(|out| out.status.code() != Some(0))
            .unwrap();
        assert_eq!(loser.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&loser.stderr).contains("already resumed"),
            "{}",
            String::from_utf8_lossy(&loser.stderr)
        );
    }
}

/// The store's conditional create itself: the first claim of a run wins, every later one loses.
fn claims_against(server: &S3Server) {
    use codemode_host::durable::{Cutoffs, ObjectStateStore, StateStore, Swept};
    use std::time::SystemTime;
    let store = ObjectStateStore::s3_with(
        "s3://paused-runs/claims",
        &[
            ("aws_endpoint", &server.endpoint),
            ("aws_allow_http", "true"),
            ("aws_access_key_id", "test"),
            ("aws_secret_access_key", "test"),
            ("aws_region", "us-east-1"),
        ],
    )
    .expect("store");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let id = "0123456789abcdef0123456789abcdef";
        assert!(!store.claimed(id).await.unwrap());
        assert!(
            store.claim(id, "tag").await.unwrap(),
            "the first claim wins"
        );
        assert!(
            !store.claim(id, "tag").await.unwrap(),
            "a second claim loses"
        );
        assert!(store.claimed(id).await.unwrap());
        store.put(id, b"record".to_vec()).await.unwrap();
        assert_eq!(store.get(id, 6).await.unwrap(), Some(b"record".to_vec()));
        // Refused from the size the response's headers give, before the body is read.
        let refused = store.get(id, 5).await.unwrap_err().to_string();
        assert!(
            refused.contains("is 6 bytes, more than the 5") && refused.contains("not read"),
            "{refused}"
        );
        assert!(
            refused.contains("s3://paused-runs/claims/runs/"),
            "{refused}"
        );
        store.remove(id).await.unwrap();
        assert_eq!(store.get(id, 6).await.unwrap(), None);

        // A sweep drops what is older than its kind's cutoff, and notes when it ran.
        let hour = Duration::from_secs(3600);
        let (earlier, later) = (SystemTime::now() - hour, SystemTime::now() + hour);
        let kept = "fedcba9876543210fedcba9876543210";
        store.put(kept, b"record".to_vec()).await.unwrap();
        assert_eq!(store.last_sweep().await.unwrap(), None);
        let cutoffs = |records, marks| Cutoffs { records, marks };
        let swept = store.sweep(cutoffs(earlier, earlier)).await.unwrap();
        assert_eq!(swept, Swept::default());
        assert!(store.last_sweep().await.unwrap().is_some(), "noted");
        let swept = store.sweep(cutoffs(later, earlier)).await.unwrap();
        assert_eq!(
            swept,
            Swept {
                records: 1,
                marks: 0
            }
        );
        assert_eq!(store.get(kept, 6).await.unwrap(), None);
        assert!(store.claimed(id).await.unwrap());
        let swept = store.sweep(cutoffs(later, later)).await.unwrap();
        assert_eq!(
            swept,
            Swept {
                records: 0,
                marks: 1
            }
        );
        assert!(!store.claimed(id).await.unwrap());
        counts_in(&store).await;
    });
}

/// What quotas and tasks keep besides records: the records' sizes (a count that stops past
/// the room asked about), whose each run is, and a task's lease, swept with the records.
async fn counts_in(store: &codemode_host::durable::ObjectStateStore) {
    use codemode_host::durable::{Cutoffs, StateStore};
    use std::time::SystemTime;
    let owner = "0000000000000000000000000000000a";
    let runs: Vec<String> = (1..=3).map(|n| format!("{n:032x}")).collect();
    for (n, run) in runs.iter().enumerate() {
        store.note_owner(owner, run).await.unwrap();
        store.put(run, vec![0; 100 * (n + 1)]).await.unwrap();
    }
    let all = store.records(u64::MAX).await.unwrap();
    assert!(all.complete);
    assert_eq!(all.total, 600);
    assert_eq!(all.sizes.get(&runs[2]), Some(&300));
    let some = store.records(150).await.unwrap();
    assert!(!some.complete && some.total > 150, "{some:?}");
    let mut owned = store.owned(owner).await.unwrap();
    owned.sort();
    assert_eq!(owned, runs);
    assert!(store.owned(&"b".repeat(32)).await.unwrap().is_empty());
    let task = "0000000000000000000000000000000b";
    store.put_lease(task, b"lease".to_vec()).await.unwrap();
    assert_eq!(
        store.get_lease(task).await.unwrap(),
        Some(b"lease".to_vec())
    );

    let later = SystemTime::now() + Duration::from_secs(3600);
    let earlier = SystemTime::now() - Duration::from_secs(3600);
    store
        .sweep(Cutoffs {
            records: later,
            marks: earlier,
        })
        .await
        .unwrap();
    assert_eq!(store.records(u64::MAX).await.unwrap().total, 0);
    assert!(store.owned(owner).await.unwrap().is_empty(), "notes swept");
    assert_eq!(store.get_lease(task).await.unwrap(), None, "leases swept");
}

// The state store trusted only when it is the user's own (the reproductions of a shared or
// open state directory, a foreign key, an oversized or out-of-bounds record, a replayed one).

//! A fleet's state store: paused runs expire after `--state-ttl` and are swept away with the
//! marks of resumed runs, and a shared store without the shared key is refused up front.

use super::*;

fn exists(dir: &Path, sub: &str, name: &str) -> bool {
    dir.join(sub).join(name).exists()
}

#[test]
fn paused_runs_expire_and_are_swept_with_the_marks_of_resumed_ones() {
    let (_temp, dir) = state_dir("expiry");
    let program = program_in(&dir, "return await tools.echo({ n: 1 });");
    let program = program.as_str();
    let pause = |ttl: &str| {
        let (code, paused, stderr) = cli(
            &[
                "run",
                program,
                "--pause-on",
                "echo",
                "--json",
                "--state-ttl",
                ttl,
            ],
            &dir,
        );
        assert_eq!(code, Some(3), "{stderr}");
        let id = paused["paused"]["runId"].as_str().expect("a run id");
        id.to_owned()
    };
    let (expiring, swept, resumed) = (pause("1s"), pause("1s"), pause("1s"));
    let (code, done, stderr) = cli(&["resume", &resumed, "--reply", "1=2", "--json"], &dir);
    assert_eq!((code, &done["result"]), (Some(0), &json!(2)), "{stderr}");
    assert!(exists(&dir, "consumed", &resumed));
    std::thread::sleep(Duration::from_millis(2500));

    // Past its time to live: refused, and its record dropped.
    let (code, _, stderr) = cli(
        &["resume", &expiring, "--reply", "1=2", "--state-ttl", "1s"],
        &dir,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("run {expiring} expired: it was paused at "))
            && stderr.contains("kept for 1s"),
        "{stderr}"
    );
    assert!(!record_path(&dir, &expiring).exists());

    // The next pause sweeps: the other expired record, and the mark older than twice the TTL.
    assert!(record_path(&dir, &swept).exists());
    let kept = pause("1s");
    assert!(!record_path(&dir, &swept).exists(), "swept");
    assert!(!exists(&dir, "consumed", &resumed), "the mark is swept too");
    assert!(record_path(&dir, &kept).exists());
    assert!(dir.join("swept").exists());

    // Within the default time to live, nothing is refused or swept.
    let (code, done, stderr) = cli(&["resume", &kept, "--reply", "1=3", "--json"], &dir);
    assert_eq!((code, &done["result"]), (Some(0), &json!(3)), "{stderr}");

    let (code, _, stderr) = cli(
        &["run", program, "--pause-on", "echo", "--state-ttl", "0s"],
        &dir,
    );
    assert_eq!(code, Some(2));
    assert!(stderr.contains("at least 1s"), "{stderr}");
}

#[test]
fn an_s3_store_without_the_fleets_key_is_a_usage_error() {
    let (temp, dir) = state_dir("s3-key");
    let program = program_in(&temp.join("program"), "return 1;");
    let out = Command::new(codemode_binary())
        .args([
            "run",
            &program,
            "--pause-on",
            "echo",
            "--state",
            "s3://bucket/fleet",
        ])
        .env_remove("CODEMODE_STATE_KEY")
        // A local key file exists and is not used for a shared store.
        .env("CODEMODE_STATE_DIR", &dir)
        .env("AWS_REGION", "us-east-1")
        .output()
        .expect("codemode runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("s3://bucket/fleet is shared by every process that resumes its runs")
            && stderr.contains("set CODEMODE_STATE_KEY"),
        "{stderr}"
    );
    assert!(!dir.exists(), "no local key was made for it");
}

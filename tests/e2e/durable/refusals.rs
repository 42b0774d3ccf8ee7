//! What a state store refuses before anything runs: directories and keys others can reach,
//! oversized records, budgets beyond the caps, and records put back after their resume.

use super::*;

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_state_directory_others_can_write_is_refused_naming_it_and_the_fix() {
    let (_temp, dir) = state_dir("open");
    let run_id = pause_one(&dir);
    let program = dir.join("program.ts");
    let program = program.to_str().unwrap();
    set_mode(&dir, 0o777);
    for args in [
        &["run", program, "--pause-on", "echo"][..],
        &["resume", run_id.as_str(), "--reply", "1=1"][..],
    ] {
        let (code, _, stderr) = cli(args, &dir);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "the state directory {} has mode 0777",
                dir.display()
            )),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("chmod 700 {}", dir.display())),
            "{stderr}"
        );
    }
    // Group-writable alone is refused too; readable is not a risk to the records' integrity.
    set_mode(&dir, 0o770);
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("its group can write it"), "{stderr}");
    // Its runs/ likewise.
    set_mode(&dir, 0o755);
    set_mode(&dir.join("runs"), 0o777);
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&dir.join("runs").display().to_string()),
        "{stderr}"
    );
    set_mode(&dir.join("runs"), 0o700);
    let (code, done, stderr) = cli(&["resume", &run_id, "--reply", "1=1", "--json"], &dir);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(done["result"], json!(1));
}

#[test]
fn a_key_file_anyone_else_can_read_is_refused() {
    let (_temp, dir) = state_dir("key-mode");
    let run_id = pause_one(&dir);
    let key = dir.join("key");
    set_mode(&key, 0o644);
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("the state key {} has mode 0644", key.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("chmod 600 {}", key.display())),
        "{stderr}"
    );
    // A symlink in its place is not followed.
    let (_elsewhere_temp, elsewhere) = state_dir("key-elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::rename(&key, elsewhere.join("key")).unwrap();
    set_mode(&elsewhere.join("key"), 0o600);
    std::os::unix::fs::symlink(elsewhere.join("key"), &key).unwrap();
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
}

/// Whether this process may give files away (root, as CI runs); the cases that need it say
/// they were skipped otherwise.
fn can_chown() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: giving a file to another user needs root");
    }
    root
}

#[test]
fn a_state_directory_or_key_of_another_user_is_refused_even_to_root() {
    if !can_chown() {
        return;
    }
    // Another local user (nobody) owns the directory: they could have replaced the key and
    // re-signed a record under a victim's run id. Root's resume refuses it before reading.
    let nobody = 65534;
    let (_temp, dir) = state_dir("foreign");
    let run_id = pause_one(&dir);
    std::os::unix::fs::chown(&dir, Some(nobody), Some(nobody)).unwrap();
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the state directory {} belongs to uid 65534",
            dir.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("chown 0 {}", dir.display())),
        "{stderr}"
    );
    let program = dir.join("program.ts");
    let (code, _, stderr) = cli(
        &["run", program.to_str().unwrap(), "--pause-on", "echo"],
        &dir,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("belongs to uid 65534"), "{stderr}");

    // The directory is root's again but the key is nobody's, mode 0600 or not.
    std::os::unix::fs::chown(&dir, Some(0), Some(0)).unwrap();
    let key = dir.join("key");
    std::os::unix::fs::chown(&key, Some(nobody), Some(nobody)).unwrap();
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the state key {} belongs to uid 65534",
            key.display()
        )),
        "{stderr}"
    );
    // And a record of nobody's is not read.
    std::os::unix::fs::chown(&key, Some(0), Some(0)).unwrap();
    let record = record_path(&dir, &run_id);
    std::os::unix::fs::chown(&record, Some(nobody), Some(nobody)).unwrap();
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("the record"), "{stderr}");
    assert!(stderr.contains("belongs to uid 65534"), "{stderr}");
    std::os::unix::fs::chown(&record, Some(0), Some(0)).unwrap();
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn an_oversized_record_is_refused_before_it_is_read() {
    let (_temp, dir) = state_dir("oversized");
    let run_id = pause_one(&dir);
    let record = record_path(&dir, &run_id);
    let cap = codemode_host::durable::MAX_RECORD_BYTES;
    // Sparse: it says 5 GiB without taking them; reading it would take that much memory.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&record)
        .unwrap()
        .set_len(cap + 1)
        .unwrap();
    let started = std::time::Instant::now();
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} is {} bytes, more than the {cap} a paused-run record may hold; it was not read",
            record.display(),
            cap + 1
        )),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// Rewrites the record's header with `edit` (Python source over the parsed header `h`) and
/// signs it again with the state directory's key: authentic, as only someone holding the key
/// could make it.
fn resign(record: &Path, key: &Path, edit: &str) {
    let script = format!(
        r#"
import hashlib, hmac, json, struct, sys
record, key = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
length = struct.unpack("<I", record[12:16])[0]
h = json.loads(record[16:16 + length])
{edit}
header = json.dumps(h, separators=(",", ":")).encode()
body = record[:12] + struct.pack("<I", len(header)) + header + record[16 + length:-32]
open(sys.argv[1], "wb").write(body + hmac.new(key, body, hashlib.sha256).digest())
"#
    );
    let status = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(record)
        .arg(key)
        .status()
        .expect("python3 runs");
    assert!(status.success());
}

#[test]
fn a_signed_record_with_budgets_beyond_the_caps_is_refused() {
    let (_temp, dir) = state_dir("bounds");
    let run_id = pause_one(&dir);
    let record = record_path(&dir, &run_id);
    let original = std::fs::read(&record).unwrap();
    let cases = [
        (
            r#"h["budgets"]["computeMs"] = 10**12"#,
            "computeMs must be at most 2147483647, got 1000000000000",
        ),
        (
            r#"h["budgets"]["memoryMb"] = 8192"#,
            "memoryMb must be at most 4096",
        ),
        (
            r#"h["budgets"]["wallMs"] = 2**40"#,
            "maxWallMs must be at most 2147483647",
        ),
    ];
    for (edit, expected) in cases {
        std::fs::write(&record, &original).unwrap();
        resign(&record, &dir.join("key"), edit);
        let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=1"], &dir);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains("is refused: it is not authentic"),
            "{stderr}"
        );
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }
    // Re-signed within the caps: the same path resumes (the refusals claimed nothing).
    std::fs::write(&record, &original).unwrap();
    resign(
        &record,
        &dir.join("key"),
        r#"h["budgets"]["computeMs"] = 1234"#,
    );
    let (code, done, stderr) = cli(&["resume", &run_id, "--reply", "1=7", "--json"], &dir);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(done["result"], json!(7));
}

#[test]
fn a_copy_of_a_resumed_record_put_back_does_not_resume_again() {
    let (_temp, dir) = state_dir("replay");
    let run_id = pause_one(&dir);
    let record = record_path(&dir, &run_id);
    let copy = std::fs::read(&record).unwrap();
    let (code, done, stderr) = cli(&["resume", &run_id, "--reply", "1=1", "--json"], &dir);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(done["result"], json!(1));
    assert!(!record.exists(), "the claim removed the record");
    for attempt in 2..4 {
        // The copy put back with its mode, and any marker beside it removed.
        std::fs::write(&record, &copy).unwrap();
        set_mode(&record, 0o600);
        let _ = std::fs::remove_file(dir.join("runs").join(format!("{run_id}.resumed")));
        let (code, _, stderr) = cli(
            &["resume", &run_id, "--reply", &format!("1={attempt}")],
            &dir,
        );
        assert_eq!(code, Some(2), "attempt {attempt}: {stderr}");
        assert!(stderr.contains("already resumed"), "{stderr}");
    }
}

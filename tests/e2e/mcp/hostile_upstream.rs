//! An upstream server that tries to make codemode buffer without bound
//! (`fixtures/mcp-servers/hostile.py`, JSON-RPC written by hand): a gigabyte of stderr on one
//! line, a gigabyte of progress notifications, a message past the 16 MiB cap. codemode reads
//! all of it within its bounds, so its own peak stays small (before: 1.2 GB and 2.2 GB
//! resident), the program gets its results or a clear error, and a client gets progress cut to
//! a kilobyte.

use codemode_host::Budgets;

use super::*;
use crate::hostile_corpus::run_cli;

fn hostile() -> String {
    format!(
        "hostile=python3 {}",
        repo().join("fixtures/mcp-servers/hostile.py").display()
    )
}

/// `program` under `codemode run --json` with the hostile server: its outcome and the
/// process's peak resident memory in MiB.
fn run_hostile(program: &str) -> (Value, f64) {
    let (text, stderr, peak) = run_cli(Err(program), &Budgets::default(), &["--mcp", &hostile()]);
    let outcome =
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text} {stderr}"));
    (outcome, peak)
}

#[test]
fn floods_of_stderr_and_progress_leave_codemode_bounded() {
    let (outcome, peak) = run_hostile(
        r#"return [
            await tools.mcp__hostile__stderr_flood({ mib: 1024 }),
            await tools.mcp__hostile__progress_flood({ count: 128, kib: 8192 }),
            await tools.mcp__hostile__ok({}),
        ];"#,
    );
    assert_eq!(
        outcome["result"],
        json!(["flooded", "sent", "ok"]),
        "{outcome}"
    );
    eprintln!("peak {peak:.0} MiB");
    assert!(peak < 256.0, "codemode peaked at {peak:.0} MiB");
}

#[test]
fn a_message_past_the_cap_cuts_the_server_off_and_one_under_it_arrives() {
    let (outcome, peak) = run_hostile(
        r#"const out = [(await tools.mcp__hostile__huge_message({ mib: 8 })).length];
           try { await tools.mcp__hostile__huge_message({ mib: 17 }); } catch (e) { out.push(e.message); }
           return out;"#,
    );
    assert_eq!(outcome["result"][0], json!(8 * 1024 * 1024), "{outcome}");
    let refused = outcome["result"][1].as_str().unwrap_or_default();
    assert!(
        refused.starts_with(
            "mcp server \"hostile\" is unavailable: it wrote a message longer than 16 MiB"
        ),
        "{outcome}"
    );
    assert!(peak < 512.0, "codemode peaked at {peak:.0} MiB");
}

#[test]
fn a_failed_start_shows_a_short_tail_of_a_huge_stderr() {
    let out = run(
        &[
            "--mcp",
            "dead=sh -c 'head -c 50000000 /dev/zero | tr \"\\000\" e >&2; echo >&2; echo last words >&2; exit 1'",
        ],
        "return 1;",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("mcp server \"dead\" did not start"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("its stderr ended with: eeee"), "{line:.300}");
    assert!(
        line.contains("e… | last words;"),
        "{:.300}",
        &line[line.len().saturating_sub(300)..]
    );
    assert!(line.len() < 20 * 1024, "{} bytes", line.len());
}

#[test]
fn progress_reaches_the_client_cut_to_a_kilobyte_and_oversized_notifications_are_dropped() {
    let server = stdio_server(&["--mcp", &hostile()]);
    let answers = drive(
        json!({"steps": [{
            "op": "call", "tool": "run_code", "progress": true,
            "args": {
                "code": "await tools.mcp__hostile__progress_flood({ count: 3, kib: 32, pause: 0.3 }); return await tools.mcp__hostile__progress_flood({ count: 2, kib: 128, pause: 0.3 });",
                "description": "Progress flood",
            },
        }]}),
        "stdio",
        &server,
    );
    assert_eq!(
        answers[0]["structured"]["result"],
        json!("sent"),
        "{answers:?}"
    );
    let theirs: Vec<&str> = answers[0]["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(|p| p[1].as_str())
        .filter(|m| m.starts_with("hostile: "))
        .collect();
    let cut = format!("hostile: {}…", "p".repeat(1024));
    assert_eq!(theirs, vec![cut.as_str(); 3], "{answers:.2000?}");
}

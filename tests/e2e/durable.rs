//! Durable runs: pause at pausing calls, keep the run, resume it (in another runtime or another
//! process), with its heap, timers, budgets and answers intact; and every refusal.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use codemode_e2e::{codemode_binary, echo, json, name_run_ids_run, temp_dir, tools, TempDir};
use codemode_host::{Budgets, Durability, WasmCodeRuntime, FUEL_PER_MS};
use codemode_runtime::code::{
    BindingNamespace, BindingRef, CodeRuntime, FailureKind, PausedRun, Resume, RunRejection,
    RunRequest, RunResult,
};
use serde_json::Value;

mod expiry;
mod refusals;
pub(crate) mod s3;

/// A state directory's path, not made yet (codemode makes it, private), in a temporary
/// directory that is removed with it when the first is dropped.
fn state_dir(name: &str) -> (TempDir, PathBuf) {
    let temp = temp_dir(&format!("durable-{name}"));
    let dir = temp.join("state");
    (temp, dir)
}

fn durability(dir: &Path) -> Durability {
    Durability::local(dir)
        .expect("state directory")
        .pause_threshold(Duration::from_millis(50))
}

fn runtime(dir: &Path, budgets: Budgets) -> WasmCodeRuntime {
    WasmCodeRuntime::new(budgets)
        .expect("runtime")
        .with_durability(durability(dir))
}

fn bindings() -> Vec<BindingNamespace> {
    vec![tools(vec![("approve", echo()), ("echo", echo())])]
}

fn pause_on_approve() -> BTreeSet<BindingRef> {
    [BindingRef::new("tools", "approve")].into_iter().collect()
}

async fn start(rt: &WasmCodeRuntime, program: &str) -> RunResult {
    rt.run(RunRequest {
        program: program.into(),
        bindings: bindings(),
        pause_on: pause_on_approve(),
        ..Default::default()
    })
    .await
    .expect("run resolves")
}

async fn resume(
    rt: &WasmCodeRuntime,
    run_id: &str,
    replies: Vec<(&str, Result<Value, &str>)>,
) -> Result<RunResult, RunRejection> {
    rt.run(RunRequest {
        bindings: bindings(),
        resume: Some(Resume {
            run_id: run_id.to_owned(),
            replies: replies
                .into_iter()
                .map(|(id, r)| (id.to_owned(), r.map_err(str::to_owned)))
                .collect(),
        }),
        ..Default::default()
    })
    .await
}

fn paused(result: &RunResult) -> &PausedRun {
    assert!(result.error.is_none(), "{:?}", result.error);
    result.paused.as_ref().expect("the run paused")
}

const HEAP_PROGRAM: &str = r#"
const rows = new Map<string, number[]>();
for (let i = 0; i < 20000; i++) rows.set("k" + i, [i, i * 2]);
const items = Array.from({ length: 30000 }, (_, i) => ({ i, label: "item " + i }));
let count = 0;
const bump = (by: number) => (count += by);
let release: (v: string) => void = () => {};
const later = new Promise<string>((resolve) => { release = resolve; });
const timer = new Promise<string>((resolve) => setTimeout(() => resolve("timer fired"), 200));
console.log("before", rows.size);
const answer = await tools.approve({ amount: 5, rows: rows.size });
bump(answer.amount);
release("released");
return {
  size: rows.size,
  last: rows.get("k19999"),
  items: items.length,
  sum: items.reduce((s, x) => s + x.i, 0),
  label: items[29999].label,
  answer,
  count: bump(1),
  later: await later,
  timer: await timer,
};
"#;

#[tokio::test]
async fn a_large_heap_timers_and_pending_promises_survive_a_pause() {
    let (_temp, dir) = state_dir("heap");
    let first = start(&runtime(&dir, Budgets::default()), HEAP_PROGRAM).await;
    let pause = paused(&first);
    assert_eq!(first.logs, vec!["before 20000"]);
    assert_eq!(pause.pending.len(), 1);
    assert_eq!(pause.pending[0].name, "approve");
    assert_eq!(
        pause.pending[0].arguments,
        json!({"amount": 5, "rows": 20000})
    );
    // Another runtime (as another process would) resumes it.
    let second = runtime(&dir, Budgets::default());
    let id = pause.pending[0].call_id.clone();
    let done = resume(
        &second,
        &pause.run_id,
        vec![(&id, Ok(json!({"amount": 7})))],
    )
    .await
    .expect("resumes");
    assert!(done.error.is_none(), "{:?}", done.error);
    assert_eq!(done.logs, vec!["before 20000"]);
    assert_eq!(
        done.value,
        Some(json!({
            "size": 20000, "last": [19999, 39998], "items": 30000, "sum": 449985000,
            "label": "item 29999", "answer": {"amount": 7}, "count": 8,
            "later": "released", "timer": "timer fired"
        }))
    );
}

#[tokio::test]
async fn several_pending_calls_pause_twice_and_a_rejection_is_a_tool_call_error() {
    let (_temp, dir) = state_dir("twice");
    let rt = runtime(&dir, Budgets::default());
    let program = r#"
      const [a, b, echoed] = await Promise.all([
        tools.approve({ n: 1 }),
        tools.approve({ n: 2 }).catch((e) => [e instanceof ToolCallError, e.toolName, e.message]),
        tools.echo({ x: 1 }),
      ]);
      const c = await tools.approve({ n: 3 });
      return { a, b, echoed, c };
    "#;
    let first = start(&rt, program).await;
    let pause = paused(&first);
    let pending: Vec<_> = pause.pending.iter().map(|c| c.arguments.clone()).collect();
    assert_eq!(
        pending,
        vec![json!({"n": 1}), json!({"n": 2})],
        "echo settled before the pause"
    );
    let (one, two) = (
        pause.pending[0].call_id.clone(),
        pause.pending[1].call_id.clone(),
    );
    // Answer only the first: the run pauses again on the second.
    let second = resume(&rt, &pause.run_id, vec![(&one, Ok(json!("yes")))])
        .await
        .expect("resumes");
    let again = paused(&second);
    assert_ne!(again.run_id, pause.run_id);
    assert_eq!(again.pending.len(), 1);
    assert_eq!(again.pending[0].call_id, two);
    let third = resume(&rt, &again.run_id, vec![(&two, Err("declined by a human"))])
        .await
        .expect("resumes");
    let last = paused(&third);
    assert_eq!(last.pending[0].arguments, json!({"n": 3}));
    let call = last.pending[0].call_id.clone();
    let done = resume(&rt, &last.run_id, vec![(&call, Ok(json!(3)))])
        .await
        .expect("resumes");
    assert!(done.error.is_none(), "{:?}", done.error);
    assert_eq!(
        done.value,
        Some(json!({
            "a": "yes",
            "b": [true, "approve", "declined by a human"],
            "echoed": {"x": 1},
            "c": 3
        }))
    );
}

#[tokio::test]
async fn compute_spent_before_a_pause_counts_after_it() {
    let (_temp, dir) = state_dir("compute");
    let spin = "for (let i = 0; i < 300000; i++) { x = (x + i) % 7; }";
    // What one spin costs, measured rather than guessed.
    let (alone, metrics) = WasmCodeRuntime::new(Budgets::default())
        .unwrap()
        .run_measured(RunRequest {
            program: format!("let x = 0; {spin} return x;"),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(alone.error.is_none());
    // Room for one spin and a half: the second spin fails only if the first still counts.
    let compute_ms = (metrics.fuel_consumed * 3 / 2).div_ceil(FUEL_PER_MS);
    let budgets = Budgets {
        compute_ms,
        ..Budgets::default()
    };
    let rt = runtime(&dir, budgets);
    let program = format!("let x = 0; {spin} await tools.approve({{}}); {spin} return x;");
    let first = start(&rt, &program).await;
    let pause = paused(&first);
    let id = pause.pending[0].call_id.clone();
    let done = resume(&rt, &pause.run_id, vec![(&id, Ok(json!(true)))])
        .await
        .expect("resumes");
    let error = done.error.expect("the compute budget ran out");
    assert_eq!(error.kind, FailureKind::Timeout, "{}", error.message);
    assert!(
        error.message.contains("compute budget"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn time_spent_paused_does_not_count_against_the_wall_clock() {
    let (_temp, dir) = state_dir("wall");
    let budgets = Budgets {
        wall_ms: 600,
        ..Budgets::default()
    };
    let rt = runtime(&dir, budgets);
    let first = start(&rt, "const v = await tools.approve({}); return v;").await;
    let pause = paused(&first);
    tokio::time::sleep(Duration::from_millis(900)).await;
    let id = pause.pending[0].call_id.clone();
    let done = resume(&rt, &pause.run_id, vec![(&id, Ok(json!("late")))])
        .await
        .expect("resumes");
    assert!(done.error.is_none(), "{:?}", done.error);
    assert_eq!(done.value, Some(json!("late")));
}

/// Writes `text` as `dir/program.ts` (creating `dir`, private, as a state directory must be)
/// and returns its path.
fn program_in(dir: &Path, text: &str) -> String {
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .unwrap();
    let path = dir.join("program.ts");
    std::fs::write(&path, text).unwrap();
    path.to_str().expect("a UTF-8 temporary path").to_owned()
}

fn record_path(dir: &Path, run_id: &str) -> PathBuf {
    dir.join("runs").join(format!("{run_id}.run"))
}

#[tokio::test]
async fn tampered_unknown_and_twice_resumed_records_are_refused_before_anything_runs() {
    let (_temp, dir) = state_dir("refusals");
    let rt = runtime(&dir, Budgets::default());
    // A paused run has not returned: no missing-return hint for its bare last expression.
    let bare = start(&rt, "await tools.approve({ n: 0 })").await;
    assert!(
        paused(&bare).pending.len() == 1 && bare.hint.is_none(),
        "{:?}",
        bare.hint
    );
    let first = start(&rt, "return await tools.approve({ n: 1 });").await;
    let pause = paused(&first).clone();
    let id = pause.pending[0].call_id.clone();
    let refused = |r: Result<RunResult, RunRejection>| match r {
        Err(RunRejection::Pause(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    };

    // A reply to a call the run does not wait on.
    let message = refused(resume(&rt, &pause.run_id, vec![("99", Ok(json!(1)))]).await);
    assert!(
        message.contains("call \"99\", which is not a call this paused run waits on"),
        "{message}"
    );
    assert!(!message.contains(&pause.run_id), "{message}");

    // One flipped byte anywhere.
    let path = record_path(&dir, &pause.run_id);
    let original = std::fs::read(&path).unwrap();
    let mut tampered = original.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 1;
    std::fs::write(&path, &tampered).unwrap();
    let message = refused(resume(&rt, &pause.run_id, vec![(&id, Ok(json!(1)))]).await);
    assert!(message.contains("not authentic"), "{message}");

    // Another key: as authentic as a forgery.
    std::fs::write(&path, &original).unwrap();
    let foreign = WasmCodeRuntime::new(Budgets::default())
        .unwrap()
        .with_durability(Durability::with_store(
            std::sync::Arc::new(codemode_host::durable::LocalStore::new(&dir)),
            b"another key entirely, 32 bytes or more".to_vec(),
        ));
    let message = refused(resume(&foreign, &pause.run_id, vec![(&id, Ok(json!(1)))]).await);
    assert!(message.contains("not authentic"), "{message}");

    // Not a run id; no such run.
    let message = refused(resume(&rt, "../../etc/passwd", vec![]).await);
    assert!(message.contains("not a run id"), "{message}");
    let message = refused(resume(&rt, &"0".repeat(32), vec![]).await);
    assert!(message.contains("no paused run"), "{message}");

    // The refusals left it resumable; it resumes once.
    let done = resume(&rt, &pause.run_id, vec![(&id, Ok(json!(1)))])
        .await
        .expect("resumes");
    assert_eq!(done.value, Some(json!(1)));
    let message = refused(resume(&rt, &pause.run_id, vec![(&id, Ok(json!(2)))]).await);
    assert!(message.contains("already resumed"), "{message}");

    // A runtime without a state store refuses to pause at all.
    let plain = WasmCodeRuntime::new(Budgets::default()).unwrap();
    let refusal = plain
        .run(RunRequest {
            program: "return 1".into(),
            bindings: bindings(),
            pause_on: pause_on_approve(),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(refusal, Err(RunRejection::Pause(_))),
        "{refusal:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_pauses_and_racing_resumes_resumes_each_run_exactly_once() {
    let (_temp, dir) = state_dir("storm");
    let rt = runtime(&dir, Budgets::default());
    let runs = 24;
    let mut pausing = Vec::new();
    for n in 0..runs {
        let rt = rt.clone();
        pausing.push(tokio::spawn(async move {
            let program = format!(
                "const big = Array.from({{ length: {} }}, (_, i) => i); const v = await tools.approve({{ n: {n} }}); return [v, big.length];",
                1000 * (n + 1)
            );
            start(&rt, &program).await
        }));
    }
    let mut paused_runs = Vec::new();
    for task in pausing {
        let result = task.await.unwrap();
        paused_runs.push(paused(&result).clone());
    }
    // Two resumes race for every run; exactly one wins each.
    let mut resuming = Vec::new();
    for (n, pause) in paused_runs.iter().enumerate() {
        for attempt in 0..2 {
            let rt = rt.clone();
            let run_id = pause.run_id.clone();
            let call = pause.pending[0].call_id.clone();
            resuming.push(tokio::spawn(async move {
                let outcome = resume(&rt, &run_id, vec![(&call, Ok(json!(attempt)))]).await;
                (n, outcome)
            }));
        }
    }
    let mut wins = vec![0; runs];
    for task in resuming {
        let (n, outcome) = task.await.unwrap();
        match outcome {
            Ok(result) => {
                assert!(result.error.is_none(), "{:?}", result.error);
                let value = result.value.unwrap();
                assert_eq!(value[1], json!(1000 * (n + 1)));
                wins[n] += 1;
            }
            Err(RunRejection::Pause(message)) => {
                assert!(message.contains("already resumed"), "{message}")
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(wins.iter().all(|w| *w == 1), "{wins:?}");
}

// Across processes: the CLI pauses, exits 3, and another `codemode` resumes.

fn cli(args: &[&str], dir: &Path) -> (Option<i32>, Value, String) {
    cli_with(args, dir, None)
}

/// `codemode ARGS --state DIR`, with its own module cache when `cache` is given (as on
/// another machine, which prepares the sandbox itself).
fn cli_with(args: &[&str], dir: &Path, cache: Option<&Path>) -> (Option<i32>, Value, String) {
    let mut command = Command::new(codemode_binary());
    command
        .args(args)
        .arg("--state")
        .arg(dir)
        .env_remove("CODEMODE_STATE_KEY");
    if let Some(cache) = cache {
        command.env("CODEMODE_CACHE_DIR", cache);
    }
    let out = command.output().expect("codemode runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let mut value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    name_run_ids_run(&mut value);
    (
        out.status.code(),
        value,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn the_cli_pauses_in_one_process_and_resumes_in_another() {
    let (_temp, dir) = state_dir("cli");
    let program = program_in(
        &dir,
        r#"
const seen = new Map<string, number>([["a", 1]]);
const big = new Map<number, { n: number; s: string }>();
for (let i = 0; i < 20000; i++) big.set(i, { n: i, s: "v" + i });
let calls = 0;
const counter = () => ++calls;
const timer = new Promise<string>((resolve) => setTimeout(() => resolve("rang"), 1500));
console.log("asking");
const answer = await tools.echo({ question: "ship it?" });
seen.set("b", 2);
counter();
let rejected = "";
try { await tools.echo({ question: "and this?" }); } catch (e) { rejected = `${e.name}: ${e.message}`; }
return { answer, seen: [...seen], rejected, big: big.get(19999), calls: counter(), timer: await timer };
"#,
    );
    let program = program.as_str();
    let (code, first, stderr) = cli(&["run", program, "--pause-on", "echo", "--json"], &dir);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(first["logs"], json!(["asking"]));
    let run_id = first["paused"]["runId"]
        .as_str()
        .expect("run id")
        .to_owned();
    assert_eq!(
        first["paused"]["pending"],
        json!([{"callId": "1", "tool": "echo", "arguments": {"question": "ship it?"}}])
    );
    let key = dir.join("key");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    let (code, second, stderr) = cli(
        &["resume", &run_id, "--reply", r#"1={"yes":true}"#, "--json"],
        &dir,
    );
    assert_eq!(code, Some(3), "paused again on the second echo: {stderr}");
    let again = second["paused"]["runId"].as_str().unwrap().to_owned();
    assert_eq!(second["paused"]["pending"][0]["callId"], json!("2"));

    let (code, done, stderr) = cli(
        &["resume", &again, "--reject", "2=not today", "--json"],
        &dir,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(done["logs"], json!(["asking"]));
    assert_eq!(
        done["result"],
        json!({
            "answer": {"yes": true}, "seen": [["a", 1], ["b", 2]], "rejected": "ToolCallError: not today",
            "big": {"n": 19999, "s": "v19999"}, "calls": 2, "timer": "rang"
        })
    );

    // Resumed once only; a reply that is not JSON is a usage error.
    let (code, _, stderr) = cli(&["resume", &again, "--reject", "2=again"], &dir);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("already resumed"), "{stderr}");
    let (code, _, stderr) = cli(&["resume", &again, "--reply", "2=yes"], &dir);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("not JSON"), "{stderr}");
    let (code, _, stderr) = cli(&["run", program, "--pause-on", "ecko"], &dir);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown tool \"ecko\""), "{stderr}");
}

#[test]
fn a_python_run_pauses_at_a_tool_call_and_resumes_in_another_process() {
    let (_temp, dir) = state_dir("cli-python");
    program_in(&dir, "");
    let path = dir.join("program.py");
    std::fs::write(
        &path,
        r#"import asyncio
seen = {"a": 1}
big = {i: {"n": i, "s": "v" + str(i)} for i in range(20000)}
print("asking")
slept = asyncio.sleep(0.01)
answer = await tools.echo({"question": "ship it?"})
seen["b"] = 2
try:
    await tools.echo({"question": "and this?"})
    rejected = None
except ToolCallError as e:
    rejected = [e.tool_name, str(e)]
await slept
{"answer": answer, "seen": seen, "rejected": rejected, "big": big[19999]}
"#,
    )
    .unwrap();
    let program = path.to_str().expect("a UTF-8 temporary path");
    let (code, first, stderr) = cli(&["run", program, "--pause-on", "echo", "--json"], &dir);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(first["logs"], json!(["asking"]));
    let run_id = first["paused"]["runId"]
        .as_str()
        .expect("run id")
        .to_owned();
    assert_eq!(
        first["paused"]["pending"],
        json!([{"callId": "2", "tool": "echo", "arguments": {"question": "ship it?"}}])
    );

    // A TypeScript runtime says which runtime resumes it, and leaves it resumable.
    let (code, _, stderr) = cli(
        &["resume", &run_id, "--lang", "typescript", "--reply", "2=1"],
        &dir,
    );
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--lang python"), "{stderr}");

    // Without --lang, the record says which guest paused the run.
    let (code, second, stderr) = cli(
        &["resume", &run_id, "--reply", r#"2={"yes":true}"#, "--json"],
        &dir,
    );
    assert_eq!(code, Some(3), "paused again on the second echo: {stderr}");
    let again = second["paused"]["runId"].as_str().unwrap().to_owned();
    let pending = &second["paused"]["pending"][0];
    assert_eq!(pending["tool"], json!("echo"));
    let call = pending["callId"].as_str().unwrap().to_owned();

    let (code, done, stderr) = cli(
        &[
            "resume",
            &again,
            "--lang",
            "python",
            "--reject",
            &format!("{call}=not today"),
            "--json",
        ],
        &dir,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        done["result"],
        json!({
            "answer": {"yes": true}, "seen": {"a": 1, "b": 2},
            "rejected": ["echo", "not today"], "big": {"n": 19999, "s": "v19999"}
        })
    );
}

#[test]
fn a_machine_that_prepared_its_own_sandbox_resumes_another_machines_run() {
    // Pre-initialisation is deterministic, so two independently prepared caches hold the same
    // image, and a fleet sharing a state store (and key) can resume each other's runs.
    let (_temp, dir) = state_dir("fleet");
    let (one, two) = (dir.join("cache-one"), dir.join("cache-two"));
    let program = program_in(
        &dir,
        "const a = [1, 2, 3]; const v = await tools.echo({}); return [...a, v];",
    );
    let program = program.as_str();
    let (code, paused, stderr) = cli_with(
        &["run", program, "--pause-on", "echo", "--json"],
        &dir,
        Some(&one),
    );
    assert_eq!(code, Some(3), "{stderr}");
    let run_id = paused["paused"]["runId"].as_str().unwrap().to_owned();
    let (code, done, stderr) = cli_with(
        &["resume", &run_id, "--reply", "1=4", "--json"],
        &dir,
        Some(&two),
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(done["result"], json!([1, 2, 3, 4]));
}

#[test]
fn a_paused_approval_answered_for_the_run_decides_the_rest_of_it() {
    let (_temp, dir) = state_dir("approval-scope");
    let program = program_in(
        &dir,
        r#"
const out: unknown[] = [];
for (let i = 0; i < 3; i++) {
  try { out.push((await tools.echo({ i }) as { i: number }).i); } catch (e) { out.push((e as Error).message); }
}
const both = await Promise.allSettled([tools.echo({ i: 3 }), tools.echo({ i: 4 })]);
return [...out, ...both.map((r) => r.status === "fulfilled" ? (r.value as { i: number }).i : (r.reason as Error).message)];
"#,
    );
    let program = program.as_str();
    let ask = ["--ask", "echo", "--pause-on-ask", "--json"];
    let start = |dir: &Path| {
        let (code, first, stderr) = cli(&[&["run", program][..], &ask].concat(), dir);
        assert_eq!(code, Some(3), "{stderr}");
        first["paused"]["runId"].as_str().unwrap().to_owned()
    };
    // Approved for the run: no other call pauses; the calls are made in the resuming process.
    let run_id = start(&dir);
    let reply = r#"1={"approved": true, "scope": "run"}"#;
    let (code, done, stderr) = cli(
        &[&["resume", &run_id, "--reply", reply][..], &ask].concat(),
        &dir,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(done["result"], json!([0, 1, 2, 3, 4]));
    assert_eq!(done["calls"].as_array().map(Vec::len), Some(5));
    // Declined for the session (kept with the run): every later call fails at once.
    let run_id = start(&dir);
    let reply = r#"1={"approved": false, "scope": "session"}"#;
    let (code, done, stderr) = cli(
        &[&["resume", &run_id, "--reply", reply][..], &ask].concat(),
        &dir,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let declined = "tool \"echo\" was declined for the rest of this run";
    assert_eq!(
        done["result"],
        json!([
            "tool \"echo\" was not approved",
            declined,
            declined,
            declined,
            declined
        ])
    );
    // An answer that is neither is refused, and says what an answer is.
    let run_id = start(&dir);
    let (code, _, stderr) = cli(
        &[
            "resume",
            &run_id,
            "--reply",
            r#"1={"approved": true, "scope": "forever"}"#,
        ],
        &dir,
    );
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("unknown approval scope \"forever\""),
        "{stderr}"
    );
}

#[test]
fn an_approval_becomes_a_pause_and_a_person_decides_later() {
    let (_temp, dir) = state_dir("approval");
    let program = program_in(
        &dir,
        r#"
const a = await tools.echo({ n: 1 });
let b: unknown;
try { b = await tools.echo({ n: 2 }); } catch (e) { b = `${e.name}: ${e.message}`; }
return { a, b };
"#,
    );
    let program = program.as_str();
    let ask = ["--ask", "echo", "--pause-on-ask", "--json"];
    let (code, first, stderr) = cli(&[&["run", program][..], &ask].concat(), &dir);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(
        first["paused"]["pending"],
        json!([{"callId": "1", "tool": "echo", "arguments": {"n": 1}, "approval": true}])
    );
    let run_id = first["paused"]["runId"].as_str().unwrap().to_owned();

    // An approval is a decision, not a result.
    let (code, _, stderr) = cli(&["resume", &run_id, "--reply", "1=\"sure\""], &dir);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("waits for an approval"), "{stderr}");

    // Approved: the call is made for real, through the pipeline, in the resuming process.
    let (code, second, stderr) = cli(
        &[&["resume", &run_id, "--reply", "1=true"][..], &ask].concat(),
        &dir,
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(
        second["calls"],
        json!([{"subCallId": "run:code:1", "tool": "echo", "outcome": "resolved"}])
    );
    assert_eq!(second["paused"]["pending"][0]["callId"], json!("2"));
    let again = second["paused"]["runId"].as_str().unwrap().to_owned();

    // Denied: the program gets a ToolCallError and the call is never made.
    let (code, done, stderr) = cli(&["resume", &again, "--reply", "2=false", "--json"], &dir);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(done["calls"], json!([]));
    assert_eq!(
        done["result"],
        json!({"a": {"n": 1}, "b": "ToolCallError: tool \"echo\" was not approved"})
    );

    let (code, _, stderr) = cli(&["run", program, "--pause-on-ask"], &dir);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--ask NAME"), "{stderr}");
}

#[tokio::test]
async fn resumed_runs_share_no_randomness() {
    // Pre-initialisation draws no randomness a run keeps: two runs paused from the same image
    // and resumed draw different numbers, whether they drew before the pause or not.
    let (_temp, dir) = state_dir("random");
    let rt = runtime(&dir, Budgets::default());
    let program = "const before = DRAW; await tools.approve({}); return [before, Math.random(), Math.random()];";
    for draw_before in ["Math.random()", "0"] {
        let program = program.replace("DRAW", draw_before);
        let mut values = Vec::new();
        for _ in 0..2 {
            let first = start(&rt, &program).await;
            let pause = paused(&first);
            let id = pause.pending[0].call_id.clone();
            let done = resume(&rt, &pause.run_id, vec![(&id, Ok(json!(true)))])
                .await
                .expect("resumes");
            values.push(done.value.expect("a value"));
        }
        assert_ne!(values[0][1], values[1][1], "{values:?}");
        assert_ne!(values[0][2], values[1][2], "{values:?}");
        if draw_before != "0" {
            assert_ne!(values[0][0], values[1][0], "{values:?}");
        }
    }
}

#[test]
fn a_run_too_large_for_this_processs_memory_cap_is_refused_and_stays_resumable() {
    let (_temp, dir) = state_dir("capped");
    let run_id = pause_one(&dir);
    let (code, _, stderr) = cli(
        &[
            "resume",
            &run_id,
            "--reply",
            "1=1",
            "--memory-mb",
            "256",
            "--max-memory-mb",
            "256",
        ],
        &dir,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("where the cap is larger"), "{stderr}");
    let (code, done, stderr) = cli(&["resume", &run_id, "--reply", "1=1", "--json"], &dir);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(done["result"], json!(1));
}

/// Pauses `tools.echo({})` in the state directory `dir`; returns the run id.
fn pause_one(dir: &Path) -> String {
    let program = program_in(dir, "const v = await tools.echo({}); return v;");
    let (code, paused, stderr) = cli(
        &["run", program.as_str(), "--pause-on", "echo", "--json"],
        dir,
    );
    assert_eq!(code, Some(3), "{stderr}");
    paused["paused"]["runId"].as_str().unwrap().to_owned()
}

#[test]
fn a_pause_past_the_state_quota_is_not_written_and_the_program_goes_on() {
    let (_temp, dir) = state_dir("quota");
    // About 2 MiB of random doubles: a record that cannot fit a quota of 1 MiB.
    let program = program_in(
        &dir,
        r#"
const noise = Array.from({ length: 300000 }, () => Math.random());
let refused = "";
try { await tools.echo({ n: noise.length }); } catch (e) { refused = `${e.name}: ${e.message}`; }
return refused;
"#,
    );
    let quota = ["--pause-on", "echo", "--state-quota-mb", "1", "--json"];
    let (code, done, stderr) = cli(&[&["run", program.as_str()], &quota[..]].concat(), &dir);
    assert_eq!(code, Some(0), "{stderr}");
    let said = done["result"].as_str().unwrap_or_default();
    assert!(
        said.starts_with(
            "ToolCallError: the run could not pause: the state store's paused runs take"
        ),
        "{done}"
    );
    assert!(
        said.contains("past the store's quota of 1.0 MiB (--state-quota-mb)"),
        "{said}"
    );
    let kept = std::fs::read_dir(dir.join("runs"))
        .map(|entries| entries.count())
        .unwrap_or(0);
    assert_eq!(kept, 0, "nothing was written");
    // A small run still pauses under the same quota.
    let small = program_in(&dir, "return await tools.echo({});");
    let (code, paused, stderr) = cli(&[&["run", small.as_str()], &quota[..]].concat(), &dir);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(paused["paused"]["runId"].is_string(), "{paused}");
}

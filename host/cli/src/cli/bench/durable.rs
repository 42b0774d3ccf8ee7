//! What pausing and resuming cost: the record's size, the time to write it and the time to
//! read, check and restore it, for a small run and for runs holding 10 MB of live data.

use codemode_host::WasmCodeRuntime;
use codemode_runtime::code::BindingFn;
use serde_json::{json, Value};

use super::{median, ms, request, tools_namespace};

/// A program that pauses at once, and one that holds 10 MB of live strings when it pauses.
const PAUSE_SMALL: &str = "const v = await tools.approve({}); return v;";
const PAUSE_10MB: &str = "const rows = Array.from({ length: 100000 }, (_, i) => String(i).padStart(100, 'x')); const v = await tools.approve({}); return [v, rows.length, rows[99999].length];";
/// The same amount of live data, random (what compresses worst).
const PAUSE_10MB_RANDOM: &str = "const rows = Array.from({ length: 100000 }, () => Array.from({ length: 5 }, () => Math.random().toString(36).slice(2, 22)).join('')); const v = await tools.approve({}); return [v, rows.length];";

/// Record size, pause time (writing the record) and resume time (reading, checking and
/// restoring it) for each program, medians of three runs, on a private state directory.
pub(super) async fn study() -> Result<Value, String> {
    use codemode_runtime::code::{BindingRef, Resume};
    let dir = std::env::temp_dir().join(format!("codemode-bench-state-{}", std::process::id()));
    let durability = codemode_host::Durability::local(&dir).map_err(|e| e.to_string())?;
    let rt = WasmCodeRuntime::new(codemode_host::Budgets::default())
        .map_err(|e| e.to_string())?
        .with_durability(durability);
    let approve: BindingFn = codemode_runtime::code::binding(|args, _| async move { Ok(args) });
    let namespace = || tools_namespace([("approve".to_owned(), approve.clone())].into());
    let mut out = serde_json::Map::new();
    let programs = [
        ("small", PAUSE_SMALL),
        ("live_10mb", PAUSE_10MB),
        ("live_10mb_random", PAUSE_10MB_RANDOM),
    ];
    for (label, program) in programs {
        let (mut pauses, mut resumes, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..3 {
            let mut paused_request = request(program, vec![namespace()]);
            paused_request.pause_on = [BindingRef::new("tools", "approve")].into();
            let (first, metrics) = rt
                .run_measured(paused_request)
                .await
                .map_err(|e| e.to_string())?;
            let paused = first.paused.ok_or("the benchmark program did not pause")?;
            pauses.push(metrics.pause);
            sizes.push(metrics.record_bytes);
            let mut resumed_request = request("", vec![namespace()]);
            resumed_request.resume = Some(Resume {
                run_id: paused.run_id,
                replies: vec![(paused.pending[0].call_id.clone(), Ok(json!(true)))],
            });
            let (done, metrics) = rt
                .run_measured(resumed_request)
                .await
                .map_err(|e| e.to_string())?;
            if let Some(error) = done.error {
                return Err(format!(
                    "the resumed benchmark program failed: {}",
                    error.message
                ));
            }
            resumes.push(metrics.restore);
        }
        out.insert(
            label.to_owned(),
            json!({
                "record_bytes": median(sizes),
                "pause_ms": ms(median(pauses)),
                "resume_ms": ms(median(resumes)),
            }),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Value::Object(out))
}

//! 1,000 calls through the pipeline from many tasks, with cancellations at random points:
//! every call ends with exactly one result, observed exactly once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_runtime::signal::AbortController;
use codemode_runtime::tools::plugins::timeout;
use codemode_runtime::tools::*;
use serde_json::{json, Value};

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn sleepy(name: &str, budget: Option<Duration>) -> ToolDefinition {
    let builder = ToolDefinition::builder(name)
        .output(ToolOutput::new(
            Schema::raw(json!({"type": "integer"})).unwrap(),
            |_, v| Ok(vec![ContentBlock::text(v.to_string())]),
        ))
        .execute(|args, run_ctx| async move {
            let micros = args.get("micros").and_then(Value::as_u64).unwrap_or(0);
            if args
                .get("cooperative")
                .and_then(Value::as_bool)
                .unwrap_or(false)
            {
                tokio::select! {
                    _ = run_ctx.signal().aborted() => return Err(ToolError::new("stopped")),
                    _ = tokio::time::sleep(Duration::from_micros(micros)) => {}
                }
            } else {
                tokio::time::sleep(Duration::from_micros(micros)).await;
            }
            if args.get("fail").and_then(Value::as_bool).unwrap_or(false) {
                return Err(ToolError::new("failed"));
            }
            Ok(json!(micros))
        });
    match budget {
        Some(budget) => builder.timeout(budget).build(),
        None => builder.build(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_calls_with_random_cancellation_each_end_with_exactly_one_result() {
    let registry = Registry::new();
    registry
        .register(sleepy("sleep", None), None)
        .unwrap()
        .keep();
    registry
        .register(sleepy("bounded", Some(Duration::from_micros(300))), None)
        .unwrap()
        .keep();
    timeout::install(&registry).keep();
    registry
        .on_pre_execute(|call, next| async move {
            if call
                .arguments()
                .get("deny")
                .and_then(Value::as_bool)
                .unwrap_or(false)
            {
                return Ok(PreDecision::Deny {
                    reason: "denied".into(),
                });
            }
            tokio::task::yield_now().await;
            next.run().await
        })
        .keep();
    registry
        .on_post_execute(|_, _, next| async move {
            tokio::task::yield_now().await;
            next.run().await
        })
        .keep();
    let observed: Arc<Mutex<HashMap<String, Vec<Arc<ToolExecutionResult>>>>> = Arc::default();
    let o = observed.clone();
    registry
        .on_result(move |call, result| {
            o.lock()
                .unwrap()
                .entry(call.call_id().to_owned())
                .or_default()
                .push(result.clone());
            Ok(())
        })
        .keep();

    let mut tasks = Vec::new();
    for task in 0..50u64 {
        let registry = registry.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (task + 1));
            let mut results = Vec::new();
            let mut pending = Vec::new();
            for index in 0..20u64 {
                let id = format!("call-{task}-{index}");
                let name = if rng.below(3) == 0 {
                    "bounded"
                } else if rng.below(20) == 0 {
                    "ghost"
                } else {
                    "sleep"
                };
                let args = json!({
                    "micros": rng.below(800),
                    "cooperative": rng.below(2) == 0,
                    "fail": rng.below(10) == 0,
                    "deny": rng.below(10) == 0,
                });
                let controller = AbortController::new();
                let signal = controller.signal();
                let cancel_after = match rng.below(4) {
                    0 => None,
                    1 => Some(0),
                    _ => Some(rng.below(600)),
                };
                let registry = registry.clone();
                let id_for_call = id.clone();
                let call = tokio::spawn(async move {
                    registry
                        .execute(ToolExecutionInput::new(id_for_call, name, args, signal))
                        .await
                });
                if let Some(micros) = cancel_after {
                    pending.push(tokio::spawn(async move {
                        if micros > 0 {
                            tokio::time::sleep(Duration::from_micros(micros)).await;
                        }
                        controller.abort("random-cancel");
                    }));
                }
                results.push((id, call));
            }
            let mut finished = Vec::new();
            for (id, call) in results {
                finished.push((id, call.await.expect("the call task never panics")));
            }
            for canceller in pending {
                canceller.await.expect("canceller");
            }
            finished
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("task"));
    }
    assert_eq!(all.len(), 1_000);
    let observed = observed.lock().unwrap();
    assert_eq!(observed.len(), 1_000);
    let mut codes: HashMap<String, usize> = HashMap::new();
    for (id, result) in &all {
        let seen = &observed[id];
        assert_eq!(seen.len(), 1, "{id} observed once");
        assert!(
            Arc::ptr_eq(&seen[0], result),
            "{id}: the observed result is the returned one"
        );
        let code = match result.error() {
            None => "ok".to_owned(),
            Some(failure) => failure
                .info
                .as_ref()
                .map_or_else(|| failure.message.clone(), |i| i.code.clone()),
        };
        *codes.entry(code).or_default() += 1;
    }
    // Every outcome class shows up in a run of this size.
    for expected in ["ok", "ABORTED_BEFORE_DISPATCH", "UNKNOWN_TOOL", "denied"] {
        assert!(
            codes.contains_key(expected),
            "missing {expected}: {codes:?}"
        );
    }
}

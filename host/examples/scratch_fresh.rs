use codemode_host::{Budgets, WasmCodeRuntime};
use codemode_runtime::code::{CodeRuntime, RunRequest};
use std::time::{Duration, Instant};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let prog = std::env::args().nth(2).unwrap_or("return 1".into());
    let rt = WasmCodeRuntime::new(Budgets::default()).unwrap();
    rt.run(RunRequest {
        program: prog.clone(),
        bindings: vec![],
        signal: None,
    })
    .await
    .unwrap();
    let mut inst = Duration::ZERO;
    let mut tot = Vec::new();
    let t = Instant::now();
    for _ in 0..n {
        let (_r, m) = rt
            .run_measured(RunRequest {
                program: prog.clone(),
                bindings: if std::env::var_os("TOOLS").is_some() {
                    vec![codemode_host::builtins::namespace(".")]
                } else {
                    vec![]
                },
                signal: None,
            })
            .await
            .unwrap();
        inst += m.instantiate;
        tot.push(m.total);
    }
    tot.sort();
    eprintln!(
        "n={n} wall/run={:?} p50={:?} inst={:?}",
        t.elapsed() / n as u32,
        tot[n / 2],
        inst / n as u32
    );
}

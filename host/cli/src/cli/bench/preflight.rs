//! What preflight costs: the 200-line program in `fixtures/workloads/preflight.ts` checked
//! against the built-in tools' schemas. The checks walk the tree the stripper parsed, so
//! stripping (that parse and the erasure) is measured beside them, apart.

use std::time::{Duration, Instant};

use codemode_host::preflight::{self, Namespace};
use serde_json::{json, Value};

const PROGRAM: &str = include_str!("../../../../../fixtures/workloads/preflight.ts");

/// The design's budget for the checks of a 200-line program.
pub(super) const BUDGET_US: f64 = 50.0;

/// Checks per timed round; the median round is reported.
const CHECKS: u32 = 200;
const ROUNDS: usize = 7;

pub(super) fn measure() -> Result<Value, String> {
    let definitions = codemode_host::builtins::definitions(".");
    let mut members: Vec<String> = definitions.iter().map(|d| d.name().to_owned()).collect();
    members.sort();
    let namespaces = vec![Namespace {
        global: "tools".into(),
        members,
        schemas: definitions
            .iter()
            .map(|d| (d.name().to_owned(), d.parameters().clone()))
            .collect(),
        ..Namespace::default()
    }];
    let parsed = preflight::parse(PROGRAM).ok_or("the preflight workload does not parse")?;
    let problems = preflight::check_parsed(&parsed, &namespaces);
    if !problems.is_empty() {
        return Err(format!("the preflight workload has problems: {problems:?}"));
    }
    let strip = median_per_call(|| {
        let _ = std::hint::black_box(codemode_host::strip::strip_types(std::hint::black_box(
            PROGRAM,
        )));
    });
    let check = median_per_call(|| {
        std::hint::black_box(preflight::check_parsed(
            std::hint::black_box(&parsed),
            &namespaces,
        ));
    });
    Ok(json!({
        "lines": PROGRAM.lines().count(),
        "strip_us": strip.as_secs_f64() * 1e6,
        "check_us": check.as_secs_f64() * 1e6,
        "budget_us": BUDGET_US,
    }))
}

/// The median over [`ROUNDS`] rounds of the time one `work` takes.
fn median_per_call(mut work: impl FnMut()) -> Duration {
    let rounds: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..CHECKS {
                work();
            }
            started.elapsed() / CHECKS
        })
        .collect();
    super::median(rounds)
}

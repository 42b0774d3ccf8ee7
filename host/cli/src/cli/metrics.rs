//! The Prometheus metrics `codemode mcp --http` serves at `/metrics`, as OpenMetrics text.
//!
//! Counters and histograms come from the spans every run already opens
//! ([`codemode_runtime::telemetry`]): a layer reads a run's or sub-call's fields when its span
//! closes, so a metric and a trace can never disagree about what happened. Gauges (slots,
//! waiting runs, sessions, upstream servers) are read when a scrape asks for them.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use codemode_runtime::telemetry::{CAUSE, FUEL, OUTCOME, RUN_SPAN, SUB_CALL_SPAN, TOOL};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

type Labels = Vec<(&'static str, String)>;

/// What a scrape reads of the server's state at that moment.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// The sandbox's load, once it is prepared.
    pub occupancy: Option<codemode_host::Occupancy>,
    /// Whether runs can start without waiting for the sandbox's preparation.
    pub ready: bool,
    /// Open MCP sessions.
    pub sessions: usize,
    /// Each upstream MCP server, and whether it is up.
    pub upstreams: Vec<(String, bool)>,
}

type Probe = Box<dyn Fn() -> Snapshot + Send + Sync>;

/// The server's metrics; clones share them.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    runs: Family<Labels, Counter>,
    run_seconds: Histogram,
    sub_calls: Family<Labels, Counter>,
    sub_call_seconds: Family<Labels, Histogram>,
    fuel: Counter,
    slots: Gauge,
    slots_in_use: Gauge,
    runs_waiting: Gauge,
    ready: Gauge,
    sessions: Gauge,
    upstream_up: Family<Labels, Gauge>,
    probe: Mutex<Option<Probe>>,
}

/// Buckets from 1 ms to about 33 s, doubling.
fn duration_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.001, 2.0, 16)
}

impl Metrics {
    /// Empty metrics, every family registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("codemode");
        let runs = Family::<Labels, Counter>::default();
        registry.register(
            "runs",
            "Runs by outcome (value, paused, or the failure kind) and, for a failure that has one, cause",
            runs.clone(),
        );
        let run_seconds = Histogram::new(duration_buckets());
        registry.register(
            "run_duration_seconds",
            "Time from a run's start to its last sub-call's commit",
            run_seconds.clone(),
        );
        let sub_calls = Family::<Labels, Counter>::default();
        registry.register(
            "sub_calls",
            "Tool calls programs made, by tool and outcome (resolved, rejected, abandoned)",
            sub_calls.clone(),
        );
        let sub_call_seconds =
            Family::<Labels, Histogram>::new_with_constructor(
                || Histogram::new(duration_buckets()),
            );
        registry.register(
            "sub_call_duration_seconds",
            "Time from a tool call's start to its commit, by tool",
            sub_call_seconds.clone(),
        );
        let fuel = Counter::default();
        registry.register("fuel_spent", "Fuel programs burned", fuel.clone());
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let gauge = Gauge::default();
            registry.register(name, help, gauge.clone());
            gauge
        };
        let slots = gauge(
            &mut registry,
            "pool_slots",
            "Instance slots the sandbox has",
        );
        let slots_in_use = gauge(
            &mut registry,
            "pool_slots_in_use",
            "Instance slots a run holds",
        );
        let runs_waiting = gauge(
            &mut registry,
            "runs_waiting",
            "Runs waiting for an instance slot or their share of the memory cap",
        );
        let ready = gauge(
            &mut registry,
            "ready",
            "1 once the sandbox is prepared and runs start without waiting",
        );
        let sessions = gauge(&mut registry, "sessions", "Open MCP sessions");
        let upstream_up = Family::<Labels, Gauge>::default();
        registry.register(
            "upstream_up",
            "1 while an upstream MCP server answers, 0 once it is down",
            upstream_up.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                registry,
                runs,
                run_seconds,
                sub_calls,
                sub_call_seconds,
                fuel,
                slots,
                slots_in_use,
                runs_waiting,
                ready,
                sessions,
                upstream_up,
                probe: Mutex::new(None),
            }),
        }
    }

    /// Sets what a scrape reads the gauges from.
    pub fn probe(&self, probe: impl Fn() -> Snapshot + Send + Sync + 'static) {
        *self.inner.probe.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(probe));
    }

    /// Every metric as OpenMetrics text, the gauges read now.
    pub fn render(&self) -> String {
        let inner = &self.inner;
        let snapshot = inner
            .probe
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|probe| probe())
            .unwrap_or_default();
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        if let Some(occupancy) = snapshot.occupancy {
            inner.slots.set(count(occupancy.slots));
            inner.slots_in_use.set(count(occupancy.slots_in_use));
            inner.runs_waiting.set(count(occupancy.runs_waiting));
        }
        inner.ready.set(i64::from(snapshot.ready));
        inner.sessions.set(count(snapshot.sessions));
        for (server, up) in snapshot.upstreams {
            inner
                .upstream_up
                .get_or_create(&vec![("server", server)])
                .set(i64::from(up));
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &inner.registry);
        text
    }

    /// The layer that counts runs and sub-calls as their spans close.
    pub fn layer(&self) -> SpanMetrics {
        SpanMetrics {
            metrics: self.inner.clone(),
        }
    }
}

/// Counts closed run and sub-call spans into [`Metrics`].
pub struct SpanMetrics {
    metrics: Arc<Inner>,
}

/// What a measured span recorded, kept in its extensions until it closes.
struct Seen {
    run: bool,
    opened: Instant,
    tool: Option<String>,
    outcome: Option<String>,
    cause: Option<String>,
    fuel: u64,
}

impl Visit for Seen {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            OUTCOME => self.outcome = Some(value.to_owned()),
            TOOL => self.tool = Some(value.to_owned()),
            CAUSE => self.cause = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == FUEL {
            self.fuel = u64::try_from(value).unwrap_or(0);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields arrive here.
        if matches!(field.name(), OUTCOME | TOOL | CAUSE) {
            self.record_str(field, &format!("{value:?}"));
        }
    }
}

impl<S> Layer<S> for SpanMetrics
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let name = attrs.metadata().name();
        let run = name == RUN_SPAN;
        if !run && name != SUB_CALL_SPAN {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut seen = Seen {
            run,
            opened: Instant::now(),
            tool: None,
            outcome: None,
            cause: None,
            fuel: 0,
        };
        attrs.record(&mut seen);
        span.extensions_mut().insert(seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(seen) = span.extensions_mut().get_mut::<Seen>() {
                values.record(seen);
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(seen) = span.extensions_mut().remove::<Seen>() else {
            return;
        };
        let metrics = &self.metrics;
        let seconds = seen.opened.elapsed().as_secs_f64();
        if seen.run {
            // A call refused before its program ran records no outcome.
            let outcome = seen.outcome.unwrap_or_else(|| "refused".to_owned());
            // A failure with a cause (compute, calls, preflight, …) is counted by it too.
            let mut labels = vec![("outcome", outcome)];
            if let Some(cause) = seen.cause {
                labels.push(("cause", cause));
            }
            metrics.runs.get_or_create(&labels).inc();
            metrics.run_seconds.observe(seconds);
            metrics.fuel.inc_by(seen.fuel);
        } else {
            let tool = seen.tool.unwrap_or_default();
            // A call whose commit never came (its run ended first) was abandoned.
            let outcome = seen.outcome.unwrap_or_else(|| "abandoned".to_owned());
            metrics
                .sub_calls
                .get_or_create(&vec![("tool", tool.clone()), ("outcome", outcome)])
                .inc();
            metrics
                .sub_call_seconds
                .get_or_create(&vec![("tool", tool)])
                .observe(seconds);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codemode_runtime::code::{FailureCause, FailureKind, RunFailure, RunResult};
    use tracing_subscriber::layer::SubscriberExt;

    /// A failed run is counted by its kind and, where it has one, its cause.
    #[test]
    fn runs_are_counted_by_outcome_and_cause() {
        let metrics = Metrics::new();
        let subscriber = tracing_subscriber::registry().with(metrics.layer());
        tracing::subscriber::with_default(subscriber, || {
            let result = |error| RunResult {
                value: None,
                logs: Vec::new(),
                error,
                calls: Vec::new(),
                hint: None,
                paused: None,
                compute_fuel: None,
            };
            let capped = result(Some(
                RunFailure::new(FailureKind::Exception, "the program reached its cap")
                    .with_cause(FailureCause::Calls),
            ));
            let span = codemode_runtime::telemetry::run_span("call-1");
            codemode_runtime::telemetry::record_run(&span, &capped, 3);
            drop(span);
            let span = codemode_runtime::telemetry::run_span("call-2");
            codemode_runtime::telemetry::record_run(&span, &result(None), 0);
            drop(span);
        });
        let text = metrics.render();
        assert!(
            text.contains(r#"codemode_runs_total{outcome="exception",cause="calls"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"codemode_runs_total{outcome="value"} 1"#),
            "{text}"
        );
    }
}

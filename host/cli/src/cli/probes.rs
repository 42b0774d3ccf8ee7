//! What an operator's probes read from `codemode mcp --http`: `/healthz` (the process answers),
//! `/readyz` (the sandbox is prepared and the upstream servers have started, so a run starts
//! without waiting) and `/metrics` (OpenMetrics text, the standardised Prometheus exposition
//! format that Prometheus scrapes; [`super::metrics`]).
//!
//! They sit behind the same gate as `/mcp` (Origin, then the bearer token); with
//! `--probes-without-token` the token is not asked of them.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use codemode_host::Readiness;
use codemode_mcp::sessions::BoundedSessions;

use super::metrics::{Metrics, Snapshot};

/// The probes' paths.
pub const PATHS: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// What the probes read.
pub struct Observed {
    /// Served at `/metrics` (a 404 without them).
    pub metrics: Option<Metrics>,
    /// The sandbox's preparation.
    pub readiness: Readiness,
    /// Each upstream server's name and whether it is up, read at each scrape.
    pub upstreams: Box<dyn Fn() -> Vec<(String, bool)> + Send + Sync>,
}

struct Probed {
    observed: Observed,
    sessions: Arc<BoundedSessions>,
}

/// The probes' routes, reading `observed` and the server's `sessions`.
pub fn routes(observed: Observed, sessions: Arc<BoundedSessions>) -> axum::Router {
    let probed = Arc::new(Probed { observed, sessions });
    if let Some(metrics) = &probed.observed.metrics {
        let weak = Arc::downgrade(&probed);
        metrics.probe(move || {
            weak.upgrade()
                .map(|probed| probed.snapshot())
                .unwrap_or_default()
        });
    }
    axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(probed)
}

impl Probed {
    fn snapshot(&self) -> Snapshot {
        let readiness = &self.observed.readiness;
        Snapshot {
            occupancy: readiness.runtime().map(|runtime| runtime.occupancy()),
            ready: readiness.is_ready(),
            sessions: self.sessions.live(),
            upstreams: (self.observed.upstreams)(),
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(probed): State<Arc<Probed>>) -> Response {
    let readiness = &probed.observed.readiness;
    if readiness.is_ready() {
        return "ready\n".into_response();
    }
    let why = match readiness.failure() {
        Some(failure) => format!("not ready: the sandbox could not be prepared: {failure}\n"),
        None => "not ready: the sandbox is being prepared for first use\n".to_owned(),
    };
    (StatusCode::SERVICE_UNAVAILABLE, why).into_response()
}

async fn metrics(State(probed): State<Arc<Probed>>) -> Response {
    match &probed.observed.metrics {
        Some(metrics) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            metrics.render(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no metrics are kept\n").into_response(),
    }
}

//! What the CLI reports about itself: log records on stderr (`RUST_LOG`, `--log-format`), spans
//! exported over OTLP/HTTP when the standard `OTEL_*` variables ask for it, and the Prometheus
//! metrics `codemode mcp --http` serves (a layer over the same spans, [`super::metrics`]).
//!
//! Everything the process observes goes through `tracing`: the library crates only open spans
//! and emit events, and this module decides where they go. With no exporter configured, spans
//! at `info` are disabled by the filters, so a run pays one cached callsite check per span.

use std::future::Future;
use std::io::IsTerminal;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::WithHttpConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use super::metrics::Metrics;

/// How log records are written on stderr: `text`, a line per record (time, level, where,
/// message, fields), or `json`, an object per line (`timestamp`, `level`, `target`,
/// `message`, the record's fields, and `spans`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The level logged when `RUST_LOG` is not set. rmcp's transport worker logs an upstream's
/// refusal (an authorization it asks for) as an error of its own; codemode reports what failed
/// and what to do, once.
const DEFAULT_DIRECTIVES: &str = "warn,rmcp::transport::worker=off";
/// The crates whose spans and events are traced and measured (their targets' first segment).
const OWN_CRATES: [&str; 4] = [
    "codemode_host",
    "codemode_runtime",
    "codemode_exec",
    "codemode",
];
/// The longest one export may take; a collector that does not answer loses that batch only.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest the process waits at exit for its last spans to leave.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether this process exports its spans (the exporter was built).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether spans are being exported, for a report that must say under what it was measured.
#[cfg(feature = "bench")]
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// What must outlive the command: the span exporter, flushed and shut down on drop.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(error) = provider.shutdown_with_timeout(FLUSH_TIMEOUT) {
                // The subscriber may already be gone: say it on stderr directly.
                eprintln!("codemode: the last spans could not be exported: {error}");
            }
        }
    }
}

/// Installs the process's subscriber: the log layer, the OTLP layer when the environment asks
/// for export, and `metrics` when a server serves them.
pub fn install(format: LogFormat, metrics: Option<&Metrics>) -> Telemetry {
    let (filter, bad_filter) = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => match EnvFilter::try_new(&directives) {
            Ok(filter) => (filter, None),
            Err(error) => (EnvFilter::new(DEFAULT_DIRECTIVES), Some(error)),
        },
        _ => (EnvFilter::new(DEFAULT_DIRECTIVES), None),
    };
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
    };
    let (provider, export_error) = match exporter_wanted() {
        false => (None, None),
        true => match tracer_provider() {
            Ok(provider) => (Some(provider), None),
            Err(error) => (None, Some(error)),
        },
    };
    // Only the layers in use: an absent layer (`None`) would declare every callsite
    // interesting, and spans nobody records would be built for every run.
    let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = vec![logs];
    if let Some(provider) = &provider {
        EXPORTING.store(true, Ordering::Relaxed);
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        layers.push(
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("codemode"))
                .with_filter(own_crates(LevelFilter::DEBUG))
                .boxed(),
        );
    }
    if let Some(metrics) = metrics {
        layers.push(
            metrics
                .layer()
                // The metrics are read from these two spans only: nothing else is built for it.
                .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                    meta.is_span()
                        && (meta.name() == codemode_runtime::telemetry::RUN_SPAN
                            || meta.name() == codemode_runtime::telemetry::SUB_CALL_SPAN)
                }))
                .boxed(),
        );
    }
    let installed = tracing_subscriber::registry().with(layers).try_init();
    if installed.is_err() {
        eprintln!("codemode: a log subscriber was already installed; keeping it");
    }
    if let Some(error) = bad_filter {
        tracing::warn!("RUST_LOG is not a filter ({error}); logging at {DEFAULT_DIRECTIVES}");
    }
    if let Some(error) = export_error {
        tracing::warn!("traces are not exported: {error}");
    }
    Telemetry { provider }
}

fn own_crates(level: LevelFilter) -> Targets {
    OWN_CRATES.iter().fold(Targets::new(), |targets, name| {
        targets.with_target(*name, level)
    })
}

/// Whether the standard variables ask for trace export: an endpoint is named, and neither the
/// SDK nor the traces exporter is switched off.
fn exporter_wanted() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim() == "true")
        || std::env::var("OTEL_TRACES_EXPORTER").is_ok_and(|v| v.trim() == "none");
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// Spans batched and exported over OTLP/HTTP (protobuf) to the endpoint, with the headers and
/// resource the `OTEL_*` variables name; the service is `codemode` unless `OTEL_SERVICE_NAME`
/// says otherwise.
fn tracer_provider() -> Result<SdkTracerProvider, String> {
    for name in [
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    ] {
        if let Ok(protocol) = std::env::var(name) {
            if protocol.trim() != "http/protobuf" {
                return Err(format!(
                    "{name}={protocol}: codemode exports over http/protobuf only; unset it or set it to http/protobuf"
                ));
            }
        }
    }
    let client = ExportClient::new().map_err(|e| format!("cannot start the exporter: {e}"))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .build()
        .map_err(|e| e.to_string())?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("codemode");
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// The exporter's HTTP client: hyper's, driven by a runtime of its own, because the batch
/// processor exports from its own thread, outside the runtime that runs programs (and export
/// must not wait behind busy run workers either).
#[derive(Debug, Clone)]
struct ExportClient {
    runtime: Arc<tokio::runtime::Runtime>,
    inner: opentelemetry_http::hyper::HyperClient,
}

impl ExportClient {
    fn new() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("codemode-otlp")
            .enable_all()
            .build()?;
        // Built inside the runtime: hyper's connection pool needs its timer.
        let inner = {
            let _entered = runtime.enter();
            opentelemetry_http::hyper::HyperClient::with_default_connector(EXPORT_TIMEOUT, None)
        };
        Ok(Self {
            runtime: Arc::new(runtime),
            inner,
        })
    }
}

type Sent<'a> = Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'a>>;

impl HttpClient for ExportClient {
    fn send_bytes<'life0, 'async_trait>(&'life0 self, request: Request<Bytes>) -> Sent<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let inner = self.inner.clone();
        let sending = self
            .runtime
            .spawn(async move { inner.send_bytes(request).await });
        Box::pin(async move {
            sending
                .await
                .map_err(|e| -> HttpError { format!("the export task failed: {e}").into() })?
        })
    }
}

//! W3C trace context across MCP (SEP-414): a request's `_meta.traceparent` (or, over HTTP, its
//! `traceparent` header) becomes the parent of the spans it causes, and a call to an upstream
//! server carries its own span's context in `_meta`, so one trace follows a run through every
//! server that reads it.
//!
//! Extraction and injection go through the process's global propagator: the `codemode`
//! binary installs the W3C one when it exports traces; an embedder installs its own. With none
//! installed (or no OpenTelemetry layer under the spans) both are no-ops.

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use rmcp::model::RequestParamsMeta;
use serde_json::{Map, Value};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// A request's trace fields: `_meta` first, then the HTTP headers it came with.
struct Incoming<'a> {
    meta: &'a Map<String, Value>,
    headers: Option<&'a http::HeaderMap>,
}

impl Extractor for Incoming<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.meta.get(key).and_then(Value::as_str).or_else(|| {
            self.headers
                .and_then(|headers| headers.get(key))
                .and_then(|value| value.to_str().ok())
        })
    }

    fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.meta.keys().map(String::as_str).collect();
        if let Some(headers) = self.headers {
            keys.extend(headers.keys().map(http::HeaderName::as_str));
        }
        keys
    }
}

/// Makes the trace a request names (if it names a valid one) the parent of `span`.
pub(crate) fn adopt_parent(
    span: &Span,
    meta: &Map<String, Value>,
    headers: Option<&http::HeaderMap>,
) {
    let incoming = Incoming { meta, headers };
    let context =
        opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&incoming));
    if context.span().span_context().is_valid() {
        // Refused only when no OpenTelemetry layer records `span`: then there is no trace.
        let _ = span.set_parent(context);
    }
}

/// The upstream request's `_meta` fields that carry a span's context.
struct Outgoing<'a, P: RequestParamsMeta>(&'a mut P);

impl<P: RequestParamsMeta> Injector for Outgoing<'_, P> {
    fn set(&mut self, key: &str, value: String) {
        match key {
            "traceparent" => self.0.set_traceparent(&value),
            "tracestate" => self.0.set_tracestate(&value),
            "baggage" => self.0.set_baggage(&value),
            // A propagator's other fields have no reserved `_meta` key.
            _ => {}
        }
    }
}

/// Writes `span`'s context into an outgoing request's `_meta` (nothing when it is not traced).
pub(crate) fn inject<P: RequestParamsMeta>(span: &Span, params: &mut P) {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return;
    }
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut Outgoing(params));
    });
}

//! An upstream server at a URL, over streamable HTTP: rmcp's client on reqwest, with TLS by
//! rustls (the ring provider, the platform's trusted roots).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use rmcp::model::Tool;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;

use super::connection::{Client, Connection};
use super::spec::UpstreamError;

/// Headers the transport sets itself: a configuration may not.
const RESERVED: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// Connects to `url` with `headers` on every request and lists the server's tools.
pub(super) async fn connect(
    name: &str,
    url: &str,
    headers: &BTreeMap<String, String>,
    client: Client,
    timeout: Duration,
) -> Result<(Connection, Vec<Tool>), UpstreamError> {
    // Installed once per process; a provider installed before (by anyone) is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let refused = |header: &str, problem: String| UpstreamError::Config {
        at: format!("mcpServers.{name}.headers.{header}: "),
        problem,
    };
    let mut custom = HashMap::new();
    for (header, value) in headers {
        if RESERVED.iter().any(|r| header.eq_ignore_ascii_case(r)) {
            return Err(refused(
                header,
                "codemode's MCP client sets this header itself".into(),
            ));
        }
        let header_name = http::HeaderName::from_bytes(header.as_bytes())
            .map_err(|e| refused(header, format!("not a header name ({e})")))?;
        let mut header_value = http::HeaderValue::from_str(value)
            .map_err(|e| refused(header, format!("not a header value ({e})")))?;
        header_value.set_sensitive(true);
        custom.insert(header_name, header_value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    let transport = StreamableHttpClientTransport::from_config(config);
    Connection::over(name, transport, client, timeout).await
}

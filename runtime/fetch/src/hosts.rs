//! `--allow-host` entries: `api.example.com`, `*.example.com` (any subdomain, not the name
//! itself), an address, each with an optional `:port` (without one, any port). Names are
//! compared as the URL parser spells them (lower case, IDNA, an IPv4 address in its dotted
//! form), so `HTTP://API.Example.COM` and `http://0x7f.1` meet the entries they mean.

use std::fmt;

use url::{Host, Url};

/// One allowed host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: Host<String>,
    /// `*.name`: subdomains of `host`.
    subdomains: bool,
    port: Option<u16>,
}

impl HostPattern {
    /// Parses an entry; `Err` says what is wrong with it.
    pub fn parse(entry: &str) -> Result<Self, String> {
        let trimmed = entry.trim();
        if trimmed.is_empty() {
            return Err("an allowed host cannot be empty".to_owned());
        }
        if trimmed.contains("://") || trimmed.contains('/') {
            return Err(format!(
                "{entry:?}: name a host (api.example.com, *.example.com, host:port), not a URL"
            ));
        }
        let (host, port) = split_port(trimmed)
            .ok_or_else(|| format!("{entry:?}: the port must be a number from 1 to 65535"))?;
        let (subdomains, host) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if host.contains('*') {
            return Err(format!(
                "{entry:?}: a wildcard is only allowed as the first label (*.example.com)"
            ));
        }
        let parsed = Host::parse(host).map_err(|e| format!("{entry:?}: not a host name: {e}"))?;
        if subdomains && !matches!(parsed, Host::Domain(_)) {
            return Err(format!(
                "{entry:?}: a wildcard needs a domain name after it, not an address"
            ));
        }
        Ok(Self {
            host: parsed,
            subdomains,
            port,
        })
    }

    /// Whether some URL matches both this entry and `other`.
    pub fn overlaps(&self, other: &HostPattern) -> bool {
        if let (Some(a), Some(b)) = (self.port, other.port) {
            if a != b {
                return false;
            }
        }
        let covers = |wide: &HostPattern, narrow: &HostPattern| match (&wide.host, &narrow.host) {
            (Host::Domain(w), Host::Domain(n)) => {
                wide.subdomains && n.len() > w.len() && n.ends_with(&format!(".{w}"))
            }
            _ => false,
        };
        (self.host == other.host && self.subdomains == other.subdomains)
            || covers(self, other)
            || covers(other, self)
    }

    /// Whether `url`'s host and port are this entry's.
    pub fn matches(&self, url: &Url) -> bool {
        let Some(host) = url.host() else {
            return false;
        };
        if let Some(port) = self.port {
            if url.port_or_known_default() != Some(port) {
                return false;
            }
        }
        match (&self.host, host) {
            (Host::Domain(allowed), Host::Domain(name)) => {
                let name = name.strip_suffix('.').unwrap_or(name);
                if self.subdomains {
                    name.len() > allowed.len() + 1
                        && name.ends_with(allowed.as_str())
                        && name.as_bytes()[name.len() - allowed.len() - 1] == b'.'
                } else {
                    name == allowed
                }
            }
            (Host::Ipv4(allowed), Host::Ipv4(address)) => *allowed == address,
            (Host::Ipv6(allowed), Host::Ipv6(address)) => *allowed == address,
            _ => false,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.subdomains {
            f.write_str("*.")?;
        }
        write!(f, "{}", self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

/// `host[:port]`, with an IPv6 address in brackets; `None` when the port is not a port.
fn split_port(entry: &str) -> Option<(&str, Option<u16>)> {
    let port_at = if entry.starts_with('[') {
        entry.find(']').map(|end| end + 1)
    } else {
        entry.rfind(':')
    };
    match port_at {
        Some(at) if entry[at..].starts_with(':') => {
            let port: u16 = entry[at + 1..].parse().ok()?;
            (port > 0).then_some((&entry[..at], Some(port)))
        }
        _ => Some((entry, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).expect("a URL")
    }

    #[test]
    fn names_match_exactly_and_wildcards_match_subdomains_only() {
        let exact = HostPattern::parse("API.example.com").expect("parses");
        assert!(exact.matches(&url("https://api.example.com/x")));
        assert!(exact.matches(&url("http://api.example.com:8080/")));
        assert!(exact.matches(&url("https://api.example.com./")));
        assert!(!exact.matches(&url("https://example.com/")));
        assert!(!exact.matches(&url("https://api.example.com.evil.net/")));
        let wild = HostPattern::parse("*.example.com").expect("parses");
        assert!(wild.matches(&url("https://a.b.example.com/")));
        assert!(!wild.matches(&url("https://example.com/")));
        assert!(!wild.matches(&url("https://badexample.com/")));
    }

    #[test]
    fn ports_and_addresses_in_every_spelling() {
        let port = HostPattern::parse("localhost:8080").expect("parses");
        assert!(port.matches(&url("http://localhost:8080/")));
        assert!(!port.matches(&url("http://localhost:8081/")));
        let https = HostPattern::parse("example.com:443").expect("parses");
        assert!(https.matches(&url("https://example.com/")));
        let v4 = HostPattern::parse("127.0.0.1").expect("parses");
        assert!(v4.matches(&url("http://0x7f.0.0.1/")));
        assert!(v4.matches(&url("http://2130706433:9/")));
        let v6 = HostPattern::parse("[::1]:9").expect("parses");
        assert!(v6.matches(&url("http://[0:0::1]:9/")));
        assert!(!v6.matches(&url("http://[::1]:10/")));
    }

    #[test]
    fn entries_overlap_where_one_url_matches_both() {
        let p = |text: &str| HostPattern::parse(text).expect("parses");
        assert!(p("localhost:8080").overlaps(&p("localhost")));
        assert!(p("*.example.com").overlaps(&p("api.example.com:443")));
        assert!(p("api.example.com").overlaps(&p("*.example.com")));
        assert!(!p("localhost:8080").overlaps(&p("localhost:8081")));
        assert!(!p("example.com").overlaps(&p("*.example.com")));
        assert!(!p("a.com").overlaps(&p("b.com")));
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        for bad in [
            "",
            "https://a.com",
            "a.com/x",
            "a.com:0",
            "a.com:http",
            "*.*.a.com",
            "a.*.com",
            "*.1.2.3.4",
            "a b",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}

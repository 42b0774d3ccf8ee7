//! Name resolution that refuses what `address::refused` refuses: the connection is made to
//! an address this resolver returned, so a name cannot be checked against one address and
//! then reach another (no window for a rebinding answer between a check and the connect).

use std::error::Error;
use std::fmt;
use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::address;

/// Resolves with the system's resolver, keeping only the addresses a fetch may reach.
pub(crate) struct Guarded {
    pub allow_private_network: bool,
}

/// Every address a name resolved to was refused; says the first and why.
#[derive(Debug)]
pub(crate) struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Refused {}

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private_network;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if allow_private {
                return Ok(Box::new(found.into_iter()) as Addrs);
            }
            let mut first_refused = None;
            let kept: Vec<SocketAddr> = found
                .into_iter()
                .filter(|at| match address::refused(at.ip()) {
                    None => true,
                    Some(kind) => {
                        first_refused.get_or_insert((at.ip(), kind));
                        false
                    }
                })
                .collect();
            match (kept.is_empty(), first_refused) {
                (true, Some((ip, kind))) => Err(Box::new(Refused(format!(
                    "{host} resolves to {ip}, a {kind} address; fetch does not reach the host's own network unless codemode runs with --allow-private-network"
                ))) as Box<dyn Error + Send + Sync>),
                _ => Ok(Box::new(kept.into_iter()) as Addrs),
            }
        })
    }
}

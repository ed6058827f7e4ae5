//! [`ProxyTrust`]: how an upstream's `https` proxies are reached, from the settings a
//! snapshot ships (`proxypool_core::control::UpstreamTls`): the TLS client on the
//! upstream's CA bundle (or the public roots) and the name the proxies' certificates must
//! carry. The gateway dials with it and the controller's checker probes with it, so both
//! verify a proxy the same way.

use super::client::ClientTls;
use proxypool_core::control::UpstreamTls;

/// The TLS to one upstream's `https` proxies; cheap to clone.
#[derive(Debug, Clone)]
pub struct ProxyTrust {
    /// `Err` when the shipped CA bundle cannot be used: the upstream's `https` proxies are
    /// then not reached at all (never against the public roots instead).
    client: Result<ClientTls, String>,
    server_name: Option<String>,
}

impl ProxyTrust {
    /// The trust `settings` ask for; without settings, the public roots under each
    /// proxy's host.
    pub fn of(settings: Option<&UpstreamTls>) -> Self {
        let Some(settings) = settings else {
            return ProxyTrust {
                client: Ok(ClientTls::public_roots()),
                server_name: None,
            };
        };
        ProxyTrust {
            client: ClientTls::from_ca_pem(settings.ca_pem.as_deref()).map_err(|e| e.to_string()),
            server_name: settings.server_name.clone(),
        }
    }

    /// The TLS client, or why the upstream's CA bundle cannot be used.
    pub fn client(&self) -> Result<&ClientTls, &str> {
        self.client.as_ref().map_err(String::as_str)
    }

    /// The name a proxy at `host` must be certified for.
    pub fn server_name<'a>(&'a self, host: &'a str) -> &'a str {
        self.server_name.as_deref().unwrap_or(host)
    }
}

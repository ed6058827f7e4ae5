//! How upstream proxies are reached, per upstream as the snapshot ships it: the TLS to
//! `https` proxies (its CA bundle and the name its proxies' certificates carry), resolved
//! once per view into what a dial needs (`proxypool_edge::ProxyTrust`, the checker's too),
//! and whether its proxies may be dialed only at public addresses
//! (`crate::proxy_addresses`).

use proxypool_core::UpstreamId;
use proxypool_core::control::UpstreamTls;
use proxypool_edge::{ClientTls, ProxyTrust};
use std::collections::{HashMap, HashSet};

/// How to reach one `https` proxy: the TLS client to use and the name to verify.
#[derive(Debug, Clone)]
pub(crate) struct ProxyTls {
    pub client: ClientTls,
    pub server_name: String,
}

/// The upstreams' settings of one snapshot, each TLS setting loaded once.
#[derive(Debug, Default)]
pub(crate) struct UpstreamTrust {
    by_upstream: HashMap<UpstreamId, ProxyTrust>,
    /// Upstreams whose proxies are dialed only at public addresses.
    refuse_internal: HashSet<UpstreamId>,
}

impl UpstreamTrust {
    pub(crate) fn of(settings: &[UpstreamTls]) -> Self {
        let by_upstream = settings
            .iter()
            // An entry that only refuses internal addresses asks for the default TLS.
            .filter(|tls| tls.ca_pem.is_some() || tls.server_name.is_some())
            .map(|tls| {
                let trust = ProxyTrust::of(Some(tls));
                if let Err(error) = trust.client() {
                    tracing::error!(upstream = %tls.upstream, %error, "the upstream's CA bundle cannot be used; its https proxies are left out");
                }
                (tls.upstream.clone(), trust)
            })
            .collect();
        let refuse_internal = settings
            .iter()
            .filter(|entry| entry.refuse_internal)
            .map(|entry| entry.upstream.clone())
            .collect();
        UpstreamTrust {
            by_upstream,
            refuse_internal,
        }
    }

    /// Whether `upstream`'s proxies may be dialed only at addresses the internal-address
    /// rule lets through, as the checker was told for it.
    pub(crate) fn refuses_internal(&self, upstream: &UpstreamId) -> bool {
        self.refuse_internal.contains(upstream)
    }

    /// The TLS of an `https` proxy of `upstream` at `host`; `Err` says why it cannot
    /// be dialed.
    pub(crate) fn for_proxy(&self, upstream: &UpstreamId, host: &str) -> Result<ProxyTls, String> {
        let public;
        let trust = match self.by_upstream.get(upstream) {
            Some(trust) => trust,
            None => {
                public = ProxyTrust::of(None);
                &public
            }
        };
        let client = trust
            .client()
            .map_err(|error| format!("its upstream's CA bundle: {error}"))?;
        Ok(ProxyTls {
            client: client.clone(),
            server_name: trust.server_name(host).to_owned(),
        })
    }
}

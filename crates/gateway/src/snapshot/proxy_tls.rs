//! TLS to `https` upstream proxies: the trust each upstream asks for (its CA bundle and
//! the name its proxies' certificates carry, shipped in the snapshot), resolved once per
//! view into what a dial needs (`proxypool_edge::ProxyTrust`, the checker's too).

use proxypool_core::UpstreamId;
use proxypool_core::control::UpstreamTls;
use proxypool_edge::{ClientTls, ProxyTrust};
use std::collections::HashMap;

/// How to reach one `https` proxy: the TLS client to use and the name to verify.
#[derive(Debug, Clone)]
pub(crate) struct ProxyTls {
    pub client: ClientTls,
    pub server_name: String,
}

/// The upstreams' TLS settings of one snapshot, each loaded once.
#[derive(Debug, Default)]
pub(crate) struct UpstreamTrust {
    by_upstream: HashMap<UpstreamId, ProxyTrust>,
}

impl UpstreamTrust {
    pub(crate) fn of(settings: &[UpstreamTls]) -> Self {
        let by_upstream = settings
            .iter()
            .map(|tls| {
                let trust = ProxyTrust::of(Some(tls));
                if let Err(error) = trust.client() {
                    tracing::error!(upstream = %tls.upstream, %error, "the upstream's CA bundle cannot be used; its https proxies are left out");
                }
                (tls.upstream.clone(), trust)
            })
            .collect();
        UpstreamTrust { by_upstream }
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

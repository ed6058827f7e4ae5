//! How each upstream's proxies are reached: the TLS to its `https` proxies, as its
//! `proxy_tls` gives it, and whether its proxies may be dialed only at public addresses
//! ([`refuses_internal`]). Read once at start, shipped in every snapshot (so a gateway
//! verifies and dials a proxy exactly as the checker did) and turned into the checker's
//! [`ProxyTrust`], the one the gateways build.

use crate::config::{ProviderKind, UpstreamConfig};
use proxypool_core::control::UpstreamTls;
use proxypool_edge::ProxyTrust;

/// Whether `upstream`'s proxies may be dialed only at addresses
/// `proxypool_core::is_internal_address` does not refuse: a fetched list, unless its
/// operator set `allow_private_hosts` (a list written in our own file, or a backconnect
/// endpoint, names what the operator chose). The checker and the gateways both follow it.
pub fn refuses_internal(upstream: &UpstreamConfig) -> bool {
    upstream.provider.kind == ProviderKind::Http && !upstream.provider.allow_private_hosts
}

/// The entries a snapshot carries: one per upstream with `proxy_tls` or that
/// [`refuses_internal`]. A CA bundle that cannot be read is shipped empty, which no
/// gateway accepts: the upstream's `https` proxies are then left out rather than checked
/// against the public roots.
pub fn shipped(upstreams: &[UpstreamConfig]) -> Vec<UpstreamTls> {
    upstreams
        .iter()
        .filter_map(|upstream| {
            let refuse_internal = refuses_internal(upstream);
            let tls = upstream.proxy_tls.as_ref();
            if tls.is_none() && !refuse_internal {
                return None;
            }
            let ca_pem = tls.and_then(|tls| tls.ca.as_ref()).map(|path| {
                std::fs::read_to_string(path).unwrap_or_else(|error| {
                    tracing::error!(upstream = %upstream.id, path = %path.display(), %error, "the upstream's proxy CA bundle cannot be read; its https proxies will not be used");
                    String::new()
                })
            });
            Some(UpstreamTls {
                upstream: upstream.id.clone(),
                ca_pem,
                server_name: tls.and_then(|tls| tls.server_name.clone()),
                refuse_internal,
            })
        })
        .collect()
}

/// How the checker reaches `upstream`'s `https` proxies: as the gateways do, from what
/// the snapshots ship (the public roots when it sets nothing).
pub fn trust_of(upstream: &UpstreamConfig) -> ProxyTrust {
    ProxyTrust::of(shipped(std::slice::from_ref(upstream)).first())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(id: &str, provider: serde_json::Value) -> UpstreamConfig {
        serde_json::from_value(serde_json::json!({
            "id": id, "ttl": "10m", "max_size": 10, "provider": provider,
        }))
        .unwrap()
    }

    #[test]
    fn a_fetched_list_is_dialed_at_public_addresses_unless_its_operator_allows_private() {
        let upstreams = [
            upstream(
                "fetched",
                serde_json::json!({"kind": "http", "url": "https://v.test/l"}),
            ),
            upstream(
                "private",
                serde_json::json!({"kind": "http", "url": "https://v.test/l", "allow_private_hosts": true}),
            ),
            upstream(
                "own",
                serde_json::json!({"kind": "static", "proxies": ["127.0.0.1:8080"]}),
            ),
        ];
        let refusing: Vec<bool> = upstreams.iter().map(refuses_internal).collect();
        assert_eq!(refusing, [true, false, false]);
        let shipped = shipped(&upstreams);
        assert_eq!(shipped.len(), 1, "{shipped:?}");
        assert_eq!(shipped[0].upstream.as_str(), "fetched");
        assert!(shipped[0].refuse_internal);
        assert_eq!(
            (&shipped[0].ca_pem, &shipped[0].server_name),
            (&None, &None)
        );
        // The checker is told the same, and reaches the proxies with the default TLS.
        assert!(trust_of(&upstreams[0]).client().is_ok());
    }
}

//! The client address behind a trusted load balancer: from a peer in `[api]
//! trusted_proxies`, `X-Forwarded-For` names the client, and this middleware puts that
//! address where the shield and the allowlist check look (the scaffold's `Peer`). From any other
//! peer the header is ignored: a client cannot pick its own address.
//!
//! From a trusted peer, `X-Forwarded-Proto: https` is believed too: the balancer ended TLS,
//! so the browser's origin is secure and the dashboard's cookie can be `Secure`
//! ([`ForwardedHttps`]).
//!
//! The leftmost entry is whatever the client wrote; only what the trusted hops appended
//! is believed. So the list is read from the right, skipping trusted hops, and the first
//! address that is not one of them is the client. When every entry is a trusted address
//! (the client sits in a trusted range, or wrote trusted-looking entries of its own), the
//! header names nobody beyond the balancers, and the entries cannot tell a client-written
//! one from a hop's: only the rightmost, which the balancer that connected to us wrote, is
//! believed, never the leftmost, which the client may have written itself. The same holds
//! when [`MAX_HOPS`] entries from the right are all trusted.

use crate::admission::shield::peer_of;
use crate::state::ApiState;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use proxypool_core::in_any_block;
use proxypool_edge::Peer;
use std::net::{IpAddr, SocketAddr};

/// Most entries read from the right of the header(s); a longer chain stops there.
const MAX_HOPS: usize = 32;

pub(crate) async fn client_address(
    State(state): State<ApiState>,
    mut request: Request,
    next: Next,
) -> Response {
    let trusted = state.trusted_proxies();
    let trusted_peer = (!trusted.is_empty())
        .then(|| peer_of(request.extensions()))
        .flatten()
        .filter(|peer| in_any_block(peer.ip(), trusted));
    if trusted_peer.is_some() && forwarded_https(request.headers()) {
        request.extensions_mut().insert(ForwardedHttps);
    }
    if let Some(peer) = trusted_peer
        && let Some(client) = forwarded_client(peer.ip(), request.headers(), trusted)
    {
        // Both places the address is read from (the scaffold's and axum's).
        let client = SocketAddr::new(client, 0);
        request.extensions_mut().insert(Peer(client));
        request.extensions_mut().insert(ConnectInfo(client));
    }
    next.run(request).await
}

/// Marks a request a trusted balancer says arrived over https.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ForwardedHttps;

/// Whether `X-Forwarded-Proto` says https (its first value: the hop the client reached).
fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// The client `X-Forwarded-For` names, if `peer` is trusted and the header says.
pub(crate) fn forwarded_client(
    peer: IpAddr,
    headers: &HeaderMap,
    trusted: &[(IpAddr, u8)],
) -> Option<IpAddr> {
    let is_trusted = |ip: IpAddr| in_any_block(ip, trusted);
    if !is_trusted(peer) {
        return None;
    }
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .collect();
    let mut nearest = None;
    for entry in entries.iter().rev().take(MAX_HOPS) {
        // An entry that is not an address ends what can be believed: the nearest trusted
        // hop before it is, as when every entry is trusted (not the balancer itself).
        let Ok(ip) = entry.trim().parse::<IpAddr>() else {
            return nearest;
        };
        let ip = ip.to_canonical();
        if !is_trusted(ip) {
            return Some(ip);
        }
        nearest.get_or_insert(ip);
    }
    // No address beyond the trusted ranges: the entries further left may be the client's
    // own text, so only what the balancer that connected to us wrote is believed.
    nearest
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_trusted_peers_are_believed_and_only_from_the_right() {
        let trusted = [(ip("10.0.0.0"), 8)];
        let lb = ip("10.0.0.5");
        // The client wrote a fake leftmost entry; the balancer appended the real one.
        assert_eq!(
            forwarded_client(lb, &headers(&["1.1.1.1, 203.0.113.7"]), &trusted),
            Some(ip("203.0.113.7"))
        );
        // Two balancers: skip the inner trusted hop.
        assert_eq!(
            forwarded_client(lb, &headers(&["203.0.113.7", "10.0.0.9"]), &trusted),
            Some(ip("203.0.113.7"))
        );
        // From an untrusted peer the header means nothing.
        assert_eq!(
            forwarded_client(ip("198.51.100.1"), &headers(&["203.0.113.7"]), &trusted),
            None
        );
        // No header, or garbage at the right: nothing believed.
        assert_eq!(forwarded_client(lb, &headers(&[]), &trusted), None);
        assert_eq!(
            forwarded_client(lb, &headers(&["203.0.113.7, nonsense"]), &trusted),
            None
        );
        // Garbage beyond a trusted hop: that hop is believed (it wrote what follows it),
        // never the address left of the garbage.
        assert_eq!(
            forwarded_client(lb, &headers(&["203.0.113.7, junk, 10.0.0.9"]), &trusted),
            Some(ip("10.0.0.9"))
        );
        // Every entry trusted: the leftmost may be the client's own text (a client inside
        // the trusted range wrote one), so only the rightmost, the connecting balancer's,
        // is believed.
        assert_eq!(
            forwarded_client(lb, &headers(&["10.66.0.1, 10.20.0.5"]), &trusted),
            Some(ip("10.20.0.5"))
        );
        assert_eq!(
            forwarded_client(lb, &headers(&["10.66.0.1", "10.20.0.5"]), &trusted),
            Some(ip("10.20.0.5"))
        );
        // Past the hops read, the same: never the far end of what was read.
        let long = std::iter::repeat_n("10.0.0.9", MAX_HOPS + 3)
            .chain(["10.0.0.7"])
            .collect::<Vec<_>>()
            .join(", ");
        assert_eq!(
            forwarded_client(lb, &headers(&[&long]), &trusted),
            Some(ip("10.0.0.7"))
        );
        // Mapped forms are their IPv4 address.
        assert_eq!(
            forwarded_client(
                ip("::ffff:10.0.0.5"),
                &headers(&["::ffff:203.0.113.7"]),
                &trusted
            ),
            Some(ip("203.0.113.7"))
        );
    }
}

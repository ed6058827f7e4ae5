//! The fleet's metric handles (all prefixed `proxypool_gateway_fleet_`), created once when
//! the fleet is built so relaying only bumps atomics. No label carries a client, a key or
//! a member: the set of series is fixed.
//!
//! `members` (gauge: members in the current list, set by [`super::view`]), `relayed_total{kind,outcome}` (entry
//! side: `kind` = `http`, `connect`, `socks5`; `outcome` = `ok`, `refused` (the owner
//! answered a refusal or a non-2xx), `unreachable` (no answer head from the owner)),
//! `hop_seconds` (histogram, entry side: from the hop's start to the owner's answer head),
//! `served_total{kind}` (owner side), `hop_refusals_total{reason}` (`unknown_peer`,
//! `handshake`, `bad_request`) and `unreachable_total` (members marked unreachable).

use metrics::{Counter, Histogram, counter, histogram};

/// What was relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelayKind {
    Http,
    Connect,
    Socks5,
}

impl RelayKind {
    const ALL: [RelayKind; 3] = [RelayKind::Http, RelayKind::Connect, RelayKind::Socks5];

    fn label(self) -> &'static str {
        match self {
            RelayKind::Http => "http",
            RelayKind::Connect => "connect",
            RelayKind::Socks5 => "socks5",
        }
    }
}

/// How a relay ended, from the entry's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelayOutcome {
    /// The owner answered with a 2xx.
    Ok,
    /// The owner answered with a refusal (any non-2xx).
    Refused,
    /// The owner gave no answer head (connect, TLS or head deadline failed).
    Unreachable,
}

impl RelayOutcome {
    const ALL: [RelayOutcome; 3] = [
        RelayOutcome::Ok,
        RelayOutcome::Refused,
        RelayOutcome::Unreachable,
    ];

    fn label(self) -> &'static str {
        match self {
            RelayOutcome::Ok => "ok",
            RelayOutcome::Refused => "refused",
            RelayOutcome::Unreachable => "unreachable",
        }
    }
}

/// Why the fleet listener refused a hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HopRefusal {
    /// The peer's certificate pin is not a member's, even after a refresh.
    UnknownPeer,
    /// The TLS handshake failed or timed out.
    Handshake,
    /// A hop request without valid fleet headers.
    BadRequest,
}

/// Cached handles.
#[derive(Debug)]
pub(crate) struct FleetMetrics {
    /// `[kind][outcome]`, in the order of `RelayKind::ALL` and `RelayOutcome::ALL`.
    relayed: [[Counter; 3]; 3],
    pub hop_seconds: Histogram,
    /// In the order of `RelayKind::ALL`.
    served: [Counter; 3],
    hop_refusals: [Counter; 3],
    pub unreachable: Counter,
}

impl FleetMetrics {
    pub(crate) fn new() -> Self {
        describe();
        FleetMetrics {
            relayed: RelayKind::ALL.map(|kind| {
                RelayOutcome::ALL.map(|outcome| {
                    counter!(
                        "proxypool_gateway_fleet_relayed_total",
                        "kind" => kind.label(),
                        "outcome" => outcome.label()
                    )
                })
            }),
            hop_seconds: histogram!("proxypool_gateway_fleet_hop_seconds"),
            served: RelayKind::ALL.map(
                |kind| counter!("proxypool_gateway_fleet_served_total", "kind" => kind.label()),
            ),
            hop_refusals: ["unknown_peer", "handshake", "bad_request"].map(
                |reason| counter!("proxypool_gateway_fleet_hop_refusals_total", "reason" => reason),
            ),
            unreachable: counter!("proxypool_gateway_fleet_unreachable_total"),
        }
    }

    /// One relayed request or tunnel, counted at the entry.
    pub(crate) fn relayed(&self, kind: RelayKind, outcome: RelayOutcome) {
        self.relayed[kind as usize][outcome as usize].increment(1);
    }

    /// One hop request served as the owner.
    pub(crate) fn served(&self, kind: RelayKind) {
        self.served[kind as usize].increment(1);
    }

    /// One hop the fleet listener refused.
    pub(crate) fn hop_refused(&self, reason: HopRefusal) {
        self.hop_refusals[reason as usize].increment(1);
    }
}

impl Default for FleetMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        "proxypool_gateway_fleet_members",
        "Gateways in the fleet's member list as this gateway last received it."
    );
    describe_counter!(
        "proxypool_gateway_fleet_relayed_total",
        "Keyed requests and tunnels this gateway relayed to the key's owner, by how the \
         owner answered (ok, refused, unreachable)."
    );
    describe_histogram!(
        "proxypool_gateway_fleet_hop_seconds",
        metrics::Unit::Seconds,
        "From the start of a hop to the owner's answer head (connect and TLS included when \
         no pooled hop connection was free)."
    );
    describe_counter!(
        "proxypool_gateway_fleet_served_total",
        "Hop requests and tunnels this gateway served as the key's owner."
    );
    describe_counter!(
        "proxypool_gateway_fleet_hop_refusals_total",
        "Hops the fleet listener refused (unknown peer pin, failed handshake, bad fleet \
         headers)."
    );
    describe_counter!(
        "proxypool_gateway_fleet_unreachable_total",
        "Members this gateway marked unreachable after a failed hop."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_and_outcome_has_its_own_series() {
        let (recorder, handle) = proxypool_metrics::MetricsHandle::local();
        let metrics = metrics::with_local_recorder(&recorder, FleetMetrics::new);
        metrics.relayed(RelayKind::Socks5, RelayOutcome::Unreachable);
        metrics.relayed(RelayKind::Http, RelayOutcome::Ok);
        metrics.relayed(RelayKind::Http, RelayOutcome::Ok);
        metrics.served(RelayKind::Connect);
        metrics.hop_refused(HopRefusal::UnknownPeer);
        let text = handle.render();
        for line in [
            "proxypool_gateway_fleet_relayed_total{kind=\"socks5\",outcome=\"unreachable\"} 1",
            "proxypool_gateway_fleet_relayed_total{kind=\"http\",outcome=\"ok\"} 2",
            "proxypool_gateway_fleet_relayed_total{kind=\"connect\",outcome=\"ok\"} 0",
            "proxypool_gateway_fleet_served_total{kind=\"connect\"} 1",
            "proxypool_gateway_fleet_hop_refusals_total{reason=\"unknown_peer\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing in:\n{text}");
        }
    }
}

//! The snapshot checksum: a sum (modulo 2^128) of one digest per item, so the checksum
//! of a whole content and the change a delta makes to it are both cheap.
//!
//! Each item (a listed proxy, a held lease, one proxy's cooldown entries, the clients, the
//! session feedback, the upstreams' TLS settings, the cooldown policy, the ticket key's id)
//! digests to the first 16 bytes of SHA-256 over a kind tag and the item's JSON. Order does
//! not matter, so the controller and the gateway agree on the checksum of the same content
//! however each holds it, and replacing one item costs two digests, not a pass over the
//! snapshot. It detects accidents (a lost or misapplied delta, two controllers' different
//! content under one version); the parties are authenticated, so it is not meant to
//! resist a forger.

use proxypool_core::control::{Advisories, GatewayClient, HeldLease, SnapshotProxy, UpstreamTls};
use proxypool_core::cooldown::CooldownPolicy;
use proxypool_core::ticket::TicketKey;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Item kinds, one tag byte each, so equal JSON of two kinds never digests alike.
pub(crate) mod tag {
    pub(crate) const PROXY: u8 = b'p';
    pub(crate) const HELD: u8 = b'h';
    pub(crate) const COOLDOWN: u8 = b'c';
    pub(crate) const CLIENT: u8 = b'g';
    pub(crate) const FEEDBACK: u8 = b'f';
    pub(crate) const POLICY: u8 = b'P';
    pub(crate) const TICKET_KEY: u8 = b'k';
    pub(crate) const UPSTREAM_TLS: u8 = b't';
}

/// The digest of one item.
pub(crate) fn item_digest<T: Serialize + ?Sized>(kind: u8, item: &T) -> u128 {
    let json = serde_json::to_vec(item).expect("snapshot items serialize");
    let mut hasher = Sha256::new();
    hasher.update([kind]);
    hasher.update(&json);
    let full = hasher.finalize();
    let mut first = [0u8; 16];
    first.copy_from_slice(&full[..16]);
    u128::from_le_bytes(first)
}

pub(crate) fn sum_of<T: Serialize>(kind: u8, items: &[T]) -> u128 {
    items
        .iter()
        .fold(0u128, |sum, item| sum.wrapping_add(item_digest(kind, item)))
}

/// The ticket key counts by its [`TicketKey::id`], never the key itself.
pub(crate) fn ticket_digest(key: Option<&TicketKey>) -> u128 {
    key.map_or(0, |k| item_digest(tag::TICKET_KEY, &k.id()))
}

pub(crate) fn policy_digest(policy: Option<&CooldownPolicy>) -> u128 {
    policy.map_or(0, |p| item_digest(tag::POLICY, p))
}

/// `sum` with the item digested `old` replaced by one digested `new`.
pub(crate) fn swap(sum: u128, old: u128, new: u128) -> u128 {
    sum.wrapping_sub(old).wrapping_add(new)
}

/// The checksum text of a digest sum.
pub(crate) fn checksum_text(sum: u128) -> String {
    format!("{sum:032x}")
}

/// The checksum of a whole snapshot's content given as lists (every field of every item,
/// a client's `allowed_ports` and `rotation` included): what a [`SnapshotRef`] carries and
/// what [`SnapshotContent::checksum`] answers for the same content. Parts a snapshot may
/// lack (held leases, cooldowns, feedback, the key, TLS settings) add nothing when absent.
///
/// [`SnapshotRef`]: proxypool_core::SnapshotRef
/// [`SnapshotContent::checksum`]: crate::SnapshotContent::checksum
pub fn snapshot_checksum(
    proxies: &[SnapshotProxy],
    held: &[HeldLease],
    clients: &[GatewayClient],
    advisories: &Advisories,
    ticket_key: Option<&TicketKey>,
    upstream_tls: &[UpstreamTls],
) -> String {
    let sum = sum_of(tag::PROXY, proxies)
        .wrapping_add(sum_of(tag::HELD, held))
        .wrapping_add(sum_of(tag::CLIENT, clients))
        .wrapping_add(sum_of(tag::COOLDOWN, &advisories.cooldowns))
        .wrapping_add(policy_digest(advisories.policy.as_ref()))
        .wrapping_add(sum_of(tag::FEEDBACK, &advisories.session_feedback))
        .wrapping_add(ticket_digest(ticket_key))
        .wrapping_add(sum_of(tag::UPSTREAM_TLS, upstream_tls));
    checksum_text(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::control::ClientRotation;
    use proxypool_core::{ClientId, PortSet, SecretHash};

    /// The checksum of a snapshot that lists only `clients`.
    fn clients_checksum(clients: &[GatewayClient]) -> String {
        snapshot_checksum(&[], &[], clients, &Advisories::default(), None, &[])
    }

    fn client() -> GatewayClient {
        GatewayClient {
            id: ClientId::new("acme").unwrap(),
            project: "acme".into(),
            password_hash: SecretHash::derive("pw", "salt").unwrap(),
            allowed_upstreams: Vec::new(),
            allowed_regions: Vec::new(),
            ip_allowlist: Vec::new(),
            rate_limit: None,
            max_connections: 8,
            allowed_ports: None,
            ban_statuses: None,
            rotation: None,
            inspection: Default::default(),
            tls_names: Vec::new(),
        }
    }

    #[test]
    fn the_checksum_covers_a_client_s_port_override() {
        let plain = clients_checksum(&[client()]);
        let ports = GatewayClient {
            allowed_ports: Some(PortSet::only([443])),
            ..client()
        };
        let with_ports = clients_checksum(std::slice::from_ref(&ports));
        assert_ne!(plain, with_ports);
        let other = GatewayClient {
            allowed_ports: Some(PortSet::only([443, 8443])),
            ..client()
        };
        assert_ne!(with_ports, clients_checksum(&[other]));
        // Without an override the JSON (and so the checksum) is what it was before the
        // field existed, and a client sent without it reads back as `None`.
        let json = serde_json::to_value(client()).unwrap();
        assert!(json.get("allowed_ports").is_none());
        let back: GatewayClient = serde_json::from_value(json).unwrap();
        assert_eq!(back.allowed_ports, None);
        let back: GatewayClient =
            serde_json::from_value(serde_json::to_value(&ports).unwrap()).unwrap();
        assert_eq!(back, ports);
    }

    #[test]
    fn a_client_s_rotation_is_in_the_checksum_only_when_set() {
        let plain = client();
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("rotation").is_none(), "{json}");
        let cases = [
            (ClientRotation::PerRequest, serde_json::json!("per_request")),
            (ClientRotation::LeastUsed, serde_json::json!("least_used")),
            (
                ClientRotation::EveryRequests(5),
                serde_json::json!({ "every_requests": 5 }),
            ),
            (
                ClientRotation::EveryMs(30_000),
                serde_json::json!({ "every_ms": 30_000 }),
            ),
        ];
        let mut checksums = vec![clients_checksum(std::slice::from_ref(&plain))];
        for (rotation, expected) in cases {
            let with = GatewayClient {
                rotation: Some(rotation),
                ..client()
            };
            let json = serde_json::to_value(&with).unwrap();
            assert_eq!(json["rotation"], expected);
            let back: GatewayClient = serde_json::from_value(json).unwrap();
            assert_eq!(back, with);
            checksums.push(clients_checksum(&[with]));
        }
        let distinct: std::collections::HashSet<_> = checksums.iter().collect();
        assert_eq!(
            distinct.len(),
            checksums.len(),
            "every rotation changes the checksum"
        );
    }
}

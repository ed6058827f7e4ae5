//! Snapshot content and deltas: a delta made from two contents turns the first into the
//! second, checksums agree however the content is held, and a delta that does not fit
//! changes nothing.

use proxypool_core::control::{
    Advisories, GatewayClient, HeldLease, SnapshotProxy, WorkerSnapshot,
};
use proxypool_core::{
    ClientId, CooldownPolicy, Credentials, Domain, DomainCooldown, Protocol, ProxyId, SecretHash,
    SnapshotRef, TicketKey, UpstreamId, WorkerId,
};
use proxypool_snapshot::{
    ContentError, LeaseEnd, SnapshotContent, SnapshotDelta, snapshot_checksum,
};

fn worker() -> WorkerId {
    WorkerId::new("gw-1").unwrap()
}

fn proxy(i: u32, lease: u64) -> SnapshotProxy {
    SnapshotProxy {
        id: ProxyId::new(format!("{i:032x}")).unwrap(),
        protocol: Protocol::Http,
        host: format!("10.0.{}.{}", i / 250, i % 250),
        port: 8080,
        credentials: Some(Credentials::new("u", "pw")),
        upstream: UpstreamId::new("vendor").unwrap(),
        region: None,
        carrier: None,
        geo: Default::default(),
        max_sessions: 4,
        usable_until_ms: 1_000_000,
        lease_until_ms: lease,
        epoch: 1,
    }
}

fn client(id: &str) -> GatewayClient {
    GatewayClient {
        id: ClientId::new(id).unwrap(),
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

fn cooldown(proxy: u32, domain: &str, until: u64) -> DomainCooldown {
    DomainCooldown {
        proxy_id: ProxyId::new(format!("{proxy:032x}")).unwrap(),
        domain: Domain::of_host(domain).unwrap(),
        project: None,
        until_ms: until,
        strikes: 1,
        forget_at_ms: until + 1_000,
    }
}

fn snapshot(
    version: u64,
    proxies: Vec<SnapshotProxy>,
    held: Vec<HeldLease>,
    cooldowns: Vec<DomainCooldown>,
    clients: Vec<GatewayClient>,
    key: &TicketKey,
) -> WorkerSnapshot {
    let advisories = Advisories {
        policy: Some(CooldownPolicy {
            base_ms: 60_000,
            cap_ms: 3_600_000,
            memory_ms: 3_600_000,
        }),
        cooldowns,
        session_feedback: Vec::new(),
    };
    let checksum = snapshot_checksum(&proxies, &held, &clients, &advisories, Some(key), &[]);
    WorkerSnapshot {
        worker: worker(),
        session_id: "s1".into(),
        reference: SnapshotRef {
            version,
            epoch: 1,
            checksum,
        },
        generated_at_ms: 0,
        max_staleness_ms: 60_000,
        proxies,
        clients,
        held,
        advisories,
        ticket_key: Some(key.clone()),
        upstream_tls: Vec::new(),
    }
}

#[test]
fn content_checksum_is_the_snapshot_checksum_and_ignores_order() {
    let key = TicketKey::from_bytes([7; 32]);
    let forward = snapshot(
        1,
        (0..50).map(|i| proxy(i, 500)).collect(),
        vec![],
        vec![
            cooldown(3, "example.com", 10),
            cooldown(4, "example.org", 20),
        ],
        vec![client("a"), client("b")],
        &key,
    );
    let content = SnapshotContent::of(&forward).unwrap();
    assert_eq!(content.checksum(), forward.reference.checksum);
    let mut reversed = forward.clone();
    reversed.proxies.reverse();
    reversed.advisories.cooldowns.reverse();
    assert_eq!(
        SnapshotContent::of(&reversed).unwrap().checksum(),
        content.checksum()
    );
    let mut moved = forward.clone();
    moved.proxies[7].lease_until_ms += 1;
    assert_ne!(
        SnapshotContent::of(&moved).unwrap().checksum(),
        content.checksum(),
        "one lease end moves the checksum"
    );
    let mut twice = forward.clone();
    twice.proxies.push(proxy(3, 500));
    assert_eq!(
        SnapshotContent::of(&twice),
        Err(ContentError::DuplicateProxy(proxy(3, 500).id))
    );
}

#[test]
fn a_delta_between_two_contents_turns_one_into_the_other() {
    let key = TicketKey::from_bytes([7; 32]);
    let before = snapshot(
        4,
        (0..100).map(|i| proxy(i, 500)).collect(),
        vec![HeldLease {
            id: proxy(200, 0).id,
            lease_until_ms: 300,
        }],
        vec![
            cooldown(1, "example.com", 10),
            cooldown(2, "example.com", 10),
        ],
        vec![client("a")],
        &key,
    );
    let mut proxies: Vec<SnapshotProxy> = (0..100)
        .filter(|i| *i != 5)
        .map(|i| proxy(i, if i % 10 == 0 { 900 } else { 500 }))
        .collect();
    proxies.push(proxy(150, 700));
    proxies[20].max_sessions = 9;
    let after = snapshot(
        5,
        proxies,
        vec![HeldLease {
            id: proxy(5, 0).id,
            lease_until_ms: 600,
        }],
        vec![
            cooldown(2, "example.com", 50),
            cooldown(150, "example.net", 60),
        ],
        vec![client("a"), client("b")],
        &key,
    );
    let mut content = SnapshotContent::of(&before).unwrap();
    let target = SnapshotContent::of(&after).unwrap();
    let delta = content.delta_to(&worker(), &target);
    assert_eq!(delta.leases.len(), 10, "renewals travel as lease ends");
    assert_eq!(delta.upsert.len(), 2, "a new proxy and a changed one");
    assert_eq!(delta.remove, vec![proxy(5, 0).id]);
    assert_eq!(delta.unhold, vec![proxy(200, 0).id]);
    assert_eq!(delta.cooldowns.len(), 3, "cleared, changed, new");
    assert!(delta.clients.is_some() && delta.policy.is_none() && delta.ticket_key.is_none());
    content.apply(&delta).unwrap();
    assert_eq!(content, target);
    assert_eq!(
        content.to_snapshot(&worker(), 0, 60_000).reference,
        after.reference
    );
    // The whole snapshot rebuilt from the content is the one it came from.
    let rebuilt = content.to_snapshot(&worker(), after.generated_at_ms, after.max_staleness_ms);
    assert_eq!(
        SnapshotContent::of(&rebuilt).unwrap().checksum(),
        after.reference.checksum
    );
}

#[test]
fn a_delta_that_does_not_fit_changes_nothing() {
    let key = TicketKey::from_bytes([7; 32]);
    let base = snapshot(
        4,
        (0..10).map(|i| proxy(i, 500)).collect(),
        vec![],
        vec![],
        vec![client("a")],
        &key,
    );
    let content = SnapshotContent::of(&base).unwrap();
    let renewed = |checksum: String, base_version: u64, id: u32| {
        let mut delta = SnapshotDelta::empty(
            worker(),
            "s1".into(),
            SnapshotRef {
                version: base_version,
                ..base.reference.clone()
            },
        );
        delta.reference = SnapshotRef {
            version: 5,
            epoch: 1,
            checksum,
        };
        delta.leases.push(LeaseEnd {
            id: proxy(id, 0).id,
            lease_until_ms: 800,
            epoch: 1,
        });
        delta
    };
    let mut moved = base.clone();
    moved.proxies[3].lease_until_ms = 800;
    let right = SnapshotContent::of(&moved).unwrap().checksum();

    let mut held = content.clone();
    assert!(matches!(
        held.apply(&renewed(right.clone(), 3, 3)),
        Err(ContentError::WrongBase { .. })
    ));
    assert!(matches!(
        held.apply(&renewed("0".repeat(32), 4, 3)),
        Err(ContentError::Checksum { .. })
    ));
    assert_eq!(
        held.apply(&renewed(right.clone(), 4, 42)),
        Err(ContentError::NotListed(proxy(42, 0).id))
    );
    assert_eq!(held, content, "refused deltas left it as it was");
    held.apply(&renewed(right.clone(), 4, 3)).unwrap();
    assert_eq!(held.checksum(), right);
    assert_eq!(held.reference().version, 5);
}

#[test]
fn a_lease_renewal_at_scale_is_a_small_delta() {
    let key = TicketKey::from_bytes([7; 32]);
    let n = 100_000;
    let before = snapshot(
        1,
        (0..n).map(|i| proxy(i, 500)).collect(),
        vec![],
        vec![],
        vec![client("a")],
        &key,
    );
    let mut after = before.clone();
    after.proxies[12_345].lease_until_ms = 900;
    let content = SnapshotContent::of(&before).unwrap();
    let target = SnapshotContent::of(&after).unwrap();
    let delta = content.delta_to(&worker(), &target);
    let wire = serde_json::to_vec(&delta).unwrap();
    assert!(
        wire.len() < 1_000,
        "one renewal is {} bytes on the wire",
        wire.len()
    );
}

#[test]
fn geo_labels_are_in_the_checksum_and_travel_in_deltas() {
    use proxypool_core::GeoValues;
    let key = TicketKey::from_bytes([7; 32]);
    let in_city = |city: &str| SnapshotProxy {
        geo: GeoValues {
            city: Some(city.to_owned()),
            state: Some("ny".to_owned()),
            asn: Some("7922".to_owned()),
        },
        ..proxy(1, 500)
    };
    let of = |version: u64, first: SnapshotProxy| {
        snapshot(
            version,
            vec![first, proxy(2, 500)],
            vec![],
            vec![],
            vec![client("a")],
            &key,
        )
    };
    let plain = SnapshotContent::of(&of(1, proxy(1, 500))).unwrap();
    let new_york = SnapshotContent::of(&of(2, in_city("new_york"))).unwrap();
    let boston = SnapshotContent::of(&of(3, in_city("boston"))).unwrap();
    assert_ne!(plain.checksum(), new_york.checksum(), "labels added");
    assert_ne!(new_york.checksum(), boston.checksum(), "one city changed");
    for label in ["state", "asn"] {
        let mut other = in_city("new_york");
        match label {
            "state" => other.geo.state = Some("nj".into()),
            _ => other.geo.asn = Some("3356".into()),
        }
        let changed = SnapshotContent::of(&of(4, other)).unwrap();
        assert_ne!(changed.checksum(), new_york.checksum(), "{label} changed");
    }
    // A proxy without labels lists as it did before they existed, so its checksum holds.
    let json = serde_json::to_value(proxy(1, 500)).unwrap();
    assert!(json.get("geo").is_none(), "{json}");
    let json = serde_json::to_value(in_city("boston")).unwrap();
    assert_eq!(json["geo"]["city"], "boston", "{json}");

    // The change travels whole in a delta and lands at the announced checksum.
    let mut content = new_york.clone();
    let delta = content.delta_to(&worker(), &boston);
    assert!(delta.leases.is_empty());
    assert_eq!(delta.upsert.len(), 1);
    assert_eq!(delta.upsert[0].geo.city.as_deref(), Some("boston"));
    let wire: SnapshotDelta =
        serde_json::from_value(serde_json::to_value(&delta).unwrap()).unwrap();
    content.apply(&wire).unwrap();
    assert_eq!(content.checksum(), boston.checksum());
    assert_eq!(content, boston);
}

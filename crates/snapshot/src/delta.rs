//! Incremental snapshots: what changed in a worker's snapshot since the version it holds.
//!
//! A long-poll answers with a [`SnapshotUpdate`]: the whole [`WorkerSnapshot`] when the
//! gateway is new, behind, or holds content the controller does not know, else a
//! [`SnapshotDelta`] against the version the gateway holds. A delta names its base (the
//! version and checksum it applies to) and its result (the new reference, whose checksum
//! is that of the whole content after it, [`crate::checksum`]); a gateway whose
//! content is not the base, or whose content after the delta does not have the result's
//! checksum, applies nothing and asks for the whole snapshot (`after_version=0`).
//!
//! Only what changed travels: a lease renewal is one [`LeaseEnd`] (id, end, epoch), a
//! cooldown change the changed proxy's entries, and the clients, the policy, the session
//! feedback, the ticket key and the upstreams' TLS only when they changed, whole.

use proxypool_core::control::{
    GatewayClient, HeldLease, SnapshotProxy, UpstreamTls, WorkerSnapshot,
};
use proxypool_core::cooldown::{CooldownPolicy, DomainCooldown, SessionFeedback};
use proxypool_core::ticket::TicketKey;
use proxypool_core::{ProxyId, SnapshotRef, UnixMillis, WorkerId};
use serde::{Deserialize, Serialize};

/// The version of the worker control protocol this build speaks. A gateway names it when
/// it registers and the controller names it in the grant; either side refuses the other's
/// when they differ, with a message that says which side is older. Version 2: snapshots
/// come as [`SnapshotUpdate`]s (whole or delta) with content checksums. Version 3: an
/// upstream's entry may say its proxies are dialed only at public addresses
/// (`UpstreamTls::refuse_internal`), which a gateway of version 2 would neither read nor
/// enforce.
pub const CONTROL_PROTOCOL: u32 = 3;

/// A long-poll's answer with content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotUpdate {
    Full(Box<WorkerSnapshot>),
    Delta(Box<SnapshotDelta>),
}

impl SnapshotUpdate {
    /// The reference the worker holds once the update is applied.
    pub fn reference(&self) -> &SnapshotRef {
        match self {
            SnapshotUpdate::Full(s) => &s.reference,
            SnapshotUpdate::Delta(d) => &d.reference,
        }
    }
}

/// The changes that turn the snapshot at `base` into the one at `reference`. Every list is
/// left out of the JSON when empty and every whole part when unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotDelta {
    pub worker: WorkerId,
    pub session_id: String,
    /// The snapshot the delta applies to: only a worker holding exactly it may apply it.
    pub base: SnapshotRef,
    pub reference: SnapshotRef,
    pub generated_at_ms: UnixMillis,
    pub max_staleness_ms: u64,
    /// Proxies new to the listing, or changed beyond their lease (replaced whole).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upsert: Vec<SnapshotProxy>,
    /// Listed proxies whose lease (end and epoch) is all that changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leases: Vec<LeaseEnd>,
    /// Proxies no longer listed (their cooldowns go with them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<ProxyId>,
    /// Draining leases new or with a new end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldLease>,
    /// Draining leases no longer held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhold: Vec<ProxyId>,
    /// A listed proxy's cooldown entries, replaced whole (empty: it has none now).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cooldowns: Vec<ProxyCooldowns>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<Vec<GatewayClient>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<CooldownPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_feedback: Option<Vec<SessionFeedback>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket_key: Option<TicketKey>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_tls: Option<Vec<UpstreamTls>>,
}

impl SnapshotDelta {
    /// A delta from `base` that changes nothing yet.
    pub fn empty(worker: WorkerId, session_id: String, base: SnapshotRef) -> Self {
        SnapshotDelta {
            worker,
            session_id,
            reference: base.clone(),
            base,
            generated_at_ms: 0,
            max_staleness_ms: 0,
            upsert: Vec::new(),
            leases: Vec::new(),
            remove: Vec::new(),
            held: Vec::new(),
            unhold: Vec::new(),
            cooldowns: Vec::new(),
            clients: None,
            policy: None,
            session_feedback: None,
            ticket_key: None,
            upstream_tls: None,
        }
    }

    /// Whether applying it changes only lease ends and cooldowns of proxies already listed
    /// (a gateway can patch its per-proxy state without rebuilding its view).
    pub fn touches_only_leases_and_cooldowns(&self) -> bool {
        self.upsert.is_empty()
            && self.remove.is_empty()
            && self.clients.is_none()
            && self.policy.is_none()
            && self.session_feedback.is_none()
            && self.ticket_key.is_none()
            && self.upstream_tls.is_none()
    }
}

/// A listed proxy's new lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseEnd {
    pub id: ProxyId,
    pub lease_until_ms: UnixMillis,
    pub epoch: u64,
}

/// One listed proxy's cooldown entries, by domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyCooldowns {
    pub proxy_id: ProxyId,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<DomainCooldown>,
}

//! [`SnapshotView`]: one applied snapshot, immutable, indexed for the username selectors.
//!
//! Built once per snapshot off the hot path; requests only read it. Each proxy carries
//! its [`ProxySlot`] (local counters that outlive the view) and each client its connection
//! counter and limiter handle, so a request never looks anything up in a shared map.

use crate::policy::cidr::Cidr;
use crate::policy::limits::{ClientLimiter, ClientPolicy};
use crate::proxies::capacity::ProxySlot;
use crate::snapshot::proxy_tls::{ProxyTls, UpstreamTrust};
use arc_swap::ArcSwap;
use http::HeaderValue;
use proxypool_core::GeoValues;
use proxypool_core::control::{GatewayClient, SnapshotProxy, WorkerSnapshot};
use proxypool_core::{
    ClientId, CooldownPolicy, Credentials, GeoLabel, Label, PortSet, ProjectId, Protocol, ProxyId,
    SecretHash, SessionFeedback, SnapshotRef, TicketKey, TicketSigner, UnixMillis, UpstreamId,
};
use proxypool_proto::TargetAddr;
use proxypool_snapshot::{SnapshotContent, SnapshotDelta};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One proxy the worker may route through.
#[derive(Debug)]
pub(crate) struct ViewProxy {
    pub id: ProxyId,
    /// `X-Proxypool-Proxy`'s value, made once per view.
    pub id_header: HeaderValue,
    pub protocol: Protocol,
    /// Where to dial it.
    pub address: TargetAddr,
    pub credentials: Option<Credentials>,
    /// `Proxy-Authorization` for plain HTTP forwarded in absolute form (marked sensitive).
    pub basic_header: Option<HeaderValue>,
    pub upstream: UpstreamId,
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    /// City, state and asn, canonical (the `-city-`, `-state-`, `-asn-` selectors).
    pub geo: GeoValues,
    pub max_sessions: u32,
    /// `https` proxies only: the TLS spoken to the proxy before its protocol.
    pub tls: Option<ProxyTls>,
    /// Dialed only at addresses the internal-address rule lets through
    /// (`crate::proxy_addresses`): its upstream is a fetched list, as the checker was told.
    pub refuse_internal: bool,
    pub slot: Arc<ProxySlot>,
}

impl ViewProxy {
    /// Whether the gateway may relay through the proxy at `now_ms` (wall clock): before
    /// its cutoff, the end of its lease and `usable_until` less the skew margin, unless the
    /// store disowned it since ([`crate::proxies::cutoff`]).
    pub(crate) fn is_live(&self, now_ms: UnixMillis) -> bool {
        self.slot.cutoff.is_open(now_ms)
    }

    /// Where the lease really ends: the lease as the latest snapshot or delta gave it,
    /// never past the proxy's own `usable_until`.
    pub(crate) fn lease_end_ms(&self) -> UnixMillis {
        self.slot.cutoff.lease_end_ms()
    }

    /// `(username, password)` for the upstream handshake.
    pub(crate) fn auth(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|c| (c.username.as_str(), c.password.expose()))
    }
}

/// One client allowed to use the gateway.
#[derive(Debug)]
pub(crate) struct ClientEntry {
    pub id: ClientId,
    /// The client's project: its project's cooldowns bind it besides the shared ones
    /// (`None` only for a project name the configuration would have refused).
    pub project: Option<ProjectId>,
    pub password_hash: SecretHash,
    pub allowed_upstreams: Vec<UpstreamId>,
    pub allowed_regions: Vec<Label>,
    pub ip_allowlist: Vec<Cidr>,
    /// An allowlist entry could not be parsed: the client is refused (fail closed).
    pub ip_allowlist_invalid: bool,
    pub policy: ClientPolicy,
    pub max_connections: u32,
    pub connections: Arc<AtomicU32>,
    /// Destination ports replacing the gateway's list for this client.
    pub allowed_ports: Option<PortSet>,
    /// Origin statuses that mean a ban, replacing the gateway's list for this client.
    pub ban_statuses: Option<crate::policy::ban_statuses::BanStatuses>,
    /// The client's default rotation (a username's `-rotate-...` overrides it).
    pub rotation: Option<proxypool_core::control::ClientRotation>,
    /// Whether its `CONNECT` tunnels are inspected.
    pub inspection: proxypool_core::control::Inspection,
    /// Names of client certificates that authenticate as it (canonical: lower case).
    pub tls_names: Vec<String>,
}

impl ClientEntry {
    pub(crate) fn ip_allowed(&self, ip: IpAddr) -> bool {
        !self.ip_allowlist_invalid
            && (self.ip_allowlist.is_empty() || self.ip_allowlist.iter().any(|c| c.contains(ip)))
    }

    pub(crate) fn upstream_allowed(&self, upstream: &UpstreamId) -> bool {
        self.allowed_upstreams.is_empty() || self.allowed_upstreams.contains(upstream)
    }

    pub(crate) fn region_allowed(&self, region: Option<&Label>) -> bool {
        self.allowed_regions.is_empty() || region.is_some_and(|r| self.allowed_regions.contains(r))
    }
}

/// An immutable snapshot with its indexes.
#[derive(Debug)]
pub(crate) struct SnapshotView {
    /// The snapshot the view shows: replaced when a delta that changes only lease ends
    /// and cooldowns is applied to the slots without a new view.
    reference: ArcSwap<SnapshotRef>,
    pub session_id: String,
    pub generated_at_ms: UnixMillis,
    pub max_staleness_ms: u64,
    /// Increases with every applied snapshot (per-connection caches key on it).
    pub generation: u64,
    /// Shared with the views built after it from deltas: an unchanged proxy is the same
    /// `Arc` in each.
    pub proxies: Vec<Arc<ViewProxy>>,
    pub limiter: Arc<ClientLimiter>,
    /// How bans grow cooldowns: the controller's `[cooldowns]`, or the default.
    pub cooldown_policy: CooldownPolicy,
    /// Client feedback on sticky sessions (`crate::routing::bans`).
    pub session_feedback: Vec<SessionFeedback>,
    /// Signs the feedback ticket of each response that names a proxy, keyed once per view
    /// (`proxypool_core::ticket`); none when the snapshot carries no key.
    pub tickets: Option<TicketSigner>,
    pub(crate) all: Vec<u32>,
    pub(crate) by_id: HashMap<ProxyId, u32>,
    pub(crate) by_upstream: HashMap<UpstreamId, Vec<u32>>,
    pub(crate) by_region: HashMap<Label, Vec<u32>>,
    pub(crate) by_carrier: HashMap<Label, Vec<u32>>,
    /// By city, state and asn (in [`GeoLabel::ALL`]'s order), keyed by the canonical text
    /// so a selector's value is looked up as a `&str`.
    by_geo: [HashMap<String, Vec<u32>>; 3],
    pub(crate) by_protocol: HashMap<Protocol, Vec<u32>>,
    /// Keyed by the id's text so a username prefix is looked up without allocating.
    clients: HashMap<String, Arc<ClientEntry>>,
    /// The latest cutoff of any proxy in the view: before it at least one proxy can be
    /// relayed through, from it none can (readiness, and refusals that say why, in one
    /// atomic load). Lowered when the store disowns proxies.
    leased_until: AtomicU64,
}

/// What the view needs besides the snapshot: counters that outlive views.
#[derive(Debug)]
pub(crate) struct ViewParts {
    /// One per snapshot proxy, in snapshot order (for a delta: one per proxy it adds or
    /// replaces, in its order).
    pub slots: Vec<Arc<ProxySlot>>,
    /// One per snapshot client, in snapshot order.
    pub connections: Vec<Arc<AtomicU32>>,
    pub limiter: Arc<ClientLimiter>,
    pub generation: u64,
}

/// [`ViewParts`] but the slots, which the proxies already hold.
struct Shared {
    connections: Vec<Arc<AtomicU32>>,
    limiter: Arc<ClientLimiter>,
    generation: u64,
}

/// What a view says besides its proxies and clients.
struct Header {
    reference: SnapshotRef,
    session_id: String,
    generated_at_ms: UnixMillis,
    max_staleness_ms: u64,
    policy: Option<CooldownPolicy>,
    session_feedback: Vec<SessionFeedback>,
    ticket_key: Option<TicketKey>,
}

/// Proxies left out of a view because they cannot be dialed as given.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub proxies: Vec<(ProxyId, String)>,
}

impl SnapshotView {
    pub(crate) fn build(snapshot: WorkerSnapshot, parts: ViewParts) -> (Self, Skipped) {
        let mut skipped = Skipped::default();
        let mut proxies = Vec::with_capacity(snapshot.proxies.len());
        let trust = UpstreamTrust::of(&snapshot.upstream_tls);
        let ViewParts {
            slots,
            connections,
            limiter,
            generation,
        } = parts;
        for (proxy, slot) in snapshot.proxies.into_iter().zip(slots) {
            match view_proxy(proxy, slot, &trust) {
                Ok(proxy) => proxies.push(Arc::new(proxy)),
                Err((id, why)) => skipped.proxies.push((id, why)),
            }
        }
        let view = SnapshotView::assemble(
            Header {
                reference: snapshot.reference,
                session_id: snapshot.session_id,
                generated_at_ms: snapshot.generated_at_ms,
                max_staleness_ms: snapshot.max_staleness_ms,
                policy: snapshot.advisories.policy,
                session_feedback: snapshot.advisories.session_feedback,
                ticket_key: snapshot.ticket_key,
            },
            proxies,
            snapshot.clients,
            Shared {
                connections,
                limiter,
                generation,
            },
        );
        (view, skipped)
    }

    /// The view after `delta`, which `content` already holds applied: the proxies it
    /// neither removes nor replaces are this view's own (the same `Arc`s), the ones it
    /// adds or replaces are built with `parts.slots` (one per `delta.upsert`, in order),
    /// and the indexes, clients and advisories are made anew. The upstreams' TLS must be
    /// unchanged (a delta that changes it gets a whole new view).
    pub(crate) fn with_delta(
        &self,
        delta: &SnapshotDelta,
        content: &SnapshotContent,
        parts: ViewParts,
    ) -> (Self, Skipped) {
        let mut skipped = Skipped::default();
        let replaced: HashSet<&ProxyId> = delta
            .remove
            .iter()
            .chain(delta.upsert.iter().map(|p| &p.id))
            .collect();
        let mut proxies: Vec<Arc<ViewProxy>> = self
            .proxies
            .iter()
            .filter(|p| !replaced.contains(&p.id))
            .cloned()
            .collect();
        let trust = UpstreamTrust::of(content.upstream_tls());
        let ViewParts {
            slots,
            connections,
            limiter,
            generation,
        } = parts;
        for (proxy, slot) in delta.upsert.iter().cloned().zip(slots) {
            match view_proxy(proxy, slot, &trust) {
                Ok(proxy) => proxies.push(Arc::new(proxy)),
                Err((id, why)) => skipped.proxies.push((id, why)),
            }
        }
        let view = SnapshotView::assemble(
            Header {
                reference: delta.reference.clone(),
                session_id: delta.session_id.clone(),
                generated_at_ms: delta.generated_at_ms,
                max_staleness_ms: delta.max_staleness_ms,
                policy: content.policy().copied(),
                session_feedback: content.session_feedback().to_vec(),
                ticket_key: content.ticket_key().cloned(),
            },
            proxies,
            content.clients().to_vec(),
            Shared {
                connections,
                limiter,
                generation,
            },
        );
        (view, skipped)
    }

    /// A view of these proxies and clients, indexed.
    fn assemble(
        header: Header,
        proxies: Vec<Arc<ViewProxy>>,
        clients: Vec<GatewayClient>,
        parts: Shared,
    ) -> Self {
        let mut view = SnapshotView {
            reference: ArcSwap::from_pointee(header.reference),
            session_id: header.session_id,
            generated_at_ms: header.generated_at_ms,
            max_staleness_ms: header.max_staleness_ms,
            generation: parts.generation,
            all: (0..proxies.len() as u32).collect(),
            by_id: HashMap::with_capacity(proxies.len()),
            by_upstream: HashMap::new(),
            by_region: HashMap::new(),
            by_carrier: HashMap::new(),
            by_geo: Default::default(),
            by_protocol: HashMap::new(),
            clients: HashMap::with_capacity(clients.len()),
            limiter: Arc::clone(&parts.limiter),
            cooldown_policy: header
                .policy
                .unwrap_or_else(|| proxypool_config::CooldownsConfig::default().policy()),
            session_feedback: header.session_feedback,
            tickets: header.ticket_key.as_ref().map(TicketKey::signer),
            leased_until: AtomicU64::new(0),
            proxies,
        };
        view.refresh_leases();
        for (index, proxy) in view.proxies.iter().enumerate() {
            let index = index as u32;
            view.by_id.insert(proxy.id.clone(), index);
            push(&mut view.by_upstream, proxy.upstream.clone(), index);
            push(&mut view.by_protocol, proxy.protocol, index);
            if let Some(region) = &proxy.region {
                push(&mut view.by_region, region.clone(), index);
            }
            if let Some(carrier) = &proxy.carrier {
                push(&mut view.by_carrier, carrier.clone(), index);
            }
            for (label, by) in GeoLabel::ALL.into_iter().zip(&mut view.by_geo) {
                if let Some(value) = proxy.geo.get(label) {
                    push(by, value.to_owned(), index);
                }
            }
        }
        for (client, connections) in clients.into_iter().zip(parts.connections) {
            let entry = client_entry(client, connections, &parts.limiter);
            view.clients
                .insert(entry.id.as_str().to_owned(), Arc::new(entry));
        }
        view
    }

    /// The snapshot (version, epoch, checksum) the view shows now.
    pub(crate) fn reference(&self) -> Arc<SnapshotRef> {
        self.reference.load_full()
    }

    pub(crate) fn set_reference(&self, reference: SnapshotRef) {
        self.reference.store(Arc::new(reference));
    }

    /// The client named `id`.
    pub(crate) fn client(&self, id: &str) -> Option<&Arc<ClientEntry>> {
        self.clients.get(id)
    }

    /// Whether `id` names a client (for the username split).
    pub(crate) fn has_client(&self, id: &str) -> bool {
        self.client(id).is_some()
    }

    /// Every client, in no particular order.
    pub(crate) fn clients(&self) -> impl Iterator<Item = &Arc<ClientEntry>> {
        self.clients.values()
    }

    /// The proxies whose `label` is `value` (canonical).
    pub(crate) fn with_geo(&self, label: GeoLabel, value: &str) -> &[u32] {
        let at = match label {
            GeoLabel::City => 0,
            GeoLabel::State => 1,
            GeoLabel::Asn => 2,
        };
        self.by_geo[at].get(value).map_or(&[], Vec::as_slice)
    }

    pub(crate) fn index_of(&self, id: &ProxyId) -> Option<u32> {
        self.by_id.get(id).copied()
    }

    pub(crate) fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// The latest cutoff of any proxy in the view (wall clock): the lease ends, bounded by
    /// the session's end and less the skew margin. From it on, no proxy of the view is used.
    pub(crate) fn leased_until_ms(&self) -> UnixMillis {
        self.leased_until.load(Ordering::Acquire)
    }

    /// Whether any proxy of the view can be relayed through at `now_ms`.
    pub(crate) fn has_lease(&self, now_ms: UnixMillis) -> bool {
        now_ms < self.leased_until.load(Ordering::Acquire)
    }

    /// Recomputes the latest cutoff from the proxies' slots (after the view is built and
    /// after a revocation; off the hot path).
    pub(crate) fn refresh_leases(&self) {
        let latest = self
            .proxies
            .iter()
            .map(|p| p.slot.cutoff.until_ms())
            .max()
            .unwrap_or(0);
        self.leased_until.store(latest, Ordering::Release);
    }
}

fn push<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Vec<u32>>, key: K, index: u32) {
    map.entry(key).or_default().push(index);
}

fn view_proxy(
    proxy: SnapshotProxy,
    slot: Arc<ProxySlot>,
    trust: &UpstreamTrust,
) -> Result<ViewProxy, (ProxyId, String)> {
    let address = TargetAddr::domain(proxy.host.clone(), proxy.port)
        .map_err(|error| (proxy.id.clone(), error.to_string()))?;
    let tls = match proxy.protocol {
        Protocol::Https => Some(
            trust
                .for_proxy(&proxy.upstream, &proxy.host)
                .map_err(|why| (proxy.id.clone(), why))?,
        ),
        Protocol::Http | Protocol::Socks5 => None,
    };
    let basic_header = match &proxy.credentials {
        Some(credentials) => {
            let value = proxypool_proto::http_connect::basic_auth_value(
                &credentials.username,
                credentials.password.expose(),
            );
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| (proxy.id.clone(), "credentials do not fit a header".into()))?;
            value.set_sensitive(true);
            Some(value)
        }
        None => None,
    };
    // A proxy id is 32 hex digits: always a valid header value.
    let id_header =
        HeaderValue::from_maybe_shared(bytes::Bytes::from(proxy.id.as_str().to_owned()))
            .map_err(|_| (proxy.id.clone(), "its id does not fit a header".into()))?;
    Ok(ViewProxy {
        refuse_internal: trust.refuses_internal(&proxy.upstream),
        id_header,
        id: proxy.id,
        protocol: proxy.protocol,
        address,
        credentials: proxy.credentials,
        basic_header,
        upstream: proxy.upstream,
        region: proxy.region,
        carrier: proxy.carrier,
        geo: proxy.geo,
        max_sessions: proxy.max_sessions,
        tls,
        slot,
    })
}

fn client_entry(
    client: GatewayClient,
    connections: Arc<AtomicU32>,
    limiter: &ClientLimiter,
) -> ClientEntry {
    let parsed: Result<Vec<Cidr>, String> =
        client.ip_allowlist.iter().map(|c| Cidr::parse(c)).collect();
    let (ip_allowlist, ip_allowlist_invalid) = match parsed {
        Ok(list) => (list, false),
        Err(error) => {
            tracing::warn!(client = %client.id, %error, "client ip_allowlist is invalid; refusing the client");
            (Vec::new(), true)
        }
    };
    ClientEntry {
        policy: limiter.policy_of(&client.id),
        project: ProjectId::new(&client.project).ok(),
        id: client.id,
        password_hash: client.password_hash,
        allowed_upstreams: client.allowed_upstreams,
        allowed_regions: client.allowed_regions,
        ip_allowlist,
        ip_allowlist_invalid,
        max_connections: client.max_connections,
        connections,
        allowed_ports: client.allowed_ports,
        ban_statuses: client
            .ban_statuses
            .as_deref()
            .map(crate::policy::ban_statuses::BanStatuses::of),
        rotation: client.rotation,
        inspection: client.inspection,
        tls_names: client.tls_names,
    }
}

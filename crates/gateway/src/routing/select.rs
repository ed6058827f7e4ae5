//! Picking an upstream proxy from the local view: candidate sets from the selector
//! indexes, eligibility (lease, `usable_until`, capacity, failure cooldown, cooldown for
//! the target's domain) and the
//! rotation strategies. A pick reserves a slot in the same step, so two requests can never
//! both take a proxy's last free session.

use crate::config::Rotation;
use crate::proxies::capacity::Reservation;
use crate::proxies::cooldowns::TargetDomain;
use crate::routing::selector::Selectors;
use crate::snapshot::{ClientEntry, SnapshotView, ViewProxy};
use proxypool_core::{Domain, GeoLabel, ProjectId};
use smallvec::{SmallVec, smallvec};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// Everything a pick needs to know about "now", failures and the target.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Eligibility<'a> {
    /// Wall clock, for leases, `usable_until` and domain cooldowns.
    pub now_ms: u64,
    /// Gateway monotonic clock, for failure cooldowns.
    pub mono_ms: u64,
    pub failure_threshold: u32,
    pub failure_cooldown_ms: u64,
    /// The target's registrable domain: a proxy cooling down for it is not eligible.
    pub domain: Option<&'a TargetDomain<'a>>,
    /// The requesting client's project: its cooldowns count besides the shared ones.
    pub project: Option<&'a ProjectId>,
    /// Counts the candidates passed over for `domain`.
    pub cooldown_skips: Option<&'a metrics::Counter>,
}

impl Eligibility<'_> {
    /// Whether `proxy` cools down for the target's domain (counted when it does).
    fn domain_cooling(&self, proxy: &ViewProxy) -> bool {
        let Some(domain) = self.domain else {
            return false;
        };
        let cooling = proxy
            .slot
            .domains
            .is_cooling(domain, self.project, self.now_ms);
        if cooling && let Some(skips) = self.cooldown_skips {
            skips.increment(1);
        }
        cooling
    }
}

/// A chosen proxy (index into the view) with its reserved slot.
#[derive(Debug)]
pub(crate) struct Pick {
    pub index: u32,
    pub reservation: Reservation,
}

/// The rotation strategy, its random state and the round-robin cursor.
#[derive(Debug)]
pub(crate) struct Picker {
    // A reload may change the strategy between picks.
    rotation: AtomicU8,
    random: AtomicU64,
    /// Where round-robin goes on. It lives here, not in the view: snapshots come every few
    /// seconds (each lease renewal), and a cursor that started again at every swap would
    /// pick the same first proxies of every view and never reach the last ones.
    cursor: AtomicUsize,
}

impl Picker {
    pub(crate) fn set_rotation(&self, rotation: Rotation) {
        self.rotation
            .store(rotation_code(rotation), Ordering::Relaxed);
    }

    fn rotation(&self) -> Rotation {
        match self.rotation.load(Ordering::Relaxed) {
            1 => Rotation::LeastConnections,
            2 => Rotation::Random,
            3 => Rotation::LeastUsed,
            _ => Rotation::RoundRobin,
        }
    }

    pub(crate) fn new(rotation: Rotation, seed: u64) -> Self {
        Self {
            rotation: AtomicU8::new(rotation_code(rotation)),
            random: AtomicU64::new(seed | 1),
            cursor: AtomicUsize::new(0),
        }
    }

    /// Picks and reserves an eligible proxy matching the client and selectors, skipping
    /// indexes in `tried`, by `rotation` (a request's own) or else the configured one.
    pub(crate) fn pick(
        &self,
        view: &SnapshotView,
        client: &ClientEntry,
        selectors: &Selectors,
        tried: &[u32],
        when: Eligibility<'_>,
        rotation: Option<Rotation>,
    ) -> Option<Pick> {
        let sources = candidate_sources(view, client, selectors);
        let total: usize = sources.iter().map(|s| s.len()).sum();
        if total == 0 {
            return None;
        }
        let usable = |index: u32| {
            !tried.contains(&index) && {
                let proxy = &view.proxies[index as usize];
                matches(proxy, client, selectors) && available(proxy, when)
            }
        };
        let rotation = rotation.unwrap_or_else(|| self.rotation());
        match rotation {
            Rotation::RoundRobin => {
                let start = self.cursor.fetch_add(1, Ordering::Relaxed) % total;
                first_fit(view, &sources, total, start, usable)
            }
            Rotation::Random => {
                let start = (self.next_random() % total as u64) as usize;
                first_fit(view, &sources, total, start, usable)
            }
            Rotation::LeastConnections | Rotation::LeastUsed => {
                // Rotate the scan start so ties spread instead of piling on the first.
                let start = self.cursor.fetch_add(1, Ordering::Relaxed) % total;
                for _ in 0..3 {
                    let best = (0..total)
                        .map(|step| nth(&sources, (start + step) % total))
                        .filter(|index| usable(*index))
                        .min_by_key(|index| {
                            least_key(rotation, &view.proxies[*index as usize], when.mono_ms)
                        })?;
                    if let Some(pick) = reserve(view, best) {
                        return Some(pick);
                    }
                }
                first_fit(view, &sources, total, start, usable)
            }
        }
    }

    /// Reserves exactly the proxy at `index` if it is still usable (sticky sessions).
    pub(crate) fn pick_exact(
        &self,
        view: &SnapshotView,
        client: &ClientEntry,
        selectors: &Selectors,
        index: u32,
        when: Eligibility<'_>,
    ) -> Option<Pick> {
        let proxy = view.proxies.get(index as usize)?;
        if matches(proxy, client, selectors) && available(proxy, when) {
            reserve(view, index)
        } else {
            None
        }
    }

    /// After a pick found nothing: whether that is for want of leases rather than for the
    /// selectors. True when no proxy of the view has a live lease, or when proxies match
    /// the client and selectors but none of them has one. Only refusals pay for the scan.
    pub(crate) fn lease_miss(
        &self,
        view: &SnapshotView,
        client: &ClientEntry,
        selectors: &Selectors,
        now_ms: u64,
    ) -> bool {
        if !view.has_lease(now_ms) {
            return true;
        }
        let mut matched = false;
        for index in candidate_sources(view, client, selectors)
            .into_iter()
            .flatten()
        {
            let proxy = &view.proxies[*index as usize];
            if matches(proxy, client, selectors) {
                if proxy.is_live(now_ms) {
                    return false;
                }
                matched = true;
            }
        }
        matched
    }

    /// After a pick found nothing: whether that is because every proxy the request could use
    /// (matching, leased) cools down for `domain`. Then the milliseconds until the first of
    /// those cooldowns ends; `None` when some such proxy does not cool down for it (the
    /// miss is about capacity or failures) or none matches. Only refusals pay for the scan.
    pub(crate) fn domain_miss(
        &self,
        view: &SnapshotView,
        client: &ClientEntry,
        selectors: &Selectors,
        domain: &Domain,
        now_ms: u64,
    ) -> Option<u64> {
        let mut first_end: Option<u64> = None;
        for index in candidate_sources(view, client, selectors)
            .into_iter()
            .flatten()
        {
            let proxy = &view.proxies[*index as usize];
            if !matches(proxy, client, selectors) || !proxy.is_live(now_ms) {
                continue;
            }
            // The proxy is free for the client once the last cooldown binding it ends.
            let ends = proxy
                .slot
                .domains
                .cooling(now_ms)
                .into_iter()
                .filter(|e| &e.domain == domain && e.binds(client.project.as_ref()))
                .map(|e| e.until_ms - now_ms)
                .max();
            match ends {
                Some(ms) => first_end = Some(first_end.map_or(ms, |f| f.min(ms))),
                None => return None,
            }
        }
        first_end
    }

    /// After a pick found nothing: whether a proxy the request could use (matching, leased,
    /// not cooling down for the target's domain) is at its `max_sessions`, so waiting for a
    /// slot can help.
    /// Only refusals pay for the scan.
    pub(crate) fn capacity_full(
        &self,
        view: &SnapshotView,
        client: &ClientEntry,
        selectors: &Selectors,
        when: Eligibility<'_>,
    ) -> bool {
        candidate_sources(view, client, selectors)
            .into_iter()
            .flatten()
            .any(|index| {
                let proxy = &view.proxies[*index as usize];
                matches(proxy, client, selectors)
                    && proxy.is_live(when.now_ms)
                    && proxy.slot.load().total() >= u64::from(proxy.max_sessions)
                    && !when.domain.is_some_and(|d| {
                        proxy.slot.domains.is_cooling(d, when.project, when.now_ms)
                    })
            })
    }

    /// xorshift64*: cheap, lock-free, good enough to spread load.
    fn next_random(&self) -> u64 {
        let mut x = self.random.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn first_fit(
    view: &SnapshotView,
    sources: &[&[u32]],
    total: usize,
    start: usize,
    usable: impl Fn(u32) -> bool,
) -> Option<Pick> {
    (0..total)
        .map(|step| nth(sources, (start + step) % total))
        .filter(|index| usable(*index))
        .find_map(|index| reserve(view, index))
}

fn reserve(view: &SnapshotView, index: u32) -> Option<Pick> {
    let proxy = &view.proxies[index as usize];
    proxy
        .slot
        .try_reserve(proxy.max_sessions)
        .map(|reservation| Pick { index, reservation })
}

/// The `n`th index across the concatenated sources.
fn nth(sources: &[&[u32]], mut n: usize) -> u32 {
    for source in sources {
        if n < source.len() {
            return source[n];
        }
        n -= source.len();
    }
    unreachable!("n is below the total length")
}

/// Lease (its cutoff), free capacity and no failure cooldown.
fn available(proxy: &ViewProxy, when: Eligibility<'_>) -> bool {
    proxy.is_live(when.now_ms)
        && proxy.slot.load().total() < u64::from(proxy.max_sessions)
        && !proxy.slot.is_cooling_down(
            when.failure_threshold,
            when.failure_cooldown_ms,
            when.mono_ms,
        )
        && !when.domain_cooling(proxy)
}

/// Whether the proxy satisfies the selectors and the client's restrictions.
pub(crate) fn matches(proxy: &ViewProxy, client: &ClientEntry, selectors: &Selectors) -> bool {
    selectors
        .upstream
        .as_ref()
        .is_none_or(|u| *u == proxy.upstream)
        && selectors
            .region
            .as_ref()
            .is_none_or(|r| proxy.region.as_ref() == Some(r))
        && selectors
            .carrier
            .as_ref()
            .is_none_or(|c| proxy.carrier.as_ref() == Some(c))
        && proxy.geo.covers(&selectors.geo)
        && selectors.protocol.is_none_or(|p| p == proxy.protocol)
        && client.upstream_allowed(&proxy.upstream)
        && client.region_allowed(proxy.region.as_ref())
}

/// The index lists a pick reads (one, unless an allowed list names several).
type Sources<'v> = SmallVec<[&'v [u32]; 2]>;

/// The smallest index family that covers every match: each selector (or the client's
/// allowed list) names a set of index lists; the one with the fewest entries drives.
fn candidate_sources<'v>(
    view: &'v SnapshotView,
    client: &ClientEntry,
    selectors: &Selectors,
) -> Sources<'v> {
    if !selectors.has_filters()
        && client.allowed_upstreams.is_empty()
        && client.allowed_regions.is_empty()
    {
        // The common case: no filter at all, one source, nothing allocated.
        return smallvec![view.all.as_slice()];
    }
    let mut families: Vec<Sources<'v>> = vec![smallvec![view.all.as_slice()]];
    let single = |list: Option<&'v Vec<u32>>| smallvec![list.map_or(&[][..], Vec::as_slice)];
    if let Some(upstream) = &selectors.upstream {
        families.push(single(view.by_upstream.get(upstream)));
    } else if !client.allowed_upstreams.is_empty() {
        families.push(
            client
                .allowed_upstreams
                .iter()
                .filter_map(|k| view.by_upstream.get(k).map(Vec::as_slice))
                .collect(),
        );
    }
    if let Some(region) = &selectors.region {
        families.push(single(view.by_region.get(region)));
    } else if !client.allowed_regions.is_empty() {
        families.push(
            client
                .allowed_regions
                .iter()
                .filter_map(|k| view.by_region.get(k).map(Vec::as_slice))
                .collect(),
        );
    }
    if let Some(carrier) = &selectors.carrier {
        families.push(single(view.by_carrier.get(carrier)));
    }
    for label in GeoLabel::ALL {
        if let Some(value) = selectors.geo.get(label) {
            families.push(smallvec![view.with_geo(label, value)]);
        }
    }
    if let Some(protocol) = &selectors.protocol {
        families.push(single(view.by_protocol.get(protocol)));
    }
    families
        .into_iter()
        .min_by_key(|family| family.iter().map(|list| list.len()).sum::<usize>())
        .unwrap_or_default()
}

/// Open uses, or for least-used open uses and recent requests together.
fn least_key(rotation: Rotation, proxy: &ViewProxy, mono_ms: u64) -> u64 {
    match rotation {
        Rotation::LeastUsed => proxy.slot.usage_score(mono_ms),
        _ => proxy.slot.load().total(),
    }
}

fn rotation_code(rotation: Rotation) -> u8 {
    match rotation {
        Rotation::RoundRobin => 0,
        Rotation::LeastConnections => 1,
        Rotation::Random => 2,
        Rotation::LeastUsed => 3,
    }
}

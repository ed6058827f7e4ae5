//! The controller's loop tuning: `[snapshot]` (how workers receive snapshots and keep
//! sessions), `[ownership]` (leases to workers), `[checker]`, `[cooldowns]` and
//! `[maintenance]`, each with its checks. The rule that spans these and `[store]` (a
//! standby must renew leases in time after a leader failover) is in [`crate::timing`].

use crate::check::Check;
use crate::duration::Millis;
use serde::{Deserialize, Serialize};

/// How workers receive snapshots and keep their sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SnapshotConfig {
    /// Longest a snapshot long-poll waits before answering 204.
    pub long_poll_wait: Millis,
    /// A worker stops taking new traffic when its snapshot is this old and the controller
    /// cannot be reached.
    pub max_staleness: Millis,
    /// A session lapses this long after its last registration or accepted report.
    pub session_ttl: Millis,
    /// How often workers should report their runtime (must be well under `session_ttl`).
    pub report_interval: Millis,
    /// Most proxies one snapshot lists.
    pub max_proxies: usize,
    /// How often waiting long-polls look for changes made elsewhere (lease renewals by
    /// another controller, health changes, expiry): one read of the worker's snapshot
    /// version, and a rebuild only when it moved or something listed ran out.
    pub poll_interval: Millis,
    /// How often a session's snapshot is read whole from the store although the store's
    /// change journal could say what changed. What goes to the gateway is still only the
    /// difference; the whole read makes sure the issued content never drifts from the store.
    pub full_read_interval: Millis,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig {
            long_poll_wait: Millis::from_secs(25),
            max_staleness: Millis::from_secs(60),
            session_ttl: Millis::from_secs(30),
            report_interval: Millis::from_secs(5),
            max_proxies: 10_000,
            poll_interval: Millis(1_000),
            full_read_interval: Millis::from_secs(300),
        }
    }
}

/// How proxies are leased to gateway workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OwnershipConfig {
    /// Length of one lease (cut at the proxy's `usable_until`).
    pub lease: Millis,
    /// Leases closer than this to their end are renewed.
    pub renew_before: Millis,
    /// Most proxies one worker owns (unset: [`DEFAULT_PER_WORKER_TARGET`]). Whether it was
    /// set matters: see `extraction_share`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_worker_target: Option<usize>,
    /// The fraction (0 to 1) of the usable proxies that gateways leave unowned for
    /// extraction: the gateways' serving leases plus the unowned usable proxies one round
    /// reads (at most `assign_batch`) are the usable ones, and no new lease is made that
    /// would leave fewer than this fraction of them (rounded up) unowned. It holds
    /// together with `per_worker_target`: a worker gets at most that many, and all workers
    /// together at most the rest of the share. It only limits new leases: proxies a
    /// gateway holds are not taken back when extraction uses up its part, so a busy
    /// extraction client cannot empty the gateways.
    ///
    /// Unset, it depends on the process: with a gateway in the same process (`serve`) it
    /// is [`IN_PROCESS_EXTRACTION_SHARE`], unless `per_worker_target` is set, in which case
    /// it is 0 and that number alone decides, as it did before the share existed; for a
    /// controller of split gateways it is 0 (the loader resolves it for the role that runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extraction_share: Option<f64>,
    /// How often the manager runs.
    pub interval: Millis,
    /// Most lapsed assignments released per expiry call.
    pub expire_batch: usize,
    /// Most new assignments per round, so one round stays short.
    pub assign_batch: usize,
}

impl Default for OwnershipConfig {
    fn default() -> Self {
        OwnershipConfig {
            lease: Millis::from_secs(30),
            renew_before: Millis::from_secs(20),
            per_worker_target: None,
            extraction_share: None,
            interval: Millis(1_000),
            expire_batch: 256,
            assign_batch: 1_000,
        }
    }
}

/// What `per_worker_target` is when the file does not set it.
pub const DEFAULT_PER_WORKER_TARGET: usize = 500;

/// The share of the usable proxies a `serve` process keeps for extraction when the file
/// sets neither `extraction_share` nor `per_worker_target`: half, as `dev` does, so the
/// one gateway cannot lease every proxy away from the client API.
pub const IN_PROCESS_EXTRACTION_SHARE: f64 = 0.5;

impl OwnershipConfig {
    /// Most proxies one worker owns.
    pub fn worker_target(&self) -> usize {
        self.per_worker_target.unwrap_or(DEFAULT_PER_WORKER_TARGET)
    }

    /// The share of the usable proxies kept unowned for extraction (0 when unset: the
    /// loader has already put in the in-process default where it applies).
    pub fn share_for_extraction(&self) -> f64 {
        self.extraction_share.unwrap_or(0.0)
    }
}

/// Puts in the role's default of `extraction_share` when the file sets neither it nor
/// `per_worker_target` and a gateway runs in the controller's process: that gateway would
/// otherwise lease up to 500 proxies, which is every proxy of most pools, and extraction
/// would answer with none. A split controller keeps 0 (see `docs/design/controller.md`).
pub(crate) fn resolve_extraction_share(o: &mut OwnershipConfig, in_process_gateway: bool) {
    if in_process_gateway && o.extraction_share.is_none() && o.per_worker_target.is_none() {
        o.extraction_share = Some(IN_PROCESS_EXTRACTION_SHARE);
    }
}

/// The health checker's global limits (targets are per upstream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckerConfig {
    /// Checks in flight at once.
    pub concurrency: usize,
    /// Time for one whole check of one proxy (connect, handshake, every target).
    pub timeout: Millis,
    /// Pause between rounds when nothing is due.
    pub interval: Millis,
    /// Most proxies taken per round.
    pub round_size: usize,
    /// Results written to the store per batch.
    pub write_batch: usize,
}

impl Default for CheckerConfig {
    fn default() -> Self {
        CheckerConfig {
            concurrency: 64,
            timeout: Millis::from_secs(5),
            interval: Millis(500),
            round_size: 256,
            write_batch: 64,
        }
    }
}

/// `[cooldowns]`: how long a proxy is kept off a domain that banned it. The controller
/// ships it to every gateway in their snapshots and the client API applies it to clients'
/// feedback, so the whole cluster grows cooldowns the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CooldownsConfig {
    /// The first ban's cooldown; each further ban in a row doubles it.
    pub base: Millis,
    /// The longest cooldown.
    pub cap: Millis,
    /// How long past a cooldown's end its strikes are remembered, so a ban soon after it
    /// ended grows the next cooldown instead of starting over.
    pub memory: Millis,
    /// `POST /v1/feedback` calls one client may make per minute, on a bucket of its own
    /// (independent of its extraction quota and rate-limit policy): a client flooding
    /// reports is refused with 429 before it touches a store.
    pub feedback_per_minute: u32,
    /// How many feedback calls one client may make at once before the rate applies.
    pub feedback_burst: u32,
}

/// Most `feedback_per_minute` and `feedback_burst` (a report per millisecond is no one's).
pub const MAX_FEEDBACK_RATE: u32 = 60_000;

impl Default for CooldownsConfig {
    fn default() -> Self {
        CooldownsConfig {
            base: Millis::from_secs(60),
            cap: Millis::from_secs(3_600),
            memory: Millis::from_secs(3_600),
            feedback_per_minute: 60,
            feedback_burst: 20,
        }
    }
}

impl CooldownsConfig {
    pub fn policy(&self) -> proxypool_core::CooldownPolicy {
        proxypool_core::CooldownPolicy {
            base_ms: self.base.0,
            cap_ms: self.cap.0,
            memory_ms: self.memory.0,
        }
    }
}

/// The background sweep of expired state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaintenanceConfig {
    pub interval: Millis,
    /// Most items of each kind removed per sweep call.
    pub batch: usize,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        MaintenanceConfig {
            interval: Millis::from_secs(5),
            batch: 1_000,
        }
    }
}

/// Checks `[cooldowns]`.
pub(crate) fn validate_cooldowns(c: &mut Check<'_>, cooldowns: &CooldownsConfig) {
    let day = Millis(proxypool_core::cooldown::MAX_COOLDOWN_MS);
    c.duration("cooldowns.cap", cooldowns.cap, Millis::from_secs(1), day);
    c.duration(
        "cooldowns.base",
        cooldowns.base,
        Millis::from_secs(1),
        cooldowns.cap.max(Millis::from_secs(1)),
    );
    c.duration("cooldowns.memory", cooldowns.memory, Millis(0), day);
    let rate = format!("must be between 1 and {MAX_FEEDBACK_RATE}");
    c.require(
        (1..=MAX_FEEDBACK_RATE).contains(&cooldowns.feedback_per_minute),
        "cooldowns.feedback_per_minute",
        &rate,
    );
    c.require(
        (1..=MAX_FEEDBACK_RATE).contains(&cooldowns.feedback_burst),
        "cooldowns.feedback_burst",
        &rate,
    );
}

/// Checks `[snapshot]`.
pub(crate) fn validate_snapshot(c: &mut Check<'_>, s: &SnapshotConfig) {
    c.duration(
        "snapshot.full_read_interval",
        s.full_read_interval,
        Millis::from_secs(1),
        Millis::from_secs(86_400),
    );
    c.duration(
        "snapshot.long_poll_wait",
        s.long_poll_wait,
        Millis(0),
        Millis::from_secs(300),
    );
    c.duration(
        "snapshot.max_staleness",
        s.max_staleness,
        Millis::from_secs(1),
        Millis::from_secs(3600),
    );
    c.duration(
        "snapshot.session_ttl",
        s.session_ttl,
        Millis::from_secs(1),
        Millis::from_secs(3600),
    );
    c.duration(
        "snapshot.poll_interval",
        s.poll_interval,
        Millis(10),
        Millis::from_secs(60),
    );
    c.require(
        s.report_interval.0 >= 10 && s.report_interval.0 * 2 <= s.session_ttl.0,
        "snapshot.report_interval",
        "must be at least 10ms and at most half of snapshot.session_ttl, so one lost report does not end a session",
    );
    c.require(
        (1..=100_000).contains(&s.max_proxies),
        "snapshot.max_proxies",
        "must be between 1 and 100000",
    );
}

/// Checks `[ownership]`; `failover` is the finding of the rule across sections
/// ([`crate::timing::failover_problem`]), reported with `renew_before`'s own.
pub(crate) fn validate_ownership(c: &mut Check<'_>, o: &OwnershipConfig, failover: Option<String>) {
    c.duration(
        "ownership.lease",
        o.lease,
        Millis(100),
        Millis::from_secs(3600),
    );
    c.require(
        o.renew_before > o.interval && o.renew_before.0.saturating_add(o.interval.0) < o.lease.0,
        "ownership.renew_before",
        "must be longer than ownership.interval (or leases lapse between rounds) and shorter than ownership.lease by more than ownership.interval (or every round renews every lease)",
    );
    if let Some(message) = failover {
        c.at("ownership.renew_before", message);
    }
    c.duration(
        "ownership.interval",
        o.interval,
        Millis(10),
        Millis::from_secs(60),
    );
    c.require(
        o.per_worker_target.is_none_or(|n| n >= 1),
        "ownership.per_worker_target",
        "must be at least 1",
    );
    c.require(
        o.extraction_share
            .is_none_or(|s| s.is_finite() && (0.0..=1.0).contains(&s)),
        "ownership.extraction_share",
        "must be a fraction from 0 (gateways may lease every proxy) to 1 (they lease none)",
    );
    c.require(
        (1..=10_000).contains(&o.expire_batch),
        "ownership.expire_batch",
        "must be between 1 and 10000",
    );
    c.require(
        o.assign_batch >= 1,
        "ownership.assign_batch",
        "must be at least 1",
    );
}

/// Checks `[checker]`.
pub(crate) fn validate_checker(c: &mut Check<'_>, k: &CheckerConfig) {
    c.require(
        (1..=10_000).contains(&k.concurrency),
        "checker.concurrency",
        "must be between 1 and 10000",
    );
    c.duration(
        "checker.timeout",
        k.timeout,
        Millis(1),
        Millis::from_secs(120),
    );
    c.duration(
        "checker.interval",
        k.interval,
        Millis(10),
        Millis::from_secs(600),
    );
    c.require(
        k.round_size >= 1,
        "checker.round_size",
        "must be at least 1",
    );
    c.require(
        (1..=proxypool_core::health::MAX_HEALTH_BATCH).contains(&k.write_batch),
        "checker.write_batch",
        "must be between 1 and 10000",
    );
}

/// Checks `[maintenance]`.
pub(crate) fn validate_maintenance(c: &mut Check<'_>, m: &MaintenanceConfig) {
    c.duration(
        "maintenance.interval",
        m.interval,
        Millis(10),
        Millis::from_secs(3600),
    );
    c.require(m.batch >= 1, "maintenance.batch", "must be at least 1");
}

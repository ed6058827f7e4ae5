//! Report types: what a limiter has seen and who is pressing on it, as aligned text for
//! humans ([`EngineReport::to_text`]) and as JSON through serde for tools.

use crate::options::EngineOptions;
use crate::text_table::{field, render};
use serde::Serialize;

/// Decision and eviction counters since the engine was created.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Checks answered (all outcomes).
    pub checks: u64,
    /// Checks admitted.
    pub allowed: u64,
    /// Checks denied because the bucket was empty.
    pub soft_throttled: u64,
    /// Checks denied by a lockout (including the denial that started it).
    pub hard_locked: u64,
    /// New keys denied because `max_tracked` keys were already tracked.
    pub rejected_at_cap: u64,
    /// Keys evicted for being idle past `stale_after`.
    pub evicted_stale: u64,
    /// Keys evicted as least recently seen to make room.
    pub evicted_lru: u64,
}

impl Counters {
    /// All keys evicted, for whatever reason.
    pub fn evicted(&self) -> u64 {
        self.evicted_stale + self.evicted_lru
    }
}

/// One configured scope and how many keys it holds now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScopeReport {
    /// `global`, `policy:ID` or `op:NAME`.
    pub name: String,
    /// Sustained rate.
    pub requests_per_second: f64,
    /// Bucket capacity.
    pub burst: f64,
    /// Lockout length.
    pub hard_lockout_ms: u64,
    /// Soft violations before a lockout.
    pub max_soft_violations: u16,
    /// Keys of this scope tracked now.
    pub tracked_keys: usize,
}

/// One key under pressure: locked out, or short of tokens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyPressure {
    /// The key's scope.
    pub scope: String,
    /// The client address (with prefix when aggregated).
    pub client: String,
    /// Whether the key is locked out now.
    pub locked: bool,
    /// Time left in the lockout.
    pub lockout_remaining_ms: u64,
    /// Balance now, in tokens.
    pub tokens: f64,
    /// Capacity minus balance, in tokens.
    pub deficit: f64,
    /// Soft violations counted towards the next lockout.
    pub soft_violations: u16,
    /// Time since the key's state last changed: its last check, or for a locked key the
    /// start of its lockout (a locked key's state is frozen).
    pub idle_ms: u64,
}

/// Everything an engine can tell about itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineReport {
    /// Wall-clock time of the report, for correlating with logs.
    pub generated_at_unix_ms: u64,
    /// The engine clock's reading, in ms since its origin.
    pub clock_ms: u64,
    /// The options the engine runs with.
    pub options: EngineOptions,
    /// Configured scopes.
    pub scopes: Vec<ScopeReport>,
    /// Counters since creation.
    pub counters: Counters,
    /// Keys tracked now.
    pub tracked_keys: usize,
    /// Most keys ever tracked at once.
    pub peak_tracked: usize,
    /// Keys locked out now.
    pub hard_blocked: usize,
    /// The keys under most pressure: locked first (longest remaining lockout first), then
    /// largest deficit.
    pub top_keys: Vec<KeyPressure>,
}

impl EngineReport {
    /// A human-readable, aligned rendering.
    pub fn to_text(&self) -> String {
        const WIDTH: usize = 24;
        let o = &self.options;
        let mut out = String::from("--- Throttle engine report ---\n");
        field(
            &mut out,
            WIDTH,
            "Generated (unix ms)",
            self.generated_at_unix_ms,
        );
        field(&mut out, WIDTH, "Clock (ms)", self.clock_ms);
        field(&mut out, WIDTH, "Token scale", o.token_scale);
        field(&mut out, WIDTH, "Shards", o.shard_count);
        field(
            &mut out,
            WIDTH,
            "Soft window (ms)",
            o.soft_violation_window.as_millis(),
        );
        field(&mut out, WIDTH, "Default max soft", o.max_soft_violations);
        field(
            &mut out,
            WIDTH,
            "Default lockout (ms)",
            o.hard_lockout.as_millis(),
        );
        field(
            &mut out,
            WIDTH,
            "Stale after (ms)",
            o.stale_after.as_millis(),
        );
        field(
            &mut out,
            WIDTH,
            "Cap retry after (ms)",
            o.cap_retry_after.as_millis(),
        );
        field(
            &mut out,
            WIDTH,
            "Initial tokens",
            format!("{:?}", o.initial_tokens),
        );
        field(
            &mut out,
            WIDTH,
            "Address prefixes",
            format!(
                "IPv4 /{}, IPv6 /{}",
                o.aggregation.ipv4_prefix, o.aggregation.ipv6_prefix
            ),
        );
        field(&mut out, WIDTH, "Tracked keys", self.tracked_keys);
        field(&mut out, WIDTH, "Max tracked", o.max_tracked);
        field(&mut out, WIDTH, "Peak tracked", self.peak_tracked);
        field(&mut out, WIDTH, "Hard blocked", self.hard_blocked);

        let c = &self.counters;
        out.push_str("\nCounters\n");
        let counters = [
            ("checks", c.checks),
            ("allowed", c.allowed),
            ("soft throttled", c.soft_throttled),
            ("hard locked", c.hard_locked),
            ("rejected at cap", c.rejected_at_cap),
            ("evicted stale", c.evicted_stale),
            ("evicted lru", c.evicted_lru),
        ];
        let rows: Vec<Vec<String>> = counters
            .iter()
            .map(|(name, value)| vec![(*name).to_owned(), value.to_string()])
            .collect();
        out.push_str(&render(&["COUNTER", "VALUE"], &rows, &[1]));

        out.push_str("\nScopes\n");
        let rows: Vec<Vec<String>> = self
            .scopes
            .iter()
            .map(|s| {
                vec![
                    s.name.clone(),
                    s.requests_per_second.to_string(),
                    s.burst.to_string(),
                    s.hard_lockout_ms.to_string(),
                    s.max_soft_violations.to_string(),
                    s.tracked_keys.to_string(),
                ]
            })
            .collect();
        out.push_str(&render(
            &["SCOPE", "RPS", "BURST", "LOCKOUT_MS", "MAX_SOFT", "KEYS"],
            &rows,
            &[1, 2, 3, 4, 5],
        ));

        out.push_str(&format!(
            "\nTop keys by pressure ({})\n",
            self.top_keys.len()
        ));
        if self.top_keys.is_empty() {
            out.push_str("  (none)\n");
        } else {
            let rows: Vec<Vec<String>> = self
                .top_keys
                .iter()
                .map(|k| {
                    vec![
                        k.scope.clone(),
                        k.client.clone(),
                        if k.locked { "LOCKED" } else { "open" }.to_owned(),
                        k.lockout_remaining_ms.to_string(),
                        format!("{:.3}", k.tokens),
                        format!("{:.3}", k.deficit),
                        k.soft_violations.to_string(),
                        k.idle_ms.to_string(),
                    ]
                })
                .collect();
            out.push_str(&render(
                &[
                    "SCOPE", "CLIENT", "STATE", "LOCK_MS", "TOKENS", "DEFICIT", "SOFT", "IDLE_MS",
                ],
                &rows,
                &[3, 4, 5, 6, 7],
            ));
        }
        out
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain structs of numbers and strings cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// An operation and the scope its checks land in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OperationReport {
    /// Operation name as configured.
    pub operation: String,
    /// `policy:ID` or `op:NAME`.
    pub scope: String,
}

/// The policy layer's report: how operations map to scopes, plus the engine report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyReport {
    /// Configured operations.
    pub operations: Vec<OperationReport>,
    /// The shared engine.
    pub engine: EngineReport,
}

impl PolicyReport {
    /// A human-readable, aligned rendering.
    pub fn to_text(&self) -> String {
        let mut out = String::from("--- Policy limiter report ---\n");
        field(&mut out, 24, "Operations", self.operations.len());
        if !self.operations.is_empty() {
            let rows: Vec<Vec<String>> = self
                .operations
                .iter()
                .map(|o| vec![o.operation.clone(), o.scope.clone()])
                .collect();
            out.push_str(&render(&["OPERATION", "SCOPE"], &rows, &[]));
        }
        out.push('\n');
        out.push_str(&self.engine.to_text());
        out
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

//! The admin `/status` JSON: the worker's phase, readiness, leases, controller, snapshot,
//! cooldowns and last reload, for operators.
//!
//! Two parts of it are tenants' detail: the running cooldowns (each names a proxy, the
//! domain a client was banned on and, for a project's report, the project) and the last
//! reload's key lists and error (a changed client is listed by its id). Without the admin
//! token ([`super::token::Access::Aggregate`]) those are left out: the cooldowns are only
//! counted, the reload is only its result and counters.

use crate::snapshot::readiness::{self, LeaseSummary};
use crate::state::Shared;

/// Most cooling (proxy, domain) pairs `/status` lists.
const STATUS_COOLDOWNS: usize = 256;

/// The cooldowns running now: how many, and with `detail` the entries (bounded, by proxy
/// id; `project` on a project's entries); the changes waiting for a report.
fn cooldowns_json(shared: &Shared, now: u64, detail: bool) -> serde_json::Value {
    let mut cooling = Vec::new();
    let mut total = 0usize;
    let mut slots = shared.store.registry().slots();
    slots.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, slot) in slots {
        for entry in slot.domains.cooling(now) {
            total += 1;
            if detail && cooling.len() < STATUS_COOLDOWNS {
                let mut item = serde_json::json!({
                    "proxy_id": entry.proxy_id,
                    "domain": entry.domain,
                    "until_ms": entry.until_ms,
                    "strikes": entry.strikes,
                });
                // Whose it is: a project's report binds only that project's clients.
                if let Some(project) = &entry.project {
                    item["project"] = serde_json::json!(project);
                }
                cooling.push(item);
            }
        }
    }
    let mut cooldowns = serde_json::json!({
        "cooling": total,
        "pending_report": shared.bans.ledger.len(),
    });
    if detail {
        cooldowns["entries"] = serde_json::Value::Array(cooling);
    }
    cooldowns
}

/// The last reload's report; without `detail` only its result, time and counters (its key
/// lists name clients, its error may quote them).
fn reload_json(shared: &Shared, detail: bool) -> Option<serde_json::Value> {
    let report = shared.last_reload.load_full()?;
    if detail {
        return Some((*report).clone());
    }
    let mut summary = serde_json::Map::new();
    for key in ["result", "at_ms", "reloads_applied", "reloads_refused"] {
        if let Some(value) = report.get(key) {
            summary.insert(key.to_owned(), value.clone());
        }
    }
    Some(serde_json::Value::Object(summary))
}

/// The `/status` body; `detail` adds the tenants' detail (the admin token was presented).
pub(crate) fn status_json(shared: &Shared, detail: bool) -> String {
    let view = shared.store.view();
    let now = shared.clock.now();
    let ready = readiness::readiness(&shared.store, now);
    let leases = view
        .as_ref()
        .map(|v| (LeaseSummary::of(v, now), v.leased_until_ms()));
    serde_json::json!({
        "worker": shared.config().worker_id,
        "phase": format!("{:?}", *shared.phase.borrow()).to_lowercase(),
        // Within max_staleness of the controller's last answer.
        "serving": shared.store.current().is_ok(),
        // Serving, and at least one proxy with a live lease.
        "ready": ready.is_ok(),
        "not_ready_reason": ready.err().map(|why| why.reason()),
        "since_controller_ms": shared.store.since_fresh_ms(),
        "snapshot_age_ms": view.as_ref().map(|v| now.saturating_sub(v.generated_at_ms)),
        "leases": leases.map(|(l, cutoff)| serde_json::json!({
            "proxies": l.proxies,
            "leased": l.leased,
            "earliest_end_ms": l.earliest_end_ms,
            "latest_end_ms": l.latest_end_ms,
            // The last instant any proxy may be relayed through: lease ends bounded by the
            // session's end, less the skew margin.
            "cutoff_ms": cutoff,
        })),
        "controller": shared.control.current_controller(),
        "control_error": shared.control.last_error().as_deref().map(String::as_str),
        "snapshot": view.as_ref().map(|v| serde_json::json!({
            "session_id": v.session_id,
            "version": v.reference().version,
            "epoch": v.reference().epoch,
            "generated_at_ms": v.generated_at_ms,
            "checksum": v.reference().checksum,
            "max_staleness_ms": v.max_staleness_ms,
            "proxies": v.proxies.len(),
            "clients": v.client_count(),
        })),
        "cooldowns": cooldowns_json(shared, now, detail),
        // Whether the tenants' detail is shown: false without the admin token.
        "detail": detail,
        "tracked_proxies": shared.store.registry().len(),
        "open_connections": shared.open_connections(),
        "config_reload": reload_json(shared, detail),
    })
    .to_string()
}

//! Runtime reports (`worker-runtime`): the scripts need the session, expiry, snapshot
//! epoch and a busy map `{proxy id: active + reserved}` of the non-zero entries; the full
//! report travels as JSON that only Rust reads back.

use super::{corrupt, parse_u64};
use proxypool_core::{PoolResult, RuntimeReport, StoredRuntime};
use serde_json::{Map, Value};

/// `{proxy id: active + reserved}` over the entries with a non-zero count.
pub(crate) fn busy_map(report: &RuntimeReport) -> String {
    let busy: Map<String, Value> = report
        .entries
        .iter()
        .filter(|e| e.active > 0 || e.reserved > 0)
        .map(|e| {
            let used = u64::from(e.active) + u64::from(e.reserved);
            (e.proxy_id.to_string(), Value::from(used))
        })
        .collect();
    Value::Object(busy).to_string()
}

/// The report as stored: its usage is accounted when it is accepted, not kept with it.
pub(crate) fn report_json(report: &RuntimeReport) -> String {
    let stored = RuntimeReport {
        usage: None,
        ..report.clone()
    };
    serde_json::to_string(&stored).unwrap_or_default()
}

/// The report's usage as `usage.lua` reads it: the instance, then one line per pair
/// (`client\tupstream\trequests\tfailures\tbytes_up\tbytes_down`); empty without usage.
/// Ids are validated to an alphabet without tabs or newlines.
pub(crate) fn usage_text(report: &RuntimeReport) -> String {
    let Some(usage) = &report.usage else {
        return String::new();
    };
    let mut text = usage.instance.clone();
    for entry in &usage.entries {
        let c = entry.counters;
        text.push_str(&format!(
            "\n{}\t{}\t{}\t{}\t{}\t{}",
            entry.client, entry.upstream, c.requests, c.failures, c.bytes_up, c.bytes_down
        ));
    }
    text
}

pub(crate) fn decode(
    received_at: &str,
    expires_at: &str,
    report: &str,
) -> PoolResult<StoredRuntime> {
    let what = "runtime report";
    Ok(StoredRuntime {
        report: serde_json::from_str(report).map_err(|_| corrupt(what))?,
        received_at_ms: parse_u64(received_at, what)?,
        expires_at_ms: parse_u64(expires_at, what)?,
    })
}

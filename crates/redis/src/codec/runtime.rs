//! Runtime reports (`worker-runtime`): the scripts need the session, expiry, snapshot
//! epoch and a busy map `{proxy id: active + reserved}` of the non-zero entries they kept;
//! the full report is stored as JSON that only Rust reads back. `report.lua` decides which
//! entries to keep, so it gets the report's JSON frame and each entry's JSON apart and
//! splices them; it builds the busy map itself.

use super::{corrupt, parse_u64};
use proxypool_core::{PoolResult, RuntimeReport, StoredRuntime};

/// The report as stored, without its entries, split around the entries array: the JSON up
/// to and including its `[`, and the rest from its `]`. `report.lua` splices in the
/// entries it keeps (see [`entry_args`]), so the stored JSON is always serde's own. Its
/// usage is accounted when it is accepted, not kept with it.
pub(crate) fn report_frame(report: &RuntimeReport) -> (String, String) {
    let empty = RuntimeReport {
        cooldowns: Vec::new(),
        usage: None,
        entries: Vec::new(),
        ..report.clone()
    };
    let json = serde_json::to_string(&empty).unwrap_or_default();
    // `entries` is the last field serialized (usage is None and skipped), so the array is
    // the `[]` just before the closing brace.
    match json.strip_suffix("[]}") {
        Some(head) => (format!("{head}["), "]}".to_owned()),
        None => (json, String::new()),
    }
}

/// One triplet per entry, in report order: proxy id, active + reserved, the entry's JSON.
pub(crate) fn entry_args(report: &RuntimeReport) -> impl Iterator<Item = String> + '_ {
    report.entries.iter().flat_map(|e| {
        let used = u64::from(e.active) + u64::from(e.reserved);
        [
            e.proxy_id.to_string(),
            used.to_string(),
            serde_json::to_string(e).unwrap_or_default(),
        ]
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::{ProxyId, ProxyRuntime, SnapshotRef, WorkerId};

    fn report(entries: Vec<ProxyRuntime>) -> RuntimeReport {
        RuntimeReport {
            fleet: None,
            cooldowns: Vec::new(),
            worker: WorkerId::new("gw-1").unwrap(),
            session_id: "s\"entries\":[]}".into(),
            sequence: u64::MAX,
            snapshot: SnapshotRef {
                version: 3,
                epoch: u64::MAX - 1,
                checksum: "c".into(),
            },
            entries,
            usage: None,
        }
    }

    fn entry(n: u32, active: u32) -> ProxyRuntime {
        ProxyRuntime {
            proxy_id: ProxyId::new(format!("{n:032x}")).unwrap(),
            active,
            reserved: 1,
            draining: true,
        }
    }

    /// What report.lua does: the frame around the kept entries' JSON, comma separated.
    fn splice(report: &RuntimeReport) -> String {
        let (head, tail) = report_frame(report);
        let args: Vec<String> = entry_args(report).collect();
        let kept: Vec<&str> = args.chunks(3).map(|t| t[2].as_str()).collect();
        format!("{head}{}{tail}", kept.join(","))
    }

    #[test]
    fn spliced_json_is_the_report_itself() {
        for entries in [vec![], vec![entry(1, 0)], vec![entry(1, 2), entry(2, 0)]] {
            let report = report(entries);
            let stored: RuntimeReport = serde_json::from_str(&splice(&report)).unwrap();
            assert_eq!(stored, report);
        }
    }

    #[test]
    fn spliced_json_keeps_the_fleet_endpoint() {
        for entries in [vec![], vec![entry(1, 2), entry(2, 0)]] {
            let mut report = report(entries);
            report.fleet = Some(proxypool_core::fleet::FleetEndpoint {
                address: "gw-1.internal:7443".into(),
                spki_sha256: "ab".repeat(32),
            });
            let (head, tail) = report_frame(&report);
            assert!(head.contains("\"fleet\""), "{head}");
            assert_eq!(tail, "]}", "entries stay the last field");
            let stored: RuntimeReport = serde_json::from_str(&splice(&report)).unwrap();
            assert_eq!(stored, report);
        }
    }

    #[test]
    fn entry_args_carry_id_and_load() {
        let args: Vec<String> = entry_args(&report(vec![entry(1, 2)])).collect();
        assert_eq!(args[..2], [format!("{:032x}", 1), "3".to_owned()]);
    }
}

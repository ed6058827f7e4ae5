//! Logging why checks fail without flooding the log: the first failure of each reason per
//! upstream is a warning with its cause; later ones of the same reason for that upstream
//! are debug lines. A pool of a thousand dead proxies thus warns once per way they fail,
//! and an operator still learns each new way as it appears.
//!
//! Memory is bounded: the set holds at most (configured upstreams) × (reasons) entries,
//! since the checker only checks proxies of configured upstreams and the reasons are a
//! closed enum.

use super::probe::Failed;
use proxypool_core::{CheckFailure, ProxyRecord, UpstreamId};
use std::collections::HashSet;
use std::sync::Mutex;

/// The (upstream, reason) pairs already warned about.
#[derive(Debug, Default)]
pub(crate) struct FailureLog {
    warned: Mutex<HashSet<(UpstreamId, CheckFailure)>>,
}

impl FailureLog {
    /// Logs one failed check of `record`; true when it was the warning (the first of its
    /// reason for its upstream).
    pub(crate) fn record(&self, record: &ProxyRecord, failed: &Failed) -> bool {
        let first = self.first(&record.upstream, failed.reason);
        // The address and the cause, never the credentials: the cause is our errors' text
        // (`probe::chain`), never what the proxy sent.
        if first {
            tracing::warn!(
                upstream = %record.upstream,
                reason = %failed.reason,
                proxy = %record.id,
                address = %format_args!("{}:{}", record.host, record.port),
                cause = %failed.cause,
                "health check failed (the first of this reason for this upstream; \
                 later ones are logged at debug)"
            );
        } else {
            tracing::debug!(
                upstream = %record.upstream,
                reason = %failed.reason,
                proxy = %record.id,
                address = %format_args!("{}:{}", record.host, record.port),
                cause = %failed.cause,
                "health check failed"
            );
        }
        first
    }

    /// True the first time `(upstream, reason)` is seen.
    fn first(&self, upstream: &UpstreamId, reason: CheckFailure) -> bool {
        // A poisoned lock (a panic elsewhere while inserting) still holds a valid set.
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        warned.insert((upstream.clone(), reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_once_per_upstream_and_reason() {
        let log = FailureLog::default();
        let a = UpstreamId::new("a").unwrap();
        let b = UpstreamId::new("b").unwrap();
        assert!(log.first(&a, CheckFailure::ProxyTls));
        assert!(!log.first(&a, CheckFailure::ProxyTls));
        assert!(log.first(&a, CheckFailure::Timeout), "another reason");
        assert!(log.first(&b, CheckFailure::ProxyTls), "another upstream");
        assert!(!log.first(&b, CheckFailure::ProxyTls));
        for reason in CheckFailure::ALL {
            log.first(&a, reason);
            log.first(&a, reason);
        }
        assert_eq!(
            log.warned.lock().unwrap().len(),
            CheckFailure::ALL.len() + 1,
            "one entry per (upstream, reason), however many failures"
        );
    }
}

//! What the ownership manager saw of extraction's part of the pool in its last round: how
//! many usable proxies it left unowned, how many the gateways hold, and since when the
//! gateways have held every usable proxy (extraction then answers with none). Shown on the
//! client API's `/readyz` and logged once when such a stretch begins and when it ends.
//!
//! Only the leader runs the manager, so only the leader's view is current; a view older
//! than a few rounds is not shown ([`ExtractionWatch::current`]), so a controller that
//! lost its term shows none rather than a stale one.

use proxypool_core::{LockExt, UnixMillis};
use std::sync::Mutex;

/// One round's view of extraction's part of the pool.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractionView {
    /// When the round looked.
    pub measured_at_ms: UnixMillis,
    /// The share of the usable proxies the round kept unowned (`[ownership]
    /// extraction_share` as resolved for this process).
    pub extraction_share: f64,
    /// Usable proxies no gateway holds after the round (counted up to the round's
    /// `assign_batch`).
    pub unowned: usize,
    /// Serving leases of the live gateways after the round.
    pub leased: usize,
    /// Since when every usable proxy has been leased to a gateway (at least one, none
    /// unowned); `None` while extraction has any.
    pub gateways_hold_all_since_ms: Option<UnixMillis>,
}

/// The last view, shared by the manager (which writes it) and the controller's readers.
#[derive(Debug, Default)]
pub struct ExtractionWatch {
    last: Mutex<Option<ExtractionView>>,
}

impl ExtractionWatch {
    /// Records a round's counts, logging when the gateways start or stop holding every
    /// usable proxy (once per stretch, not per round).
    pub(crate) fn record(
        &self,
        now: UnixMillis,
        extraction_share: f64,
        unowned: usize,
        leased: usize,
    ) {
        let starved = unowned == 0 && leased > 0;
        let mut last = self.last.lock_or_recover();
        let since = last.as_ref().and_then(|v| v.gateways_hold_all_since_ms);
        let since = match (starved, since) {
            (true, Some(since)) => Some(since),
            (true, None) => {
                tracing::warn!(
                    leased,
                    extraction_share,
                    "gateways hold every usable proxy: extraction finds none until more \
                     proxies come or leases end ([ownership] extraction_share keeps part \
                     of the pool unowned)"
                );
                Some(now)
            }
            (false, Some(_)) => {
                tracing::info!(unowned, leased, "extraction has unowned proxies again");
                None
            }
            (false, None) => None,
        };
        *last = Some(ExtractionView {
            measured_at_ms: now,
            extraction_share,
            unowned,
            leased,
            gateways_hold_all_since_ms: since,
        });
    }

    /// The last view if it was taken within `fresh_for_ms` of `now`.
    pub fn current(&self, now: UnixMillis, fresh_for_ms: u64) -> Option<ExtractionView> {
        self.last
            .lock_or_recover()
            .clone()
            .filter(|v| now.saturating_sub(v.measured_at_ms) <= fresh_for_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stretch_with_nothing_unowned_keeps_its_start_and_ends_when_one_is_free() {
        let watch = ExtractionWatch::default();
        assert_eq!(watch.current(0, 1_000), None);
        watch.record(1_000, 0.0, 2, 3);
        assert_eq!(
            watch.current(1_000, 0).unwrap().gateways_hold_all_since_ms,
            None
        );
        watch.record(2_000, 0.0, 0, 5);
        watch.record(3_000, 0.0, 0, 5);
        let view = watch.current(3_000, 0).unwrap();
        assert_eq!(view.gateways_hold_all_since_ms, Some(2_000));
        assert_eq!((view.unowned, view.leased), (0, 5));
        watch.record(4_000, 0.0, 1, 5);
        assert_eq!(
            watch.current(4_000, 0).unwrap().gateways_hold_all_since_ms,
            None
        );
    }

    #[test]
    fn an_empty_pool_is_not_the_gateways_holding_everything() {
        let watch = ExtractionWatch::default();
        watch.record(1_000, 0.5, 0, 0);
        assert_eq!(
            watch.current(1_000, 0).unwrap().gateways_hold_all_since_ms,
            None
        );
    }

    #[test]
    fn an_old_view_is_not_shown() {
        let watch = ExtractionWatch::default();
        watch.record(1_000, 0.5, 1, 1);
        assert!(watch.current(3_000, 2_000).is_some());
        assert_eq!(watch.current(3_001, 2_000), None);
    }
}

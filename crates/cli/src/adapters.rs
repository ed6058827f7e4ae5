//! What the client API needs from the controller, implemented over a [`Controller`] in the
//! same process: the upstreams' provider status and how the ownership manager's last round
//! split the pool between the gateways and extraction ([`UpstreamStatusSource`]), and a
//! nudge of the ownership manager when an operator changes a worker's mode
//! ([`OwnershipWake`]).
//!
//! The provider status is read from the store, where the leading controller's reconcilers
//! write it, so with several controllers on one store every one answers the same.

use async_trait::async_trait;
use proxypool_api::{
    ExtractionShare, FetchHealth, OwnershipWake, UpstreamStatus, UpstreamStatusSource,
};
use proxypool_controller::Controller;
use proxypool_controller::provider::status::UpstreamOverview;
use proxypool_core::{PoolResult, StoreStatus};

/// The controller, seen by the client API.
#[derive(Debug, Clone)]
pub(crate) struct ControllerView {
    controller: Controller,
}

impl ControllerView {
    pub(crate) fn new(controller: Controller) -> Self {
        ControllerView { controller }
    }
}

#[async_trait]
impl UpstreamStatusSource for ControllerView {
    async fn upstreams(&self) -> PoolResult<Vec<UpstreamStatus>> {
        Ok(self
            .controller
            .upstream_overviews()
            .await?
            .into_iter()
            .map(to_status)
            .collect())
    }

    fn store_status(&self) -> Option<StoreStatus> {
        self.controller
            .store_guard()
            .map(|_| self.controller.store_status())
    }

    fn extraction(&self) -> Option<ExtractionShare> {
        self.controller
            .extraction_view()
            .map(|view| ExtractionShare {
                share: view.extraction_share,
                unowned: view.unowned as u64,
                leased_to_gateways: view.leased as u64,
                gateways_hold_all_since_ms: view.gateways_hold_all_since_ms,
                measured_at_ms: view.measured_at_ms,
            })
    }
}

impl OwnershipWake for ControllerView {
    fn wake(&self) {
        self.controller.wake_ownership();
    }
}

/// The API's view of one upstream's provider status.
fn to_status(overview: UpstreamOverview) -> UpstreamStatus {
    let status = overview.status.unwrap_or_default();
    let health = if status.last_attempt_ms.is_none() {
        FetchHealth::Pending
    } else if status.last_error.is_some() {
        FetchHealth::Failing
    } else {
        FetchHealth::Ok
    };
    UpstreamStatus {
        id: overview.id,
        provider: overview.provider.to_owned(),
        health,
        fetch_interval_ms: overview.fetch_interval_ms,
        proxy_ttl_ms: overview.proxy_ttl_ms,
        max_size: overview.max_size,
        last_fetch_at_ms: status.last_attempt_ms,
        last_success_at_ms: status.last_success_ms,
        consecutive_failures: status.consecutive_failures,
        last_error: status.last_error,
        last_fetched: status
            .last_success_ms
            .map(|_| u64::from(status.last_fetched)),
        last_dropped: status.last_dropped,
        last_ignored: status.last_ignored,
        last_refused: status.last_refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_controller::provider::status::UpstreamStatus as BoardStatus;
    use proxypool_core::UpstreamId;

    fn overview(status: Option<BoardStatus>) -> UpstreamOverview {
        UpstreamOverview {
            id: UpstreamId::new("sim").unwrap(),
            provider: "http_list",
            fetch_interval_ms: 1_000,
            proxy_ttl_ms: 60_000,
            max_size: 10,
            status,
        }
    }

    #[test]
    fn maps_the_board_to_fetch_health() {
        assert_eq!(to_status(overview(None)).health, FetchHealth::Pending);
        let ok = to_status(overview(Some(BoardStatus {
            last_attempt_ms: Some(5),
            last_success_ms: Some(5),
            last_fetched: 4,
            last_dropped: [("vendor_invalid".to_owned(), 2)].into(),
            last_ignored: [("invalid_issued_at".to_owned(), 1)].into(),
            last_refused: 3,
            ..BoardStatus::default()
        })));
        assert_eq!((ok.health, ok.last_fetched), (FetchHealth::Ok, Some(4)));
        assert_eq!(ok.last_dropped.get("vendor_invalid"), Some(&2));
        assert_eq!(ok.last_ignored.get("invalid_issued_at"), Some(&1));
        assert_eq!(ok.last_refused, 3);
        let failing = to_status(overview(Some(BoardStatus {
            last_attempt_ms: Some(9),
            last_error: Some("connect".into()),
            consecutive_failures: 2,
            ..BoardStatus::default()
        })));
        assert_eq!(failing.health, FetchHealth::Failing);
        assert_eq!(failing.last_fetched, None);
    }
}

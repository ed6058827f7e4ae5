//! What an adapter implements to run the suite: [`PoolFactory`] makes fresh, empty pools
//! with the work bounds of [`ScanLimits`].

use async_trait::async_trait;
use proxypool_core::ActivityPool;

/// Work bounds the suite needs to set on a fresh pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanLimits {
    pub extract_scan_budget: usize,
    pub inventory_scan_budget: usize,
}

impl Default for ScanLimits {
    fn default() -> Self {
        ScanLimits {
            extract_scan_budget: 10_000,
            inventory_scan_budget: 100_000,
        }
    }
}

/// Makes empty, isolated pools for the suite.
#[async_trait]
pub trait PoolFactory: Send + Sync {
    type Pool: ActivityPool;

    /// A fresh, empty pool, or `None` to skip (the factory says why, loudly).
    async fn create(&self, limits: ScanLimits) -> Option<Self::Pool>;
}

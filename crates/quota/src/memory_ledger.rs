//! [`MemoryLedger`]: the store ledger in process memory, beside [`MemoryQuota`]'s buckets.
//!
//! The reference semantics of [`StoreLedger`] (`ledger.rs` has the rules): every call is
//! one critical section of one mutex, so a compare-and-set is exactly that. Entries are
//! kept as the SQL backends store them (`LedgerRow`) and read back through the same
//! decoding. It survives nothing, so it recognises a lost pool store only while the
//! process lives: for tests and ephemeral runs, like the memory quota.
//!
//! [`MemoryQuota`]: crate::MemoryQuota

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use proxypool_core::PoolResult;
use proxypool_core::store_mark::{LedgerEntry, StoreLedger};

use crate::ledger::{LedgerRow, check_identity, check_pool, replacement, to_stored};

/// The store ledger in memory. A handle: clones share one ledger.
#[derive(Debug, Clone, Default)]
pub struct MemoryLedger {
    entries: Arc<Mutex<HashMap<String, LedgerRow>>>,
}

impl MemoryLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many pools have an entry.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether no pool has an entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries, locked. A poisoned lock only means another call panicked midway; every
    /// update is one map insert or one field assignment, so the map is still consistent.
    fn entries(&self) -> MutexGuard<'_, HashMap<String, LedgerRow>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl StoreLedger for MemoryLedger {
    async fn load(&self, pool: &str) -> PoolResult<Option<LedgerEntry>> {
        check_pool(pool)?;
        let row = self.entries().get(pool).cloned();
        row.map(LedgerRow::decode).transpose()
    }

    async fn replace(
        &self,
        pool: &str,
        expected: Option<&str>,
        entry: &LedgerEntry,
    ) -> PoolResult<bool> {
        let row = replacement(pool, expected, entry)?;
        let mut entries = self.entries();
        let current = entries.get(pool).map(|stored| stored.identity.as_str());
        if current != expected {
            return Ok(false);
        }
        entries.insert(pool.to_owned(), row);
        Ok(true)
    }

    async fn raise_generation(
        &self,
        pool: &str,
        identity: &str,
        generation: u64,
    ) -> PoolResult<()> {
        check_pool(pool)?;
        check_identity("the identity", identity)?;
        let generation = to_stored("the generation", generation)?;
        if let Some(stored) = self.entries().get_mut(pool)
            && stored.identity == identity
        {
            stored.generation = stored.generation.max(generation);
        }
        Ok(())
    }
}

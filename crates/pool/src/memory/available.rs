//! The MemoryPool's available indexes: every AVAILABLE, unowned, unwithheld record by
//! `usable_until`, once in all and once per filter value, so an extraction scans the
//! smallest set that covers its filter (`super::extract`). `State` keeps them in step with
//! the records (`super::state`).

use proxypool_core::{Label, Protocol, ProxyId, ProxyRecord, UnixMillis, UpstreamId};
use std::collections::{BTreeSet, HashMap};

/// An index ordered by a time (`usable_until_ms` here), so expired entries sit at the low
/// end.
pub(crate) type ExpiryOrdered = BTreeSet<(UnixMillis, ProxyId)>;

/// One filter dimension value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum FilterKey {
    Protocol(Protocol),
    Region(Label),
    Carrier(Label),
    Upstream(UpstreamId),
}

impl FilterKey {
    pub(crate) fn of(record: &ProxyRecord) -> Vec<FilterKey> {
        let mut keys = vec![
            FilterKey::Protocol(record.protocol),
            FilterKey::Upstream(record.upstream.clone()),
        ];
        if let Some(region) = &record.region {
            keys.push(FilterKey::Region(region.clone()));
        }
        if let Some(carrier) = &record.carrier {
            keys.push(FilterKey::Carrier(carrier.clone()));
        }
        keys
    }
}

/// The available indexes: all available records and one set per filter value.
#[derive(Debug, Default)]
pub(crate) struct AvailableIndex {
    pub(crate) all: ExpiryOrdered,
    pub(crate) by_filter: HashMap<FilterKey, ExpiryOrdered>,
}

impl AvailableIndex {
    pub(crate) fn insert(&mut self, record: &ProxyRecord) {
        let entry = (record.usable_until_ms, record.id.clone());
        for key in FilterKey::of(record) {
            self.by_filter.entry(key).or_default().insert(entry.clone());
        }
        self.all.insert(entry);
    }

    pub(crate) fn remove(&mut self, record: &ProxyRecord) {
        let entry = (record.usable_until_ms, record.id.clone());
        if !self.all.remove(&entry) {
            return;
        }
        for key in FilterKey::of(record) {
            if let Some(set) = self.by_filter.get_mut(&key) {
                set.remove(&entry);
                if set.is_empty() {
                    self.by_filter.remove(&key);
                }
            }
        }
    }

    pub(crate) fn entries(&self) -> usize {
        self.all.len() + self.by_filter.values().map(BTreeSet::len).sum::<usize>()
    }
}

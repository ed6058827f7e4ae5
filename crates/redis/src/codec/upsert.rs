//! Upsert results: per chunk `inserted,refreshed,foreign,extracted,over`; a whole batch's
//! stored report adds `\t` and its dropped counts as JSON.

use super::corrupt;
use proxypool_core::{DropReason, PoolResult, UpsertReport};
use std::collections::BTreeMap;

/// The counts one chunk (or several, added up) produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) inserted: u32,
    pub(crate) refreshed: u32,
    pub(crate) foreign: u32,
    pub(crate) extracted: u32,
    pub(crate) over: u32,
}

impl Counts {
    pub(crate) fn add(&mut self, other: Counts) {
        self.inserted += other.inserted;
        self.refreshed += other.refreshed;
        self.foreign += other.foreign;
        self.extracted += other.extracted;
        self.over += other.over;
    }

    pub(crate) fn encode(&self) -> String {
        format!(
            "{},{},{},{},{}",
            self.inserted, self.refreshed, self.foreign, self.extracted, self.over
        )
    }

    pub(crate) fn decode(value: &str) -> PoolResult<Counts> {
        let n: Vec<u32> = value
            .split(',')
            .map(|v| v.parse().map_err(|_| corrupt("upsert result")))
            .collect::<PoolResult<_>>()?;
        let [inserted, refreshed, foreign, extracted, over] = n[..] else {
            return Err(corrupt("upsert result"));
        };
        Ok(Counts {
            inserted,
            refreshed,
            foreign,
            extracted,
            over,
        })
    }

    pub(crate) fn report(self, dropped: BTreeMap<DropReason, u32>) -> UpsertReport {
        UpsertReport {
            inserted: self.inserted,
            refreshed: self.refreshed,
            foreign_duplicates: self.foreign,
            extracted_ignored: self.extracted,
            over_max_size: self.over,
            dropped,
        }
    }
}

pub(crate) fn dropped_json(dropped: &BTreeMap<DropReason, u32>) -> String {
    serde_json::to_string(dropped).unwrap_or_default()
}

/// A stored batch report: counts, a tab, the dropped counts.
pub(crate) fn decode_batch(value: &str) -> PoolResult<UpsertReport> {
    let (counts, dropped) = value
        .split_once('\t')
        .ok_or_else(|| corrupt("upsert report"))?;
    let dropped = serde_json::from_str(dropped).map_err(|_| corrupt("upsert report"))?;
    Ok(Counts::decode(counts)?.report(dropped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_reports_round_trip() {
        let mut dropped = BTreeMap::new();
        dropped.insert(DropReason::InvalidHost, 2);
        let counts = Counts {
            inserted: 1,
            refreshed: 2,
            foreign: 3,
            extracted: 4,
            over: 5,
        };
        let stored = format!("{}\t{}", counts.encode(), dropped_json(&dropped));
        assert_eq!(decode_batch(&stored).unwrap(), counts.report(dropped));
    }
}

//! The recorder: a registry of series, each an `Arc` of atomics the `metrics` handles
//! point at, so recording is one atomic operation and never takes a lock.
//!
//! Series are created under a write lock the first time a key is seen and looked up under
//! a read lock afterwards (the `metrics` macros register on every call; handles kept by a
//! hot path skip even that).

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Per-bucket counts (not cumulative: each value lands in one bucket; the render adds
/// them up), a count and a sum, over the family's bounds ([`crate::buckets`]).
#[derive(Debug)]
pub(crate) struct AtomicHistogram {
    pub(crate) bounds: &'static [f64],
    pub(crate) buckets: Box<[AtomicU64]>,
    pub(crate) count: AtomicU64,
    pub(crate) sum_bits: AtomicU64,
}

impl AtomicHistogram {
    fn new(bounds: &'static [f64]) -> Self {
        AtomicHistogram {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_bits: AtomicU64::new(0),
        }
    }
}

impl HistogramFn for AtomicHistogram {
    fn record(&self, value: f64) {
        // Above the last bound only `+Inf` (the count) holds it. The bounds are few and
        // sorted: a partition point is a handful of comparisons.
        // NaN lands in no finite bucket (it is above no bound and below none).
        let i = if value.is_nan() {
            self.bounds.len()
        } else {
            self.bounds.partition_point(|bound| *bound < value)
        };
        if let Some(bucket) = self.buckets.get(i) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut current = self.sum_bits.load(Ordering::Relaxed);
        loop {
            let next = (f64::from_bits(current) + value).to_bits();
            match self.sum_bits.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(seen) => current = seen,
            }
        }
    }
}

/// Every series and help text of one recorder.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub(crate) counters: RwLock<HashMap<Key, Arc<AtomicU64>>>,
    /// Gauges hold `f64` bits (what `metrics` implements `GaugeFn` for).
    pub(crate) gauges: RwLock<HashMap<Key, Arc<AtomicU64>>>,
    pub(crate) histograms: RwLock<HashMap<Key, Arc<AtomicHistogram>>>,
    /// Help texts by family name, with the type the family was described as.
    pub(crate) help: RwLock<BTreeMap<String, (&'static str, String)>>,
}

// A panic while a lock is held cannot leave a map half-written (inserts are single
// calls), so a poisoned lock is still good: metrics must never take a role down.
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// Looks a series up under the read lock, inserting `make()` under the write lock when new.
fn series<T>(map: &RwLock<HashMap<Key, Arc<T>>>, key: &Key, make: impl FnOnce() -> T) -> Arc<T> {
    if let Some(found) = read(map).get(key) {
        return found.clone();
    }
    write(map)
        .entry(key.clone())
        .or_insert_with(|| Arc::new(make()))
        .clone()
}

/// The recorder; install it process-wide with [`crate::install`], or use it locally
/// (tests) with [`crate::MetricsHandle::local`].
#[derive(Debug, Clone, Default)]
pub struct TextRecorder {
    pub(crate) registry: Arc<Registry>,
}

impl TextRecorder {
    pub fn new() -> Self {
        TextRecorder::default()
    }

    fn describe(&self, key: KeyName, kind: &'static str, description: SharedString) {
        write(&self.registry.help)
            .insert(key.as_str().to_owned(), (kind, description.into_owned()));
    }
}

impl Recorder for TextRecorder {
    fn describe_counter(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, "counter", description);
    }

    fn describe_gauge(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, "gauge", description);
    }

    fn describe_histogram(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, "histogram", description);
    }

    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        Counter::from_arc(series(&self.registry.counters, key, AtomicU64::default))
    }

    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(series(&self.registry.gauges, key, AtomicU64::default))
    }

    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        let bounds = crate::buckets::buckets_of(key.name());
        Histogram::from_arc(series(&self.registry.histograms, key, || {
            AtomicHistogram::new(bounds)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_kept_records_without_the_registry() {
        let recorder = TextRecorder::new();
        let handle = recorder.handle();
        let counter = metrics::with_local_recorder(&recorder, || metrics::counter!("t_kept"));
        // Outside the recorder's scope a lookup would find no recorder: the kept handle
        // reaches the series directly.
        counter.increment(5);
        assert!(
            handle.render().contains("t_kept 5\n"),
            "{}",
            handle.render()
        );
    }
}

//! A small `metrics` recorder that renders the Prometheus text format itself.
//!
//! Why not `metrics-exporter-prometheus`: even without its default features it brings
//! `metrics-util` with its storage stack (crossbeam-epoch, a DDSketch, rand, quanta,
//! indexmap...), and its defaults add an HTTP listener and a TLS push gateway. The API
//! needs counters, gauges and fixed-bucket histograms rendered on `GET /metrics`; that is
//! this file. Handles are atomics, so recording never takes a lock once a series exists.
//! Series are registered under a read-mostly lock (the `metrics` macros register on every
//! call), and label sets are bounded by the callers (route templates, not raw paths).

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use proxypool_core::RwLockExt;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// Upper bounds (seconds) of the histogram buckets: 0.5 ms to 10 s covers an in-memory
/// store call and a slow database round trip alike.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A cumulative-on-render histogram: per-bucket counts, a count and a sum.
#[derive(Debug, Default)]
struct AtomicHistogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_bits: AtomicU64,
}

impl HistogramFn for AtomicHistogram {
    fn record(&self, value: f64) {
        if let Some(i) = BUCKETS.iter().position(|bound| value <= *bound) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
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

#[derive(Debug, Default)]
struct Registry {
    counters: RwLock<HashMap<Key, Arc<AtomicU64>>>,
    gauges: RwLock<HashMap<Key, Arc<AtomicU64>>>,
    histograms: RwLock<HashMap<Key, Arc<AtomicHistogram>>>,
    help: RwLock<BTreeMap<String, String>>,
}

/// Looks a series up under the read lock, inserting it under the write lock when new.
fn series<T: Default>(map: &RwLock<HashMap<Key, Arc<T>>>, key: &Key) -> Arc<T> {
    if let Some(found) = map.read_or_recover().get(key) {
        return found.clone();
    }
    map.write_or_recover()
        .entry(key.clone())
        .or_default()
        .clone()
}

/// The recorder; install it with [`MetricsHandle::install_global`].
#[derive(Debug, Clone, Default)]
pub struct TextRecorder {
    registry: Arc<Registry>,
}

impl TextRecorder {
    pub fn new() -> Self {
        TextRecorder::default()
    }

    /// A handle that renders what this recorder collected.
    pub fn handle(&self) -> MetricsHandle {
        MetricsHandle {
            registry: self.registry.clone(),
        }
    }

    fn describe(&self, key: KeyName, description: SharedString) {
        self.registry
            .help
            .write_or_recover()
            .insert(key.as_str().to_owned(), description.into_owned());
    }
}

impl Recorder for TextRecorder {
    fn describe_counter(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn describe_gauge(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn describe_histogram(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        Counter::from_arc(series(&self.registry.counters, key))
    }

    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(series(&self.registry.gauges, key))
    }

    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(series(&self.registry.histograms, key))
    }
}

/// Another recorder was installed first; the API cannot render what it collects.
#[derive(Debug, Clone, thiserror::Error)]
#[error("a different global metrics recorder is already installed")]
pub struct RecorderTaken;

/// Renders the collected metrics as Prometheus text (`GET /metrics`).
#[derive(Debug, Clone)]
pub struct MetricsHandle {
    registry: Arc<Registry>,
}

impl MetricsHandle {
    /// Installs a [`TextRecorder`] as the process-wide `metrics` recorder and returns its
    /// handle. Idempotent: later calls return the same handle. Fails when some other
    /// recorder was installed first.
    pub fn install_global() -> Result<MetricsHandle, RecorderTaken> {
        static INSTALLED: OnceLock<Result<MetricsHandle, RecorderTaken>> = OnceLock::new();
        INSTALLED
            .get_or_init(|| {
                let recorder = TextRecorder::new();
                let handle = recorder.handle();
                metrics::set_global_recorder(recorder)
                    .map(|()| {
                        crate::metrics::describe();
                        handle
                    })
                    .map_err(|_| RecorderTaken)
            })
            .clone()
    }

    /// The Prometheus text exposition (version 0.0.4) of every series.
    pub fn render(&self) -> String {
        let help = self.registry.help.read_or_recover().clone();
        // name -> (type, series sorted by their label set, each series' lines in order:
        // a histogram's buckets must stay in ascending `le` order).
        let mut families: BTreeMap<String, (&'static str, BTreeMap<String, Vec<String>>)> =
            BTreeMap::new();
        let mut add = |key: &Key, kind: &'static str, lines: Vec<String>| {
            families
                .entry(key.name().to_owned())
                .or_insert_with(|| (kind, BTreeMap::new()))
                .1
                .insert(labels(key, None), lines);
        };
        for (key, value) in read(&self.registry.counters) {
            let line = format!(
                "{}{} {}",
                key.name(),
                labels(&key, None),
                value.load(Ordering::Relaxed)
            );
            add(&key, "counter", vec![line]);
        }
        for (key, value) in read(&self.registry.gauges) {
            let value = f64::from_bits(value.load(Ordering::Relaxed));
            let line = format!("{}{} {}", key.name(), labels(&key, None), value);
            add(&key, "gauge", vec![line]);
        }
        for (key, histogram) in read(&self.registry.histograms) {
            let name = key.name();
            let mut cumulative = 0;
            let mut lines = Vec::with_capacity(BUCKETS.len() + 3);
            for (bound, count) in BUCKETS.iter().zip(&histogram.buckets) {
                cumulative += count.load(Ordering::Relaxed);
                let le = bound.to_string();
                lines.push(format!(
                    "{name}_bucket{} {cumulative}",
                    labels(&key, Some(&le))
                ));
            }
            let count = histogram.count.load(Ordering::Relaxed);
            let sum = f64::from_bits(histogram.sum_bits.load(Ordering::Relaxed));
            lines.push(format!(
                "{name}_bucket{} {count}",
                labels(&key, Some("+Inf"))
            ));
            lines.push(format!("{name}_sum{} {sum}", labels(&key, None)));
            lines.push(format!("{name}_count{} {count}", labels(&key, None)));
            add(&key, "histogram", lines);
        }
        let mut out = String::new();
        for (name, (kind, series)) in families {
            if let Some(text) = help.get(&name) {
                let _ = writeln!(out, "# HELP {name} {}", text.replace('\n', " "));
            }
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for line in series.into_values().flatten() {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }
}

fn read<T>(map: &RwLock<HashMap<Key, Arc<T>>>) -> Vec<(Key, Arc<T>)> {
    map.read_or_recover()
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// `{a="1",b="2"}` (plus `le` for histogram buckets), or nothing without labels.
fn labels(key: &Key, le: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> = key
        .labels()
        .map(|label| (label.key().to_owned(), label.value().to_owned()))
        .collect();
    if let Some(le) = le {
        pairs.push(("le".to_owned(), le.to_owned()));
    }
    if pairs.is_empty() {
        return String::new();
    }
    let body: Vec<String> = pairs
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect();
    format!("{{{}}}", body.join(","))
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_histograms() {
        let recorder = TextRecorder::new();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            metrics::describe_counter!("t_requests_total", "Requests.");
            metrics::counter!("t_requests_total", "route" => "/v1/x", "status" => "200")
                .increment(2);
            metrics::counter!("t_requests_total", "route" => "/v1/x", "status" => "200")
                .increment(1);
            metrics::gauge!("t_inflight").set(3.0);
            metrics::histogram!("t_seconds", "port" => "a\"b").record(0.003);
            metrics::histogram!("t_seconds", "port" => "a\"b").record(20.0);
        });
        let text = handle.render();
        assert!(
            text.contains("# HELP t_requests_total Requests.\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE t_requests_total counter\n"));
        assert!(text.contains("t_requests_total{route=\"/v1/x\",status=\"200\"} 3\n"));
        assert!(text.contains("t_inflight 3\n"));
        assert!(
            text.contains("t_seconds_bucket{port=\"a\\\"b\",le=\"0.005\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("t_seconds_bucket{port=\"a\\\"b\",le=\"+Inf\"} 2\n"));
        assert!(text.contains("t_seconds_count{port=\"a\\\"b\"} 2\n"));
        assert!(text.contains("t_seconds_sum{port=\"a\\\"b\"} 20.003\n"));
        let small = text.find("le=\"0.0005\"").unwrap();
        assert!(small < text.find("le=\"10\"").unwrap());
        assert!(text.find("le=\"10\"").unwrap() < text.find("le=\"+Inf\"").unwrap());
    }
}

//! A small `metrics` recorder that renders the Prometheus text format, for the admin
//! listener's `/metrics`.
//!
//! Why not `metrics-exporter-prometheus`: it brings its own HTTP stack options, quantile
//! sketches and a dozen crates of build time on a 2-core machine, while the gateway needs
//! counters, gauges and sum/count histograms rendered on demand. Handles are atomics the
//! hot path increments directly; the maps are locked only on registration and render.

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use proxypool_core::LockExt;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct Registry {
    counters: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    gauges: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    histograms: Mutex<HashMap<Key, Arc<Summary>>>,
    help: Mutex<HashMap<String, String>>,
}

/// Sum and count of observed values.
#[derive(Debug, Default)]
struct Summary {
    count: AtomicU64,
    sum_bits: AtomicU64,
}

impl HistogramFn for Summary {
    fn record(&self, value: f64) {
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
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }
}

/// The recorder; install it with [`PrometheusHandle::install`].
#[derive(Debug, Clone, Default)]
pub struct PrometheusRecorder {
    registry: Arc<Registry>,
}

/// Renders what the installed recorder collected.
#[derive(Debug, Clone)]
pub struct PrometheusHandle {
    registry: Arc<Registry>,
}

impl PrometheusHandle {
    /// Installs a recorder as the process-wide `metrics` recorder. Fails when another
    /// recorder is installed already (then the caller renders its own).
    pub fn install() -> Result<Self, metrics::SetRecorderError<PrometheusRecorder>> {
        let recorder = PrometheusRecorder::default();
        let handle = PrometheusHandle {
            registry: Arc::clone(&recorder.registry),
        };
        metrics::set_global_recorder(recorder)?;
        Ok(handle)
    }

    /// A recorder that is not installed, with its handle (for tests that record through
    /// `metrics::with_local_recorder`).
    #[cfg(test)]
    pub(crate) fn local() -> (PrometheusRecorder, Self) {
        let recorder = PrometheusRecorder::default();
        let handle = PrometheusHandle {
            registry: Arc::clone(&recorder.registry),
        };
        (recorder, handle)
    }

    /// The installed handle, installing it on first use; `None` when a foreign recorder
    /// owns the process.
    pub fn global() -> Option<Self> {
        static GLOBAL: std::sync::OnceLock<Option<PrometheusHandle>> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(|| Self::install().ok()).clone()
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let help = self.registry.help.lock_or_recover().clone();
        let mut out = String::new();
        let counters = snapshot(&self.registry.counters, |v| {
            v.load(Ordering::Relaxed) as f64
        });
        render_family(&mut out, "counter", &counters, &help);
        let gauges = snapshot(&self.registry.gauges, |v| {
            f64::from_bits(v.load(Ordering::Relaxed))
        });
        render_family(&mut out, "gauge", &gauges, &help);
        let histograms = self.registry.histograms.lock_or_recover().clone();
        let mut histograms: Vec<_> = histograms.into_iter().collect();
        histograms.sort_by(|a, b| {
            a.0.name()
                .cmp(b.0.name())
                .then(labels(&a.0).cmp(&labels(&b.0)))
        });
        let mut last = String::new();
        for (key, summary) in histograms {
            let name = sanitize(key.name());
            if name != last {
                if let Some(text) = help.get(key.name()) {
                    let _ = writeln!(out, "# HELP {name} {text}");
                }
                let _ = writeln!(out, "# TYPE {name} summary");
                last = name.clone();
            }
            let labels = labels(&key);
            let sum = f64::from_bits(summary.sum_bits.load(Ordering::Relaxed));
            let count = summary.count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_sum{labels} {sum}");
            let _ = writeln!(out, "{name}_count{labels} {count}");
        }
        out
    }
}

fn snapshot(
    map: &Mutex<HashMap<Key, Arc<AtomicU64>>>,
    read: impl Fn(&AtomicU64) -> f64,
) -> Vec<(Key, f64)> {
    let map = map.lock_or_recover();
    let mut values: Vec<(Key, f64)> = map.iter().map(|(k, v)| (k.clone(), read(v))).collect();
    values.sort_by(|a, b| {
        a.0.name()
            .cmp(b.0.name())
            .then(labels(&a.0).cmp(&labels(&b.0)))
    });
    values
}

fn render_family(
    out: &mut String,
    kind: &str,
    values: &[(Key, f64)],
    help: &HashMap<String, String>,
) {
    let mut last = String::new();
    for (key, value) in values {
        let name = sanitize(key.name());
        if name != last {
            if let Some(text) = help.get(key.name()) {
                let _ = writeln!(out, "# HELP {name} {text}");
            }
            let _ = writeln!(out, "# TYPE {name} {kind}");
            last = name.clone();
        }
        let _ = writeln!(out, "{name}{} {value}", labels(key));
    }
}

fn labels(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|label| {
            let value = label
                .value()
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{}=\"{value}\"", sanitize(label.key()))
        })
        .collect();
    if labels.is_empty() {
        return String::new();
    }
    labels.sort();
    format!("{{{}}}", labels.join(","))
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Recorder for PrometheusRecorder {
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
        let mut map = self.registry.counters.lock_or_recover();
        Counter::from_arc(Arc::clone(map.entry(key.clone()).or_default()))
    }

    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        let mut map = self.registry.gauges.lock_or_recover();
        Gauge::from_arc(Arc::clone(map.entry(key.clone()).or_default()))
    }

    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        let mut map = self.registry.histograms.lock_or_recover();
        Histogram::from_arc(Arc::clone(map.entry(key.clone()).or_default()))
    }
}

impl PrometheusRecorder {
    fn describe(&self, key: KeyName, description: SharedString) {
        self.registry
            .help
            .lock_or_recover()
            .insert(key.as_str().to_owned(), description.replace('\n', " "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_text_format() {
        let recorder = PrometheusRecorder::default();
        let handle = PrometheusHandle {
            registry: Arc::clone(&recorder.registry),
        };
        metrics::with_local_recorder(&recorder, || {
            metrics::describe_counter!("demo_requests_total", "Requests.");
            metrics::counter!("demo_requests_total", "kind" => "http").increment(3);
            metrics::counter!("demo_requests_total", "kind" => "socks5").increment(1);
            metrics::gauge!("demo_open").set(2.5);
            metrics::histogram!("demo_seconds").record(0.5);
            metrics::histogram!("demo_seconds").record(1.0);
        });
        let text = handle.render();
        assert!(
            text.contains("# HELP demo_requests_total Requests."),
            "{text}"
        );
        assert!(
            text.contains("# TYPE demo_requests_total counter"),
            "{text}"
        );
        assert!(
            text.contains("demo_requests_total{kind=\"http\"} 3"),
            "{text}"
        );
        assert!(text.contains("demo_open 2.5"), "{text}");
        assert!(text.contains("demo_seconds_sum 1.5"), "{text}");
        assert!(text.contains("demo_seconds_count 2"), "{text}");
    }
}

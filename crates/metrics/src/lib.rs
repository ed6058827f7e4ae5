//! proxypool-metrics: the one `metrics` recorder of every proxypool role, rendered as
//! Prometheus text.
//!
//! Every role records through the `metrics` facade (`metrics::counter!` and friends) and
//! calls [`install`] before it creates its first handle. In one process (`serve`, `dev`)
//! the client API, the gateway and the controller therefore share one registry, and each
//! `/metrics` endpoint (the API's `GET /metrics`, the gateway admin's `/metrics`) renders
//! all of it, whichever role started first. [`install`] is idempotent: every call returns
//! a handle on the same registry.
//!
//! Why not `metrics-exporter-prometheus`: even without its default features it brings
//! `metrics-util` with its storage stack (crossbeam-epoch, a DDSketch, rand, quanta,
//! indexmap...), and its defaults add an HTTP listener and a TLS push gateway: a dozen
//! crates of build time on a 2-core machine. The roles need counters, gauges and
//! fixed-bucket histograms rendered on demand; that is this crate.
//!
//! Module map:
//! - [`recorder`]: [`TextRecorder`], the registry of series (atomics, registered once).
//! - [`render`]: the text exposition format (families, escaping, cumulative buckets).
//! - [`process`]: `process_*` metrics read from `/proc` at render time.
//!
//! Recording never takes a lock once a series exists: a handle is an `Arc` of atomics.
//! Callers on a hot path create their handles once and keep them; the `metrics` macros
//! look a series up under a read lock on every call, which is fine off the hot path.
//! Label values must be bounded by the caller (configured sets, fixed outcome names),
//! never client input: every distinct label set is a series kept for the process's life.

#![forbid(unsafe_code)]

pub mod process;
pub mod recorder;
pub mod render;

pub use recorder::{BUCKETS, TextRecorder};

use std::sync::{Arc, OnceLock};

/// Another (foreign) recorder was installed first; this process's metrics go there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecorderTaken;

impl std::fmt::Display for RecorderTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a different global metrics recorder is already installed")
    }
}

impl std::error::Error for RecorderTaken {}

/// Renders what a [`TextRecorder`] collected (cheap to clone: one `Arc`).
#[derive(Debug, Clone)]
pub struct MetricsHandle {
    registry: Arc<recorder::Registry>,
}

impl MetricsHandle {
    /// A recorder that is not installed, with its handle: for tests that record through
    /// `metrics::with_local_recorder`.
    pub fn local() -> (TextRecorder, MetricsHandle) {
        let recorder = TextRecorder::new();
        let handle = recorder.handle();
        (recorder, handle)
    }

    /// The Prometheus text exposition (version 0.0.4) of every series, followed by the
    /// process metrics.
    pub fn render(&self) -> String {
        let mut out = render::render(&self.registry);
        process::render(&mut out);
        out
    }

    /// Whether both handles render the same registry.
    pub fn same_registry(&self, other: &MetricsHandle) -> bool {
        Arc::ptr_eq(&self.registry, &other.registry)
    }
}

/// The content type of [`MetricsHandle::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Installs a [`TextRecorder`] as the process-wide `metrics` recorder on the first call
/// and returns its handle; every later call returns a handle on the same registry, so
/// two roles in one process never split their metrics. Fails (on every call) only when
/// some other recorder was installed first.
pub fn install() -> Result<MetricsHandle, RecorderTaken> {
    static INSTALLED: OnceLock<Result<MetricsHandle, RecorderTaken>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let recorder = TextRecorder::new();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder)
                .map(|()| handle)
                .map_err(|_| RecorderTaken)
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_is_idempotent_and_records_globally() {
        let first = install().unwrap();
        let second = install().unwrap();
        assert!(first.same_registry(&second), "a second install splits");
        metrics::counter!("t_global_total", "outcome" => "ok").increment(2);
        assert!(
            second
                .render()
                .contains("t_global_total{outcome=\"ok\"} 2\n"),
            "{}",
            second.render()
        );
        let (_, local) = MetricsHandle::local();
        assert!(!local.same_registry(&first));
    }
}

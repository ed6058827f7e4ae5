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
//! fixed-bucket histograms (bounds chosen per family) rendered on demand; that is this crate.
//!
//! Module map:
//! - [`recorder`]: [`TextRecorder`], the registry of series (atomics, registered once).
//! - [`buckets`]: histogram bucket bounds chosen per family ([`set_buckets`]), with a default.
//! - [`render`]: the text exposition format (families, escaping, cumulative buckets).
//! - [`redact`]: which series are a tenant's ([`TENANT_LABELS`]), and the [`Scope`] of a
//!   rendering: every series, or the aggregate without them.
//! - [`process`]: `process_*` metrics read from `/proc` at render time.
//! - `handle`: [`MetricsHandle`], what renders a registry, and [`CONTENT_TYPE`].
//! - `install`: [`install`], the one process-wide recorder, and [`RecorderTaken`].
//!
//! Recording never takes a lock once a series exists: a handle is an `Arc` of atomics.
//! Callers on a hot path create their handles once and keep them; the `metrics` macros
//! look a series up under a read lock on every call, which is fine off the hot path.
//! Label values must be bounded by the caller (configured sets, fixed outcome names),
//! never client input: every distinct label set is a series kept for the process's life.

#![forbid(unsafe_code)]

pub mod buckets;
mod handle;
mod install;
pub mod process;
pub mod recorder;
pub mod redact;
pub mod render;

pub use buckets::{
    DEFAULT_BUCKETS, MAX_BUCKETS, REMOTE_CALL_BUCKETS, STORE_CALL_BUCKETS, set_buckets,
};
pub use handle::{CONTENT_TYPE, MetricsHandle};
pub use install::{RecorderTaken, install};
pub use recorder::TextRecorder;
pub use redact::{Scope, TENANT_LABELS, is_tenant_series};

//! [`MetricsHandle`]: renders what a [`TextRecorder`] collected, series then process
//! metrics. A recorder hands out its handles here (`TextRecorder::handle`), so the recorder
//! does not depend on what renders it.

use crate::process;
use crate::recorder::{Registry, TextRecorder};
use crate::redact::Scope;
use crate::render;
use std::sync::Arc;

/// Renders what a [`TextRecorder`] collected (cheap to clone: one `Arc`).
#[derive(Debug, Clone)]
pub struct MetricsHandle {
    registry: Arc<Registry>,
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
        self.render_scope(Scope::Everything)
    }

    /// [`MetricsHandle::render`] without the series of any tenant
    /// ([`crate::redact::TENANT_LABELS`]): what a scrape without the endpoint's token sees.
    pub fn render_aggregate(&self) -> String {
        self.render_scope(Scope::Aggregate)
    }

    /// The series `scope` shows, followed by the process metrics.
    pub fn render_scope(&self, scope: Scope) -> String {
        let mut out = render::render(&self.registry, scope);
        process::render(&mut out);
        out
    }

    /// Whether both handles render the same registry.
    pub fn same_registry(&self, other: &MetricsHandle) -> bool {
        Arc::ptr_eq(&self.registry, &other.registry)
    }
}

impl TextRecorder {
    /// A handle that renders what this recorder collects.
    pub fn handle(&self) -> MetricsHandle {
        MetricsHandle {
            registry: self.registry.clone(),
        }
    }
}

/// The content type of [`MetricsHandle::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

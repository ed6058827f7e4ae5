//! [`install`]: the one process-wide recorder every role in a process records into.

use crate::handle::MetricsHandle;
use crate::recorder::TextRecorder;
use std::sync::OnceLock;

/// Another (foreign) recorder was installed first; this process's metrics go there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecorderTaken;

impl std::fmt::Display for RecorderTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a different global metrics recorder is already installed")
    }
}

impl std::error::Error for RecorderTaken {}

/// Installs a [`TextRecorder`] as the process-wide `metrics` recorder on the first call
/// and returns its handle; every later call returns a handle on the same registry, so
/// two roles in one process never split their metrics. Fails (on every call) only when
/// some other recorder was installed first. The first install records
/// `proxypool_build_info{version}` (always 1), so a dashboard can tell which build runs.
pub fn install() -> Result<MetricsHandle, RecorderTaken> {
    static INSTALLED: OnceLock<Result<MetricsHandle, RecorderTaken>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let recorder = TextRecorder::new();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).map_err(|_| RecorderTaken)?;
            metrics::describe_gauge!(
                "proxypool_build_info",
                "Always 1; the labels say which build of proxypool runs (the workspace version)."
            );
            metrics::gauge!("proxypool_build_info", "version" => env!("CARGO_PKG_VERSION"))
                .set(1.0);
            Ok(handle)
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
        let build = format!(
            "proxypool_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        );
        assert!(second.render().contains(&build), "{}", second.render());
        let (_, local) = MetricsHandle::local();
        assert!(!local.same_registry(&first));
    }
}

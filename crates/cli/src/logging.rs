//! Log output: `tracing` events to stderr, filtered by `PROXYPOOL_LOG` (or `RUST_LOG`), as
//! text or, with `[log] format = "json"`, one JSON object per line (time, level, target,
//! message and the event's fields at the top level) for log collectors.
//!
//! Stdout stays for what a command prints on purpose (`dev`'s banner, `extract`'s table,
//! `check-config`'s summary), so it can be piped. The crates never log a secret's value;
//! nothing here adds fields of its own.

use proxypool_config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the subscriber; `default` applies when neither variable is set.
pub(crate) fn init(default: &str, format: LogFormat) {
    let filter = std::env::var("PROXYPOOL_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(true);
    // A second init (never in this binary) would fail; ignoring it keeps logging best effort.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}

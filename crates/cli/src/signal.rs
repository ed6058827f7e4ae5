//! Shutdown signals: the first SIGINT/SIGTERM starts a graceful shutdown; a second one
//! while it runs ends the process at once (exit code 130), for an operator who does not
//! want to wait out the grace periods.
//!
//! The handlers are registered when [`Shutdown::install`] is called, at the very start of
//! a serving command, so a signal that arrives during startup is not lost to the default
//! action (which would kill the process without cleaning up).

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Becomes true on the first signal.
#[derive(Debug, Clone)]
pub(crate) struct Shutdown {
    requested: watch::Receiver<bool>,
}

impl Shutdown {
    /// Registers the handlers now (inside a runtime) and watches them in the background.
    pub(crate) fn install() -> std::io::Result<Shutdown> {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            tracing::info!(
                "shutdown requested; finishing in-flight work (signal again to exit now)"
            );
            tx.send_replace(true);
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            eprintln!("second signal: exiting without waiting");
            std::process::exit(130);
        });
        Ok(Shutdown { requested: rx })
    }

    /// Completes once a shutdown was requested.
    pub(crate) async fn wait(&self) {
        let mut requested = self.requested.clone();
        // A closed channel cannot happen while the watcher task lives; treat it as a request.
        let _ = requested.wait_for(|r| *r).await;
    }
}

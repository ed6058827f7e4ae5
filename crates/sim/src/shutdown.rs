//! Shutdown on drop for every task a handle spawned.
//!
//! A handle owns a [`Shutdown`]; every task it spawns (accept loop, connections, tunnels)
//! runs under [`spawn_until`] with a clone of the signal, so dropping the handle ends them
//! all, including tunnels that hyper hands over after an upgrade.

use std::future::Future;

use tokio::sync::watch;

/// Owned by a handle; triggers on [`Shutdown::trigger`] or drop.
#[derive(Debug)]
pub(crate) struct Shutdown {
    tx: watch::Sender<bool>,
}

/// A cloneable receiver of the shutdown.
#[derive(Clone, Debug)]
pub(crate) struct ShutdownSignal {
    rx: watch::Receiver<bool>,
}

impl Shutdown {
    pub(crate) fn new() -> Self {
        let (tx, _) = watch::channel(false);
        Self { tx }
    }

    pub(crate) fn signal(&self) -> ShutdownSignal {
        ShutdownSignal {
            rx: self.tx.subscribe(),
        }
    }

    pub(crate) fn trigger(&self) {
        self.tx.send_replace(true);
    }
}

impl Drop for Shutdown {
    fn drop(&mut self) {
        self.trigger();
    }
}

impl ShutdownSignal {
    /// Resolves once shutdown was triggered (or its owner is gone).
    pub(crate) async fn wait(&mut self) {
        // Err means the sender is gone, which is a shutdown too.
        let _ = self.rx.wait_for(|stopped| *stopped).await;
    }
}

/// Spawns `fut`, dropped (and so cancelled) when `signal` fires.
pub(crate) fn spawn_until<F>(signal: &ShutdownSignal, fut: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let mut signal = signal.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = fut => {}
            () = signal.wait() => {}
        }
    });
}

//! One attempt at a time per idempotency key (per client), in this process.
//!
//! A keyed extraction's quota receipt is its key, so every attempt with the key shares one
//! charge: the first charges it, and a retry that arrives while the receipt exists is
//! admitted as a replay on the strength of it. An attempt outlives its answer when the
//! request times out or the client goes away (`crate::completion`), and it may still
//! refund or spend that charge when its store call fails. Had a retry already been
//! admitted on the receipt, that settlement would take away the charge the retry stood on,
//! and the retry's extraction would be free. So a retry waits here until the earlier
//! attempt with its key has settled, and is then charged, or replayed, against what that
//! attempt left behind. (Two API instances share only the quota store: a retry sent to
//! another instance while the first attempt still runs is not held back by this.)

use proxypool_core::{ClientId, LockExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

type Running = Mutex<HashMap<(ClientId, String), watch::Receiver<()>>>;

/// The keys with an attempt running (part of the API state).
#[derive(Debug, Default)]
pub(crate) struct KeyTurns {
    running: Arc<Running>,
}

/// An attempt's turn with its key: later attempts with the key wait until it is dropped.
#[derive(Debug)]
pub(crate) struct KeyTurn {
    running: Arc<Running>,
    key: (ClientId, String),
    // Dropped after `drop` has removed the entry, which wakes the waiting attempts.
    _done: watch::Sender<()>,
}

impl Drop for KeyTurn {
    fn drop(&mut self) {
        self.running.lock_or_recover().remove(&self.key);
    }
}

impl KeyTurns {
    /// `client`'s turn with `key`, once no earlier attempt with it is running.
    pub(crate) async fn take(&self, client: &ClientId, key: &str) -> KeyTurn {
        let key = (client.clone(), key.to_owned());
        loop {
            let mut earlier = {
                let mut running = self.running.lock_or_recover();
                match running.get(&key) {
                    Some(earlier) => earlier.clone(),
                    None => {
                        let (done, receiver) = watch::channel(());
                        running.insert(key.clone(), receiver);
                        return KeyTurn {
                            running: Arc::clone(&self.running),
                            key,
                            _done: done,
                        };
                    }
                }
            };
            // Nothing is ever sent: this returns when the earlier turn's sender is dropped.
            let _ = earlier.changed().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_second_attempt_with_the_key_waits_for_the_first() {
        let turns = KeyTurns::default();
        let alice = ClientId::new("alice").unwrap();
        let bob = ClientId::new("bob").unwrap();
        let first = turns.take(&alice, "k").await;
        // Another key, or another client's same key, does not wait.
        drop(turns.take(&alice, "other").await);
        drop(turns.take(&bob, "k").await);

        // Polled once: it can only go on when the first turn is dropped.
        let mut second = Box::pin(turns.take(&alice, "k"));
        assert!(
            tokio::time::timeout(Duration::ZERO, second.as_mut())
                .await
                .is_err(),
            "the second attempt went ahead while the first held its turn"
        );
        drop(first);
        let second = second.await;
        drop(second);
        assert!(turns.running.lock_or_recover().is_empty());
    }
}

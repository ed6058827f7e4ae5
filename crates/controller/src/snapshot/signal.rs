//! A change signal: "ownership may have changed, re-read". Long-polls wait on it.
//!
//! A watch channel of a counter: waking is cheap, a missed wake-up is impossible (the
//! receiver sees the latest value), and no lock is involved.

use tokio::sync::watch;

#[derive(Debug, Clone)]
pub struct ChangeSignal {
    sender: watch::Sender<u64>,
}

impl Default for ChangeSignal {
    fn default() -> Self {
        ChangeSignal {
            sender: watch::Sender::new(0),
        }
    }
}

impl ChangeSignal {
    pub fn notify(&self) {
        self.sender.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// How many times the signal fired: a reader that saw the same number before and
    /// after some work knows nothing notified in between.
    pub fn generation(&self) -> u64 {
        *self.sender.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.sender.subscribe()
    }
}

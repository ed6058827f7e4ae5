//! [`AlwaysLeader`]: a permanent term, for the memory store's one controller.

use super::term::{Leadership, Term};
use tokio::sync::watch;

/// Always the leader, in term 1 (one controller per memory store).
#[derive(Debug)]
pub struct AlwaysLeader {
    sender: watch::Sender<Option<Term>>,
}

impl AlwaysLeader {
    pub fn new() -> Self {
        AlwaysLeader {
            sender: watch::Sender::new(Some(Term(1))),
        }
    }
}

impl Default for AlwaysLeader {
    fn default() -> Self {
        AlwaysLeader::new()
    }
}

impl Leadership for AlwaysLeader {
    fn watch(&self) -> watch::Receiver<Option<Term>> {
        self.sender.subscribe()
    }
}

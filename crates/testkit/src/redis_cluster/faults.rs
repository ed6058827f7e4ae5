//! Faults a test injects into one node: SIGKILL, SIGSTOP and SIGCONT, and a restart on its
//! ports under its old identity. Each remembers what the node was, for the waits.

use crate::error::Result;
use crate::private_server::PrivateServer;
use crate::process;

use super::{NodeState, RedisCluster};

impl RedisCluster {
    /// Kills a node with SIGKILL (a crash: it loses its data, its `nodes.conf` stays).
    /// Killing a killed node is fine.
    pub fn kill(&mut self, port: u16) -> Result<()> {
        let index = self.index_of(port)?;
        if self.nodes[index].state == NodeState::Killed {
            return Ok(());
        }
        self.note_fault(index);
        self.nodes[index].stop("KILL", process::STOP_TIMEOUT);
        self.nodes[index].state = NodeState::Killed;
        Ok(())
    }

    /// Freezes a node with SIGSTOP: its sockets stay open but it answers nothing, like a
    /// hung host. Pausing a paused node is fine; a killed node cannot be paused.
    pub fn pause(&mut self, port: u16) -> Result<()> {
        let index = self.index_of(port)?;
        match self.nodes[index].state {
            NodeState::Paused => return Ok(()),
            NodeState::Killed => return Err(self.killed(port, "pause")),
            NodeState::Running => {}
        }
        self.note_fault(index);
        self.nodes[index].signal("STOP")?;
        self.nodes[index].state = NodeState::Paused;
        Ok(())
    }

    /// Lets a paused node run again (SIGCONT). Resuming a running node is fine.
    pub fn resume(&mut self, port: u16) -> Result<()> {
        let index = self.index_of(port)?;
        match self.nodes[index].state {
            NodeState::Running => return Ok(()),
            NodeState::Killed => return Err(self.killed(port, "resume")),
            NodeState::Paused => {}
        }
        self.nodes[index].signal("CONT")?;
        self.nodes[index].state = NodeState::Running;
        Ok(())
    }

    /// Starts a node again on its ports with its `nodes.conf` (killing it first if it
    /// runs or is paused), and waits until it answers `PING`. It rejoins under its old
    /// identity, empty (nothing is persisted); after a failover it becomes a replica of
    /// the node that took its place ([`wait_for_replica`](Self::wait_for_replica)).
    pub fn restart(&mut self, port: u16) -> Result<()> {
        let index = self.index_of(port)?;
        if self.nodes[index].state != NodeState::Killed {
            self.kill(port)?;
        }
        self.nodes[index].start_again(port)?;
        self.nodes[index].state = NodeState::Running;
        Ok(())
    }

    /// Remembers what the node was before a fault, for `wait_for_failover`. Best effort:
    /// when no live node answers, an earlier snapshot stays.
    pub(super) fn note_fault(&mut self, index: usize) {
        if let Ok(view) = self.freshest_view() {
            self.nodes[index].faulted_as = view.shard_of(self.nodes[index].port);
            self.note_roles(&view);
        }
    }
}

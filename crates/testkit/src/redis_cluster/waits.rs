//! Waits until the cluster has healed: a replica promoted in place of a failed primary, a
//! restarted node replicating again, every node agreeing. Each is bounded and fails with
//! every node's log tail.

use std::time::Duration;

use crate::error::{Result, TestkitError};

use super::{ClusterRole, NodeState, RedisCluster};

impl RedisCluster {
    /// Waits until a replica of `old_primary` (as it was when last killed, paused or
    /// restarted through the guard) owns all of its slots in the eyes of every live node,
    /// and the cluster is healthy again (see [`wait_until_healthy`](Self::wait_until_healthy));
    /// returns the promoted replica's port.
    pub fn wait_for_failover(&mut self, old_primary: u16, timeout: Duration) -> Result<u16> {
        let index = self.index_of(old_primary)?;
        let shard = match &self.nodes[index].faulted_as {
            Some(shard) => shard.clone(),
            // Faulted behind the guard's back: the cluster may still list its slots.
            None => self
                .freshest_view()
                .ok()
                .and_then(|view| view.shard_of(old_primary))
                .ok_or_else(|| TestkitError::Cluster {
                    message: format!(
                        "node {old_primary} was no primary with slots when it was last faulted"
                    ),
                })?,
        };
        if shard.replicas.is_empty() {
            return Err(TestkitError::Cluster {
                message: format!("primary {old_primary} had no replica to take its slots over"),
            });
        }
        let waiting_for = format!(
            "a replica of {old_primary} ({:?}) owning its slots",
            shard.replicas
        );
        let (promoted, view) = self.poll(&waiting_for, timeout, |view, live| {
            let owners: Vec<u16> = shard
                .slots
                .iter()
                .filter_map(|&(start, _)| view.owner_of(start).map(|owner| owner.port))
                .collect();
            let promoted = match owners.first() {
                Some(&first)
                    if owners.len() == shard.slots.len()
                        && owners.iter().all(|&port| port == first) =>
                {
                    first
                }
                _ => return Err(format!("its slots are owned by {owners:?}")),
            };
            if !shard.replicas.contains(&promoted) || !live.contains(&promoted) {
                return Err(format!("its slots are owned by {promoted}"));
            }
            Ok(promoted)
        })?;
        self.note_roles(&view);
        Ok(promoted)
    }

    /// Waits until the node on `port` is a replica in the eyes of every live node, has
    /// synced with its primary, and the cluster is healthy; returns the primary's port.
    pub fn wait_for_replica(&mut self, port: u16, timeout: Duration) -> Result<u16> {
        let index = self.index_of(port)?;
        if self.nodes[index].state != NodeState::Running {
            return Err(TestkitError::Cluster {
                message: format!(
                    "node {port} is {:?}: it cannot become a replica",
                    self.nodes[index].state
                ),
            });
        }
        let (primary, view) = self.poll(
            &format!("node {port} replicating a live primary"),
            timeout,
            |view, live| match view.role_of(port) {
                Some((ClusterRole::Replica, primary)) if live.contains(&primary) => Ok(primary),
                other => Err(format!("node {port} is {other:?}")),
            },
        )?;
        self.note_roles(&view);
        Ok(primary)
    }

    /// Waits until every running node says `cluster_state:ok`, they all agree on the owner
    /// of every slot (all covered) and on every running node's role, and every running
    /// replica has synced with its primary.
    pub fn wait_until_healthy(&mut self, timeout: Duration) -> Result<()> {
        let ((), view) = self.poll("a healthy cluster", timeout, |_, _| Ok(()))?;
        self.note_roles(&view);
        Ok(())
    }
}

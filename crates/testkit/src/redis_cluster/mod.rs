//! [`RedisCluster`]: a private Redis Cluster (primaries, each with replicas) for tests of
//! code that shards over a cluster, and the faults such code must survive.
//!
//! Every node is a private `redis-server` (cluster mode, no persistence) on a free loopback
//! port, with its cluster bus on a second free port: the default bus port, port + 10000, may
//! be taken or lie beyond 65535 for the kernel's ephemeral ports the kit hands out.
//! `redis-cli --cluster create` forms the cluster; the guard then waits (bounded) until the
//! live nodes agree on who owns every slot and every replica has synced.
//!
//! Faults: [`kill`](RedisCluster::kill) (SIGKILL), [`pause`](RedisCluster::pause) /
//! [`resume`](RedisCluster::resume) (SIGSTOP / SIGCONT), and
//! [`restart`](RedisCluster::restart), which starts a node again on its ports with its
//! `nodes.conf`, so it rejoins under its old identity (as a replica after a failover).
//! The waits ([`wait_for_failover`](RedisCluster::wait_for_failover),
//! [`wait_for_replica`](RedisCluster::wait_for_replica),
//! [`wait_until_healthy`](RedisCluster::wait_until_healthy)) return once the cluster has
//! healed, and fail with every node's log tail otherwise.
//!
//! The node timeout is [`CLUSTER_NODE_TIMEOUT`] (1 s instead of Redis's 15 s) so that a
//! failover takes a few seconds. The cluster is always private: `PROXYPOOL_TEST_REDIS_URL`
//! does not apply.
//!
//! TLS ([`start_tls`](RedisCluster::start_tls)): every node also serves TLS on a third port
//! with a server certificate of a [`TestCa`], and the nodes speak TLS to each other (cluster
//! bus and replication, `tls-cluster yes`, each presenting a client certificate of the same
//! CA). A client connected over TLS is told the nodes' TLS ports (`CLUSTER SLOTS`, MOVED),
//! one connected in plain text their plain ports, which the guard itself keeps using.
//!
//! Cleanup: dropping the guard kills every node and removes the scratch directory. If the
//! test process dies instead, each node's janitor kills it (SIGKILL also ends a paused
//! node) and a directory janitor removes the whole tree (see `process`).
//!
//! Files, one concern each: `formation` (starting the nodes, `redis-cli --cluster create`,
//! the wait for agreement), `node` (one node's process, ports and TLS files), `topology`
//! (`CLUSTER NODES` parsed), `observe` (what the live nodes say, whether they agree, the
//! poll), `faults` (kill, pause, resume, restart), `waits` (failover, rejoin, healthy),
//! `slots` (keys to slots).

mod faults;
mod formation;
mod node;
mod observe;
mod slots;
mod topology;
mod waits;

use std::path::Path;
use std::time::Duration;

use crate::error::{Result, TestkitError};
use crate::private_server::PrivateServer;
use crate::process::{self, Janitor};
use crate::redis::RespConnection;
use crate::scratch::ScratchDir;

use node::Node;
pub use node::{CLUSTER_NODE_TIMEOUT, NodeState};
use topology::View;
pub use topology::{CLUSTER_SLOTS, ClusterRole};

/// How often the waits look at the cluster (each look opens one connection per live node).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Log lines per node in a failure message.
const LOG_TAIL_LINES: usize = 15;

/// One node of a [`RedisCluster`], as [`RedisCluster::nodes`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Its client port on 127.0.0.1 (stays the same across restarts).
    pub port: u16,
    /// `redis://127.0.0.1:PORT/`.
    pub url: String,
    /// `rediss://127.0.0.1:TLS_PORT/` on a cluster started with
    /// [`RedisCluster::start_tls`] (its TLS port also stays the same across restarts).
    pub tls_url: Option<String>,
    /// Its process id (`None` while killed).
    pub pid: Option<u32>,
    /// Its role when the guard last looked: at startup, and after each fault and wait.
    pub role: ClusterRole,
    /// Running, paused or killed.
    pub state: NodeState,
}

/// A private Redis Cluster for one test: `primaries` primaries with
/// `replicas_per_primary` replicas each, every node a `redis-server` of its own. All of
/// them are killed, and their directory removed, when the guard drops.
///
/// ```no_run
/// use std::time::Duration;
/// let Some(mut cluster) = proxypool_testkit::redis_cluster_or_skip(3, 1) else { return };
/// let seeds = cluster.seed_urls(); // for a cluster client
/// let slot = proxypool_testkit::RedisCluster::key_slot("{pool}:active");
/// let primary = cluster.primary_of_slot(slot).unwrap();
/// cluster.kill(primary).unwrap();
/// let promoted = cluster.wait_for_failover(primary, Duration::from_secs(15)).unwrap();
/// cluster.restart(primary).unwrap();
/// assert_eq!(cluster.wait_for_replica(primary, Duration::from_secs(15)).unwrap(), promoted);
/// # drop(seeds);
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    // Field order matters: the nodes die before their directory is removed.
    nodes: Vec<Node>,
    /// Removes the directory should the test process die; disarmed on drop.
    janitor: Option<Janitor>,
    dir: ScratchDir,
}

impl RedisCluster {
    /// Every node as the guard last saw it.
    pub fn nodes(&self) -> Vec<ClusterNode> {
        self.nodes
            .iter()
            .map(|node| ClusterNode {
                port: node.port,
                url: node.url(),
                tls_url: node.tls_url(),
                pid: node.pid(),
                role: node.role,
                state: node.state,
            })
            .collect()
    }

    /// Every node's URL (killed ones too): the seeds of a cluster client.
    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// Every node's `rediss://` URL on a cluster started with [`start_tls`](Self::start_tls)
    /// (empty otherwise).
    pub fn tls_seed_urls(&self) -> Vec<String> {
        self.nodes.iter().filter_map(Node::tls_url).collect()
    }

    /// The scratch directory holding every node's directory (`node-N`, each with its
    /// `redis.conf`, `nodes.conf` and `redis.log`) and `redis-cli.log`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Opens a RESP connection to one node (any port, the guard does not check it).
    pub fn connect(&self, port: u16) -> Result<RespConnection> {
        RespConnection::connect("127.0.0.1", port)
    }

    /// The ports of the primaries that serve slots now (flagged `fail` ones excluded), in
    /// the order of their first slot; read from `CLUSTER NODES` of the live node that knows
    /// the latest configuration. Mid-failover the answer can change from one call to the
    /// next: wait with [`wait_for_failover`](Self::wait_for_failover) first.
    pub fn primaries(&self) -> Result<Vec<u16>> {
        Ok(self.freshest_view()?.serving_primaries())
    }

    /// The port of the primary that owns `slot` now (read like [`primaries`](Self::primaries);
    /// it may be a failed primary whose replica has not taken over yet).
    pub fn primary_of_slot(&self, slot: u16) -> Result<u16> {
        if slot >= CLUSTER_SLOTS {
            return Err(TestkitError::Cluster {
                message: format!("slot {slot} does not exist (0..{CLUSTER_SLOTS})"),
            });
        }
        let view = self.freshest_view()?;
        view.owner_of(slot)
            .map(|owner| owner.port)
            .ok_or_else(|| TestkitError::Cluster {
                message: format!("node {} sees no owner of slot {slot}", view.from),
            })
    }

    fn index_of(&self, port: u16) -> Result<usize> {
        self.nodes
            .iter()
            .position(|node| node.port == port)
            .ok_or_else(|| TestkitError::Cluster {
                message: format!("no node of this cluster listens on port {port}"),
            })
    }

    fn killed(&self, port: u16, operation: &str) -> TestkitError {
        TestkitError::Cluster {
            message: format!("cannot {operation} node {port}: it was killed (restart it)"),
        }
    }

    /// Ports of the nodes that run (neither paused nor killed).
    fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|node| node.state == NodeState::Running)
            .map(|node| node.port)
            .collect()
    }

    fn note_roles(&mut self, view: &View) {
        for node in &mut self.nodes {
            if let Some((role, _)) = view.role_of(node.port) {
                node.role = role;
            }
        }
    }

    fn log_tails(&self) -> String {
        self.nodes
            .iter()
            .map(|node| {
                format!(
                    "--- node {} ({:?}), {}:\n{}",
                    node.port,
                    node.state,
                    node.log.display(),
                    process::log_tail(&node.log, LOG_TAIL_LINES)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        // SIGKILL ends paused nodes too; each stop reaps its node before the next.
        for node in &mut self.nodes {
            node.stop("KILL", process::STOP_TIMEOUT);
        }
        // The directory goes with `self.dir` now; the janitor must not race it.
        if let Some(janitor) = self.janitor.take() {
            janitor.disarm();
        }
    }
}

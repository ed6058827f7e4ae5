//! Creating a [`RedisCluster`]: its nodes started on free ports, `redis-cli --cluster
//! create` over them, and the wait until every node agrees on every slot and every replica
//! has synced.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::binaries;
use crate::error::{Result, TestkitError};
use crate::process::{self, Janitor};
use crate::scratch::{ScratchDir, scratch_base};
use crate::tls::TestCa;

use super::node::{ClusterTls, Node};
use super::{CLUSTER_SLOTS, POLL_INTERVAL, RedisCluster};

/// How long `redis-cli --cluster create` may take (it needs about a second).
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a new cluster may take to agree on its slots and sync its replicas: about a
/// second on an idle machine; the bound is for a busy CI runner.
const FORMATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Removes the terminal colour codes redis-cli puts in its output.
pub(super) fn strip_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // `ESC [ ... m`
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

impl RedisCluster {
    /// Starts `primaries * (1 + replicas_per_primary)` nodes, forms the cluster with
    /// `redis-cli --cluster create`, and waits (bounded) until every node says
    /// `cluster_state:ok`, all nodes agree on the owners of all 16384 slots and every
    /// replica has synced. Redis needs at least 3 primaries.
    ///
    /// Fails with [`TestkitError::BinaryNotFound`] when redis-server or redis-cli is
    /// missing (see [`redis_cluster_or_skip`](crate::redis_cluster_or_skip)).
    pub fn start(primaries: usize, replicas_per_primary: usize) -> Result<Self> {
        Self::start_with(primaries, replicas_per_primary, None)
    }

    /// As [`start`](Self::start), every node also serving TLS with a server certificate of
    /// `ca` (for `127.0.0.1` and `localhost`) and the nodes speaking TLS among themselves
    /// (see the module docs); [`tls_seed_urls`](Self::tls_seed_urls) are the `rediss://`
    /// seeds. A client needs no certificate of its own.
    pub fn start_tls(primaries: usize, replicas_per_primary: usize, ca: &TestCa) -> Result<Self> {
        let tls = ClusterTls {
            server: ca.server("redis-cluster")?,
            client: ca.client("redis-cluster-bus", "redis-cluster-node")?,
            ca: ca.ca_path().to_owned(),
        };
        Self::start_with(primaries, replicas_per_primary, Some(tls))
    }

    pub(super) fn start_with(
        primaries: usize,
        replicas_per_primary: usize,
        tls: Option<ClusterTls>,
    ) -> Result<Self> {
        if primaries < 3 {
            return Err(TestkitError::Cluster {
                message: format!("a cluster needs at least 3 primaries, not {primaries}"),
            });
        }
        let binary = binaries::redis_server()?;
        let cli = binaries::redis_cli()?;
        let dir = ScratchDir::create(&scratch_base(None), "redis-cluster")?;
        // Armed before the first node starts: the nodes' own janitors only kill them.
        let janitor = Janitor::arm("KILL", None, Some(dir.path()))?;
        let mut cluster = Self {
            nodes: Vec::new(),
            janitor: Some(janitor),
            dir,
        };
        for index in 0..primaries * (1 + replicas_per_primary) {
            let mut node = Node::create(&binary, cluster.dir.path(), index, tls.as_ref())?;
            node.launch_on_free_ports()?;
            cluster.nodes.push(node);
        }
        cluster.create(&cli, replicas_per_primary)?;
        let waiting_for = format!(
            "{primaries} primaries with {replicas_per_primary} synced replica(s) each, \
             all nodes agreeing on all {CLUSTER_SLOTS} slots"
        );
        let view = cluster.poll(&waiting_for, FORMATION_TIMEOUT, |view, _| {
            let serving = view.serving_primaries();
            if serving.len() != primaries {
                return Err(format!("{} primaries own slots", serving.len()));
            }
            for primary in serving {
                let replicas = view
                    .shard_of(primary)
                    .map_or(0, |shard| shard.replicas.len());
                if replicas != replicas_per_primary {
                    return Err(format!("primary {primary} has {replicas} replica(s)"));
                }
            }
            Ok(())
        })?;
        cluster.note_roles(&view.1);
        Ok(cluster)
    }

    /// Runs `redis-cli --cluster create` over all nodes (bounded by [`CREATE_TIMEOUT`]).
    pub(super) fn create(&self, cli: &Path, replicas_per_primary: usize) -> Result<()> {
        let log = self.dir.path().join("redis-cli.log");
        let output = std::fs::File::create(&log)
            .and_then(|file| Ok((file.try_clone()?, file)))
            .map_err(|error| TestkitError::io(format!("creating {}", log.display()), error))?;
        let mut command = Command::new(cli);
        command
            .args(["--cluster", "create"])
            .args(
                self.nodes
                    .iter()
                    .map(|node| format!("127.0.0.1:{}", node.port)),
            )
            .args(["--cluster-replicas", &replicas_per_primary.to_string()])
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .stdout(Stdio::from(output.0))
            .stderr(Stdio::from(output.1))
            .env("LC_ALL", "C");
        let mut child = command
            .spawn()
            .map_err(|error| TestkitError::io(format!("spawning {}", cli.display()), error))?;
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => break status.to_string(),
                Ok(None) if started.elapsed() < CREATE_TIMEOUT => {
                    std::thread::sleep(POLL_INTERVAL);
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break format!("killed after {CREATE_TIMEOUT:?}");
                }
                Err(error) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(TestkitError::io("waiting for redis-cli", error));
                }
            }
        };
        Err(TestkitError::CommandFailed {
            program: format!("{} --cluster create", cli.display()),
            status,
            output: format!(
                "{}\nnode log tails:\n{}",
                strip_colours(&process::log_tail(&log, 40)),
                self.log_tails()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stripped_from_redis_cli_output() {
        assert_eq!(
            strip_colours("\u{1b}[29;1m>>> Creating\n\u{1b}[0m[OK] done"),
            ">>> Creating\n[OK] done"
        );
    }
}

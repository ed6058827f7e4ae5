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

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::binaries;
use crate::error::{Result, TestkitError};
use crate::private_server::{PORT_ATTEMPTS, PrivateServer};
use crate::process::{self, Janitor, Launch, ServerProcess, StartFailure};
use crate::redis::{RespConnection, RespValue, config_quote, ping, write_config};
use crate::scratch::{ScratchDir, scratch_base};
use crate::tls::{CertFiles, TestCa};

/// How long a node may stay silent before the others suspect it: short, so that a killed
/// or paused primary is failed over within a few seconds.
pub const CLUSTER_NODE_TIMEOUT: Duration = Duration::from_millis(1000);

/// The number of hash slots of every Redis Cluster.
pub const CLUSTER_SLOTS: u16 = 16384;

/// How long `redis-cli --cluster create` may take (it needs about a second).
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a new cluster may take to agree on its slots and sync its replicas: about a
/// second on an idle machine; the bound is for a busy CI runner.
const FORMATION_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the waits look at the cluster (each look opens one connection per live node).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Log lines per node in a failure message.
const LOG_TAIL_LINES: usize = 15;

/// A node's role in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterRole {
    /// Owns slots (or could: a primary without slots is still a primary).
    Primary,
    /// Replicates a primary and may be promoted when it fails.
    Replica,
}

/// What the guard has done to a node's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Running (as far as the guard knows).
    Running,
    /// Stopped with SIGSTOP by [`RedisCluster::pause`].
    Paused,
    /// Killed with SIGKILL by [`RedisCluster::kill`].
    Killed,
}

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

/// The slots a primary owned and the ports of its replicas, taken just before a fault, so
/// that [`RedisCluster::wait_for_failover`] knows whom to expect in its place.
#[derive(Debug, Clone)]
struct Shard {
    slots: Vec<(u16, u16)>,
    replicas: Vec<u16>,
}

/// The TLS side of every node: the files of a [`TestCa`].
#[derive(Debug, Clone)]
struct ClusterTls {
    /// The certificate clients (and other nodes) are shown.
    server: CertFiles,
    /// The certificate a node shows the others it connects to (the bus requires one).
    client: CertFiles,
    ca: PathBuf,
}

/// A node's server process, directory and ports.
#[derive(Debug)]
struct Node {
    process: Option<ServerProcess>,
    binary: PathBuf,
    config: PathBuf,
    log: PathBuf,
    dir: PathBuf,
    port: u16,
    bus_port: u16,
    /// With TLS: the port TLS clients connect to, and the files.
    tls: Option<(u16, ClusterTls)>,
    role: ClusterRole,
    state: NodeState,
    /// What the node was just before its last kill, pause or restart (`None`: no primary).
    faulted_as: Option<Shard>,
}

impl PrivateServer for Node {
    fn process_mut(&mut self) -> &mut Option<ServerProcess> {
        &mut self.process
    }

    fn launch(&mut self, port: u16) -> std::result::Result<(), StartFailure> {
        let log_offset = process::log_len(&self.log);
        let mut args: Vec<std::ffi::OsString> = vec![
            self.config.clone().into_os_string(),
            "--port".into(),
            port.to_string().into(),
            "--cluster-port".into(),
            self.bus_port.to_string().into(),
        ];
        if let Some((tls_port, tls)) = &self.tls {
            args.extend([
                "--tls-port".into(),
                tls_port.to_string().into(),
                "--tls-cert-file".into(),
                tls.server.cert.clone().into_os_string(),
                "--tls-key-file".into(),
                tls.server.key.clone().into_os_string(),
                "--tls-client-cert-file".into(),
                tls.client.cert.clone().into_os_string(),
                "--tls-client-key-file".into(),
                tls.client.key.clone().into_os_string(),
                "--tls-ca-cert-file".into(),
                tls.ca.clone().into_os_string(),
                // Clients need no certificate; the bus always checks the other node's.
                "--tls-auth-clients".into(),
                "optional".into(),
                "--tls-cluster".into(),
                "yes".into(),
                "--tls-replication".into(),
                "yes".into(),
            ]);
        }
        let launch = Launch {
            server: "redis-server",
            program: &self.binary,
            args,
            log: &self.log,
            working_dir: &self.dir,
            user: None,
            janitor_signal: "KILL",
            // The cluster's directory janitor removes the whole tree, this node's included.
            janitor_removes: None,
        };
        let mut server = ServerProcess::spawn(&launch)?;
        process::wait_until_ready(&mut server, &self.log, log_offset, || ping(port))?;
        self.process = Some(server);
        Ok(())
    }
}

impl Node {
    fn create(
        binary: &Path,
        cluster_dir: &Path,
        index: usize,
        tls: Option<&ClusterTls>,
    ) -> Result<Self> {
        let dir = cluster_dir.join(format!("node-{index}"));
        std::fs::create_dir(&dir)
            .map_err(|error| TestkitError::io(format!("creating {}", dir.display()), error))?;
        let cluster_settings = format!(
            "cluster-enabled yes\n\
             # Kept across a restart: the node rejoins under its old identity.\n\
             cluster-config-file {}\n\
             cluster-node-timeout {}\n\
             # A replica syncs at once instead of the master waiting 5 s for more replicas;\n\
             # an unsynced replica refuses to fail over.\n\
             repl-diskless-sync-delay 0\n",
            config_quote(&dir.join("nodes.conf").to_string_lossy()),
            CLUSTER_NODE_TIMEOUT.as_millis(),
        );
        let config = write_config(&dir, &cluster_settings)?;
        Ok(Self {
            process: None,
            binary: binary.to_owned(),
            config,
            log: dir.join("redis.log"),
            dir,
            port: 0,
            bus_port: 0,
            tls: tls.map(|tls| (0, tls.clone())),
            role: ClusterRole::Primary,
            state: NodeState::Running,
            faulted_as: None,
        })
    }

    /// Launches on fresh free ports (client, bus and, with TLS, the TLS port), new ones
    /// when the server found one of them taken.
    fn launch_on_free_ports(&mut self) -> Result<()> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.bus_port = process::free_loopback_port()?;
            if let Some((tls_port, _)) = &mut self.tls {
                *tls_port = process::free_loopback_port()?;
            }
            let port = process::free_loopback_port()?;
            match self.launch(port) {
                Ok(()) => {
                    self.port = port;
                    return Ok(());
                }
                Err(failure) if failure.port_taken && attempt < PORT_ATTEMPTS => continue,
                Err(failure) => return Err(failure.error),
            }
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn tls_url(&self) -> Option<String> {
        self.tls
            .as_ref()
            .map(|(tls_port, _)| format!("rediss://127.0.0.1:{tls_port}/"))
    }

    fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    fn signal(&self, signal: &str) -> Result<()> {
        match &self.process {
            Some(process) => process.signal(signal),
            None => Err(TestkitError::Cluster {
                message: format!("node {} has no process to send SIG{signal} to", self.port),
            }),
        }
    }
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeLine {
    id: String,
    port: u16,
    primary: bool,
    /// Flagged `fail` (the majority agrees it is down), not just `fail?`.
    failed: bool,
    primary_id: Option<String>,
    config_epoch: u64,
    slots: Vec<(u16, u16)>,
}

/// One node's `CLUSTER NODES`: the cluster as that node sees it.
#[derive(Debug, Clone)]
struct View {
    /// The node that answered.
    from: u16,
    lines: Vec<NodeLine>,
}

fn parse_slot_range(field: &str) -> Option<(u16, u16)> {
    // `[5461->-id]` / `[5461-<-id]`: a slot being migrated or imported, not owned.
    if field.starts_with('[') {
        return None;
    }
    match field.split_once('-') {
        Some((start, end)) => Some((start.parse().ok()?, end.parse().ok()?)),
        None => {
            let slot = field.parse().ok()?;
            Some((slot, slot))
        }
    }
}

impl View {
    fn parse(from: u16, text: &str) -> std::result::Result<Self, String> {
        let mut lines = Vec::new();
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let malformed = || format!("node {from}: malformed CLUSTER NODES line {line:?}");
            if fields.len() < 8 {
                return Err(malformed());
            }
            // `127.0.0.1:7000@17000[,hostname]`
            let address = fields[1].split(['@', ',']).next().unwrap_or_default();
            let port = address
                .rsplit_once(':')
                .and_then(|(_, port)| port.parse().ok())
                .ok_or_else(malformed)?;
            let flags: Vec<&str> = fields[2].split(',').collect();
            lines.push(NodeLine {
                id: fields[0].to_owned(),
                port,
                primary: flags.contains(&"master"),
                failed: flags.contains(&"fail"),
                primary_id: (fields[3] != "-").then(|| fields[3].to_owned()),
                config_epoch: fields[6].parse().map_err(|_| malformed())?,
                slots: fields[8..]
                    .iter()
                    .filter_map(|field| parse_slot_range(field))
                    .collect(),
            });
        }
        Ok(Self { from, lines })
    }

    /// The highest config epoch this node knows of: a node that has not heard of the
    /// latest failover yet (one just restarted, say) knows a lower one.
    fn freshness(&self) -> u64 {
        self.lines
            .iter()
            .map(|line| line.config_epoch)
            .max()
            .unwrap_or(0)
    }

    fn by_port(&self, port: u16) -> Option<&NodeLine> {
        self.lines.iter().find(|line| line.port == port)
    }

    fn by_id(&self, id: &str) -> Option<&NodeLine> {
        self.lines.iter().find(|line| line.id == id)
    }

    fn owner_of(&self, slot: u16) -> Option<&NodeLine> {
        self.lines.iter().find(|line| {
            line.slots
                .iter()
                .any(|&(start, end)| (start..=end).contains(&slot))
        })
    }

    /// Slot ranges with the port of their owner, sorted: two views agree on the slots
    /// exactly when these are equal.
    fn slot_map(&self) -> Vec<(u16, u16, u16)> {
        let mut map: Vec<(u16, u16, u16)> = self
            .lines
            .iter()
            .flat_map(|line| {
                line.slots
                    .iter()
                    .map(|&(start, end)| (start, end, line.port))
            })
            .collect();
        map.sort_unstable();
        map
    }

    fn covered_slots(&self) -> usize {
        self.slot_map()
            .iter()
            .map(|&(start, end, _)| usize::from(end - start) + 1)
            .sum()
    }

    /// A node's role and, for a replica, its primary's port (0 when the primary is unknown).
    fn role_of(&self, port: u16) -> Option<(ClusterRole, u16)> {
        let line = self.by_port(port)?;
        if line.primary {
            return Some((ClusterRole::Primary, 0));
        }
        let primary = line
            .primary_id
            .as_deref()
            .and_then(|id| self.by_id(id))
            .map_or(0, |primary| primary.port);
        Some((ClusterRole::Replica, primary))
    }

    /// Ports of the primaries that own slots and are not failed, by their first slot.
    fn serving_primaries(&self) -> Vec<u16> {
        let mut primaries: Vec<(u16, u16)> = self
            .lines
            .iter()
            .filter(|line| line.primary && !line.failed)
            .filter_map(|line| {
                let first = line.slots.iter().map(|&(start, _)| start).min()?;
                Some((first, line.port))
            })
            .collect();
        primaries.sort_unstable();
        primaries.into_iter().map(|(_, port)| port).collect()
    }

    fn shard_of(&self, port: u16) -> Option<Shard> {
        let line = self.by_port(port)?;
        if !line.primary || line.slots.is_empty() {
            return None;
        }
        let replicas = self
            .lines
            .iter()
            .filter(|other| other.primary_id.as_deref() == Some(line.id.as_str()))
            .map(|other| other.port)
            .collect();
        Some(Shard {
            slots: line.slots.clone(),
            replicas,
        })
    }

    fn summary(&self) -> String {
        let owners: Vec<String> = self
            .slot_map()
            .iter()
            .map(|(start, end, port)| format!("{start}-{end}@{port}"))
            .collect();
        format!("slots [{}]", owners.join(" "))
    }
}

/// What one live node said when the guard looked.
#[derive(Debug)]
struct Report {
    port: u16,
    state_ok: bool,
    view: View,
    /// For a node that is a replica in its own eyes: whether its replication link is up.
    link_up: Option<bool>,
}

/// One look at every live node.
#[derive(Debug)]
struct Observation {
    reports: Vec<Report>,
    /// Live nodes that did not answer, and why.
    silent: Vec<(u16, String)>,
}

fn text_reply(value: RespValue, what: &str) -> std::result::Result<String, String> {
    value
        .as_text()
        .ok_or_else(|| format!("{what} answered {value:?}"))
}

fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
}

fn look_at(port: u16) -> std::result::Result<Report, String> {
    let mut connection =
        RespConnection::connect("127.0.0.1", port).map_err(|error| error.to_string())?;
    let mut ask = |args: &[&str]| {
        let reply = connection
            .command(args)
            .map_err(|error| format!("{}: {error}", args.join(" ")))?;
        text_reply(reply, &args.join(" "))
    };
    let info = ask(&["CLUSTER", "INFO"])?;
    let view = View::parse(port, &ask(&["CLUSTER", "NODES"])?)?;
    let myself_replica = view
        .by_port(port)
        .is_some_and(|line| !line.primary && line.primary_id.is_some());
    let link_up = if myself_replica {
        let replication = ask(&["INFO", "replication"])?;
        Some(field(&replication, "master_link_status") == Some("up"))
    } else {
        None
    };
    Ok(Report {
        port,
        state_ok: field(&info, "cluster_state") == Some("ok"),
        view,
        link_up,
    })
}

impl Observation {
    /// The view all live nodes share, or why there is none: every live node answered, says
    /// `cluster_state:ok`, agrees with the others on the owner of every slot (all 16384
    /// covered) and on the role (and primary) of every live node, and every replica among
    /// them has its replication link up.
    fn agreed(&self, live: &[u16]) -> std::result::Result<&View, String> {
        if let Some((port, why)) = self.silent.first() {
            return Err(format!("node {port} did not answer: {why}"));
        }
        let first = self
            .reports
            .first()
            .ok_or_else(|| "no live node to ask".to_owned())?;
        for report in &self.reports {
            if !report.state_ok {
                return Err(format!(
                    "node {} says cluster_state is not ok; {}",
                    report.port,
                    report.view.summary()
                ));
            }
            if report.link_up == Some(false) {
                return Err(format!(
                    "replica {} has not synced with its primary yet",
                    report.port
                ));
            }
            if report.view.slot_map() != first.view.slot_map() {
                return Err(format!(
                    "nodes disagree on the slots: {} sees {}, {} sees {}",
                    first.port,
                    first.view.summary(),
                    report.port,
                    report.view.summary()
                ));
            }
            for &port in live {
                let (theirs, ours) = (report.view.role_of(port), first.view.role_of(port));
                if theirs != ours {
                    return Err(format!(
                        "nodes disagree on node {port}: {} sees {ours:?}, {} sees {theirs:?}",
                        first.port, report.port
                    ));
                }
            }
        }
        let covered = first.view.covered_slots();
        if covered != usize::from(CLUSTER_SLOTS) {
            return Err(format!(
                "{covered} of {CLUSTER_SLOTS} slots covered; {}",
                first.view.summary()
            ));
        }
        Ok(&first.view)
    }
}

/// Removes the terminal colour codes redis-cli puts in its output.
fn strip_colours(text: &str) -> String {
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

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster
/// maps keys to slots with.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            }
        })
    })
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

    fn start_with(
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
    fn create(&self, cli: &Path, replicas_per_primary: usize) -> Result<()> {
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

    /// The slot of `key`, as Redis computes it: CRC16 of the key, or of its hash tag (what
    /// lies between the first `{` and the next `}`, when that is not empty), modulo 16384.
    pub fn key_slot(key: impl AsRef<[u8]>) -> u16 {
        let key = key.as_ref();
        let hashed = key
            .iter()
            .position(|&byte| byte == b'{')
            .and_then(|open| {
                let tag = &key[open + 1..];
                let close = tag.iter().position(|&byte| byte == b'}')?;
                (close > 0).then(|| &tag[..close])
            })
            .unwrap_or(key);
        crc16(hashed) % CLUSTER_SLOTS
    }

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

    fn observe(&self) -> Observation {
        let mut observation = Observation {
            reports: Vec::new(),
            silent: Vec::new(),
        };
        for port in self.live_ports() {
            match look_at(port) {
                Ok(report) => observation.reports.push(report),
                Err(why) => observation.silent.push((port, why)),
            }
        }
        observation
    }

    /// Looks at the cluster every [`POLL_INTERVAL`] until the live nodes agree (see
    /// [`Observation::agreed`]) and `check` accepts their shared view, or `timeout` passes.
    fn poll<T>(
        &self,
        waiting_for: &str,
        timeout: Duration,
        mut check: impl FnMut(&View, &[u16]) -> std::result::Result<T, String>,
    ) -> Result<(T, View)> {
        let started = Instant::now();
        loop {
            let live = self.live_ports();
            let observation = self.observe();
            let last_seen = match observation.agreed(&live) {
                Ok(view) => match check(view, &live) {
                    Ok(value) => return Ok((value, view.clone())),
                    Err(why) => why,
                },
                Err(why) => why,
            };
            if started.elapsed() >= timeout {
                return Err(TestkitError::ClusterNotReady {
                    waiting_for: waiting_for.to_owned(),
                    waited: started.elapsed(),
                    last_seen,
                    log_tails: self.log_tails(),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// `CLUSTER NODES` of the live node that knows the latest configuration epoch.
    fn freshest_view(&self) -> Result<View> {
        let mut freshest: Option<View> = None;
        let mut failures = Vec::new();
        for port in self.live_ports() {
            let answer = RespConnection::connect("127.0.0.1", port)
                .and_then(|mut connection| connection.command(&["CLUSTER", "NODES"]))
                .map_err(|error| error.to_string())
                .and_then(|reply| text_reply(reply, "CLUSTER NODES"))
                .and_then(|text| View::parse(port, &text));
            match answer {
                Ok(view)
                    if freshest
                        .as_ref()
                        .is_none_or(|best| view.freshness() > best.freshness()) =>
                {
                    freshest = Some(view);
                }
                Ok(_) => {}
                Err(why) => failures.push(format!("{port}: {why}")),
            }
        }
        freshest.ok_or_else(|| TestkitError::Cluster {
            message: format!(
                "no live node answered CLUSTER NODES ({})",
                failures.join("; ")
            ),
        })
    }

    /// Remembers what the node was before a fault, for `wait_for_failover`. Best effort:
    /// when no live node answers, an earlier snapshot stays.
    fn note_fault(&mut self, index: usize) {
        if let Ok(view) = self.freshest_view() {
            self.nodes[index].faulted_as = view.shard_of(self.nodes[index].port);
            self.note_roles(&view);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_the_xmodem_variant_redis_uses() {
        // The check value of the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn key_slots_follow_the_hash_tag_rule() {
        assert_eq!(RedisCluster::key_slot("foo"), 12182);
        assert_eq!(RedisCluster::key_slot("{a}x"), RedisCluster::key_slot("a"));
        assert_eq!(
            RedisCluster::key_slot("{user1000}.following"),
            RedisCluster::key_slot("{user1000}.followers")
        );
        // An empty tag does not count: the whole key is hashed.
        assert_eq!(RedisCluster::key_slot("{}x"), crc16(b"{}x") % CLUSTER_SLOTS);
        // Only the first `{` and the first `}` after it count.
        assert_eq!(
            RedisCluster::key_slot("x{{a}}"),
            RedisCluster::key_slot("{a")
        );
        assert_eq!(
            RedisCluster::key_slot("x{a}{b}"),
            RedisCluster::key_slot("a")
        );
        assert_eq!(RedisCluster::key_slot("x{a"), crc16(b"x{a") % CLUSTER_SLOTS);
    }

    #[test]
    fn cluster_nodes_lines_are_parsed() {
        let text = "\
07c3 127.0.0.1:30004@31004,host slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
e7d1 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 [5461->-67ed]
9fd8 127.0.0.1:30003@31003 master,fail - 1426238317741 1426238316232 3 disconnected 10923-16383
";
        let view = View::parse(30001, text).unwrap();
        assert_eq!(view.lines.len(), 4);
        assert_eq!(view.role_of(30004), Some((ClusterRole::Replica, 30001)));
        assert_eq!(view.role_of(30002), Some((ClusterRole::Primary, 0)));
        assert_eq!(view.owner_of(0).unwrap().port, 30001);
        assert_eq!(view.owner_of(5461).unwrap().port, 30002);
        assert_eq!(view.owner_of(16383).unwrap().port, 30003);
        assert_eq!(view.covered_slots(), usize::from(CLUSTER_SLOTS));
        assert_eq!(view.freshness(), 4);
        // The failed primary still owns its slots but no longer serves them.
        assert_eq!(view.serving_primaries(), [30001, 30002]);
        let shard = view.shard_of(30001).unwrap();
        assert_eq!(
            (shard.slots, shard.replicas),
            (vec![(0, 5460)], vec![30004])
        );
        assert!(view.shard_of(30004).is_none());
        assert!(View::parse(1, "garbage line").is_err());
    }

    #[test]
    fn colours_are_stripped_from_redis_cli_output() {
        assert_eq!(
            strip_colours("\u{1b}[29;1m>>> Creating\n\u{1b}[0m[OK] done"),
            ">>> Creating\n[OK] done"
        );
    }
}

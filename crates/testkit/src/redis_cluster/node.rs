//! One node of a [`RedisCluster`](super::RedisCluster): its `redis-server` process in cluster
//! mode, its directory and configuration, its ports (client, cluster bus and, with TLS,
//! the TLS port) and the TLS files it serves and shows the other nodes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Result, TestkitError};
use crate::private_server::{PORT_ATTEMPTS, PrivateServer};
use crate::process::{self, Launch, ServerProcess, StartFailure};
use crate::redis::{config_quote, ping, write_config};
use crate::tls::CertFiles;

use super::ClusterRole;
use super::topology::Shard;

/// How long a node may stay silent before the others suspect it: short, so that a killed
/// or paused primary is failed over within a few seconds.
pub const CLUSTER_NODE_TIMEOUT: Duration = Duration::from_millis(1000);

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

/// The TLS side of every node: the files of a [`TestCa`].
#[derive(Debug, Clone)]
pub(super) struct ClusterTls {
    /// The certificate clients (and other nodes) are shown.
    pub(super) server: CertFiles,
    /// The certificate a node shows the others it connects to (the bus requires one).
    pub(super) client: CertFiles,
    pub(super) ca: PathBuf,
}

/// A node's server process, directory and ports.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) process: Option<ServerProcess>,
    pub(super) binary: PathBuf,
    pub(super) config: PathBuf,
    pub(super) log: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) port: u16,
    pub(super) bus_port: u16,
    /// With TLS: the port TLS clients connect to, and the files.
    pub(super) tls: Option<(u16, ClusterTls)>,
    pub(super) role: ClusterRole,
    pub(super) state: NodeState,
    /// What the node was just before its last kill, pause or restart (`None`: no primary).
    pub(super) faulted_as: Option<Shard>,
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
    pub(super) fn create(
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
    pub(super) fn launch_on_free_ports(&mut self) -> Result<()> {
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

    pub(super) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub(super) fn tls_url(&self) -> Option<String> {
        self.tls
            .as_ref()
            .map(|(tls_port, _)| format!("rediss://127.0.0.1:{tls_port}/"))
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    pub(super) fn signal(&self, signal: &str) -> Result<()> {
        match &self.process {
            Some(process) => process.signal(signal),
            None => Err(TestkitError::Cluster {
                message: format!("node {} has no process to send SIG{signal} to", self.port),
            }),
        }
    }
}

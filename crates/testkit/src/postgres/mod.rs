//! [`PostgresServer`]: a private PostgreSQL cluster per guard.
//!
//! Each guard copies the process-wide initdb template (see `template`) into its scratch
//! directory and runs `postgres` on it directly as a child process (not via `pg_ctl`, which
//! would daemonize it out of our reach), on a free loopback port, with its unix socket in
//! the scratch directory. Durability is switched off (`fsync`, `synchronous_commit`,
//! `full_page_writes`): a test cluster lives for seconds.
//!
//! `stop` is a fast shutdown (SIGINT: sessions are terminated, clients see their
//! connections drop, the port refuses new ones); `start_again` starts the same data
//! directory on the same port, so committed data survives a restart, as it would in
//! production. Drop uses an immediate shutdown (SIGQUIT), SIGKILL as the backstop.
//!
//! Under root the cluster belongs to, and runs as, an unprivileged account (see
//! `privilege`).

mod client;
mod template;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::binaries::{self, PostgresBinaries};
use crate::error::{Result, TestkitError};
use crate::private_server::PrivateServer;
use crate::privilege::{self, ServerUser, chown_tree};
use crate::process::{self, Launch, ServerProcess, StartFailure};
use crate::scratch::{ScratchDir, scratch_base};
use crate::tls::{CertFiles, TestCa};
use crate::url::{ConnectionUrl, redact};
pub use client::Rows;
use client::{CANNOT_CONNECT_NOW, ConnectParams};
use template::SUPERUSER;

/// Points the guards at an external PostgreSQL instead of starting one.
pub const POSTGRES_URL_ENV: &str = "PROXYPOOL_TEST_POSTGRES_URL";

const SERVER: &str = "postgres";

/// Unix socket paths are limited to ~107 bytes; past this directory length we run
/// without a unix socket rather than fail (the testkit itself only uses TCP).
const MAX_SOCKET_DIR_LEN: usize = 80;

/// Immediate shutdown normally takes milliseconds; do not let Drop linger.
const DROP_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The private cluster: its process (while running), account, directories and log.
#[derive(Debug)]
struct PrivatePostgres {
    process: Option<ServerProcess>,
    binaries: PostgresBinaries,
    user: Option<ServerUser>,
    data_dir: PathBuf,
    log: PathBuf,
    /// `ssl = on` with this certificate and key (copies owned by the server account).
    ssl: Option<(PathBuf, PathBuf)>,
    dir: ScratchDir,
}

/// A PostgreSQL for one test: private (started and owned by this guard) or external
/// (`PROXYPOOL_TEST_POSTGRES_URL`). A private cluster is shut down and deleted when the
/// guard drops.
#[derive(Debug)]
pub struct PostgresServer {
    url: String,
    parsed: ConnectionUrl,
    port: u16,
    private: Option<PrivatePostgres>,
    /// The CA of a server started with [`start_private_tls`](Self::start_private_tls).
    tls_ca: Option<PathBuf>,
}

fn probe(port: u16) -> std::result::Result<(), String> {
    let params = ConnectParams {
        host: "127.0.0.1",
        port,
        user: SUPERUSER,
        password: None,
        database: "postgres",
    };
    match client::probe(params) {
        Ok(()) => Ok(()),
        Err(error) if error.sqlstate().as_deref() == Some(CANNOT_CONNECT_NOW) => {
            Err(format!("starting up: {error}"))
        }
        Err(error) => Err(error.to_string()),
    }
}

impl PrivateServer for PrivatePostgres {
    fn process_mut(&mut self) -> &mut Option<ServerProcess> {
        &mut self.process
    }

    fn launch(&mut self, port: u16) -> std::result::Result<(), StartFailure> {
        let socket_dir = self.dir.path().to_string_lossy().into_owned();
        let socket_dir = if socket_dir.len() <= MAX_SOCKET_DIR_LEN {
            socket_dir
        } else {
            String::new()
        };
        let mut settings = vec![
            "listen_addresses=127.0.0.1".to_owned(),
            format!("unix_socket_directories={socket_dir}"),
            // Throwaway clusters: durability costs time and buys nothing.
            "fsync=off".to_owned(),
            "synchronous_commit=off".to_owned(),
            "full_page_writes=off".to_owned(),
            // Many clusters may run at once on a small machine; keep each one modest, and
            // keep dynamic shared memory out of a container's small /dev/shm.
            "shared_buffers=32MB".to_owned(),
            "dynamic_shared_memory_type=mmap".to_owned(),
        ];
        // TLS is offered, not forced: the readiness probe speaks plain; clients under test
        // ask for `sslmode=verify-full`.
        if let Some((cert, key)) = &self.ssl {
            settings.push("ssl=on".to_owned());
            settings.push(format!("ssl_cert_file={}", cert.display()));
            settings.push(format!("ssl_key_file={}", key.display()));
        }
        let mut args = vec![
            "-D".into(),
            self.data_dir.clone().into_os_string(),
            "-p".into(),
            port.to_string().into(),
        ];
        for setting in settings {
            args.push("-c".into());
            args.push(setting.into());
        }
        let log_offset = process::log_len(&self.log);
        let launch = Launch {
            server: SERVER,
            program: &self.binaries.postgres,
            args,
            log: &self.log,
            working_dir: self.dir.path(),
            user: self.user.as_ref(),
            janitor_signal: "QUIT",
            janitor_removes: Some(self.dir.path()),
        };
        let mut server = ServerProcess::spawn(&launch)?;
        process::wait_until_ready(&mut server, &self.log, log_offset, || probe(port))?;
        self.process = Some(server);
        Ok(())
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        // Before the fields drop: the cluster must be down before its directory goes.
        self.stop("QUIT", DROP_STOP_TIMEOUT);
    }
}

impl PostgresServer {
    /// Starts a private cluster, or connects the guard to `PROXYPOOL_TEST_POSTGRES_URL`
    /// when that is set.
    pub fn start() -> Result<Self> {
        match std::env::var(POSTGRES_URL_ENV) {
            Ok(url) if !url.trim().is_empty() => Self::from_url(url.trim()),
            _ => Self::start_private(),
        }
    }

    /// Starts a private cluster even when `PROXYPOOL_TEST_POSTGRES_URL` is set (for tests
    /// that must stop and restart it).
    pub fn start_private() -> Result<Self> {
        Self::start_private_with(None)
    }

    /// A private cluster with `ssl = on` and a server certificate of `ca` for 127.0.0.1
    /// ([`tls_url`](Self::tls_url) asks for `sslmode=verify-full` against `ca`).
    pub fn start_private_tls(ca: &TestCa) -> Result<Self> {
        let mut server = Self::start_private_with(Some(ca.server("postgres")?))?;
        server.tls_ca = Some(ca.ca_path().to_owned());
        Ok(server)
    }

    /// The superuser URL over TLS with `sslmode=verify-full` against the CA the server was
    /// started with; `None` for a server without TLS.
    pub fn tls_url(&self) -> Option<String> {
        let ca = self.tls_ca.as_ref()?;
        Some(format!(
            "{}?sslmode=verify-full&sslrootcert={}",
            self.url,
            ca.display()
        ))
    }

    fn start_private_with(server_cert: Option<CertFiles>) -> Result<Self> {
        let binaries = binaries::postgres()?;
        let user = privilege::postgres_server_user()?;
        let dir = ScratchDir::create(&scratch_base(user.as_ref()), "postgres")?;
        // The server reads its key as its own account, and refuses a key others can read:
        // copies inside its directory, chowned with it below.
        let ssl = match server_cert {
            Some(files) => {
                let tls_dir = dir.path().join("tls");
                let copy = |from: &Path, name: &str| -> Result<PathBuf> {
                    let to = tls_dir.join(name);
                    std::fs::copy(from, &to).map_err(|error| {
                        TestkitError::io(format!("copying {}", from.display()), error)
                    })?;
                    Ok(to)
                };
                std::fs::create_dir(&tls_dir).map_err(|error| {
                    TestkitError::io(format!("creating {}", tls_dir.display()), error)
                })?;
                let cert = copy(&files.cert, "server.pem")?;
                let key = copy(&files.key, "server.key")?;
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
                    .map_err(|error| TestkitError::io(format!("chmod {}", key.display()), error))?;
                Some((cert, key))
            }
            None => None,
        };
        // The server account owns the socket directory; the log is opened by us.
        chown_tree(dir.path(), user.as_ref())?;
        let data_dir = dir.path().join("data");
        template::clone_into(&binaries, user.as_ref(), &data_dir)?;
        let mut private = PrivatePostgres {
            process: None,
            binaries,
            user,
            data_dir,
            log: dir.path().join("postgres.log"),
            ssl,
            dir,
        };
        let port = private.launch_on_free_port()?;
        let url = format!("postgres://{SUPERUSER}@127.0.0.1:{port}/postgres");
        Ok(Self {
            parsed: ConnectionUrl::parse(&url)?,
            url,
            port,
            private: Some(private),
            tls_ca: None,
        })
    }

    /// A guard for an already running server (what `PROXYPOOL_TEST_POSTGRES_URL` does): it
    /// never starts, stops or kills anything.
    pub fn from_url(url: &str) -> Result<Self> {
        let mut parsed = ConnectionUrl::parse(url)?;
        if parsed.scheme != "postgres" && parsed.scheme != "postgresql" {
            return Err(TestkitError::InvalidUrl {
                url: redact(url),
                reason: "expected postgres:// or postgresql://".to_owned(),
            });
        }
        // libpq's defaults, made explicit so url_for and the wire client agree with them.
        let port = *parsed.port.get_or_insert(5432);
        let user = parsed
            .user
            .get_or_insert_with(|| SUPERUSER.to_owned())
            .clone();
        if parsed.path.is_empty() {
            parsed.path = user;
        }
        Ok(Self {
            url: url.to_owned(),
            parsed,
            port,
            private: None,
            tls_ca: None,
        })
    }

    /// The superuser's URL to database `postgres`
    /// (`postgres://postgres@127.0.0.1:PORT/postgres`), or the override verbatim.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A URL for `database` as `user` on this server (no password for a private cluster:
    /// it trusts loopback connections).
    pub fn url_for(&self, database: &str, user: &str) -> String {
        self.parsed.with_user_and_path(user, database)
    }

    /// The server's host (`127.0.0.1` for a private cluster).
    pub fn host(&self) -> &str {
        &self.parsed.host
    }

    /// The server's TCP port; stays the same across `stop`/`start_again`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether this guard owns the cluster (and can stop and restart it).
    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }

    /// The private cluster's data directory (`None` for an external server).
    pub fn data_dir(&self) -> Option<&Path> {
        self.private
            .as_ref()
            .map(|private| private.data_dir.as_path())
    }

    /// The private cluster's scratch directory, which also holds its unix socket
    /// (`None` for an external server).
    pub fn dir(&self) -> Option<&Path> {
        self.private.as_ref().map(|private| private.dir.path())
    }

    /// The private cluster's log file (`None` for an external server).
    pub fn log_path(&self) -> Option<&Path> {
        self.private.as_ref().map(|private| private.log.as_path())
    }

    /// The running private postmaster's process id, e.g. to freeze it with `kill -STOP`
    /// and simulate a hung server (`None` when stopped or external).
    pub fn pid(&self) -> Option<u32> {
        let private = self.private.as_ref()?;
        private.process.as_ref().map(ServerProcess::pid)
    }

    /// Whether the private cluster is currently running (`true` for an external server).
    pub fn is_running(&mut self) -> bool {
        self.private
            .as_mut()
            .is_none_or(PrivatePostgres::is_running)
    }

    /// Runs `sql` in the URL's database as the URL's user (the superuser for a private
    /// cluster), with the simple query protocol. Rows come back as text.
    pub fn query(&self, sql: &str) -> Result<Rows> {
        let database = self.parsed.path.clone();
        self.query_in(&database, sql)
    }

    /// Runs `sql` in `database` as the URL's user.
    pub fn query_in(&self, database: &str, sql: &str) -> Result<Rows> {
        let params = ConnectParams {
            host: &self.parsed.host,
            port: self.port,
            user: self.parsed.user.as_deref().unwrap_or(SUPERUSER),
            password: self.parsed.password.as_deref(),
            database,
        };
        Ok(client::simple_query(params, sql)?)
    }

    /// Creates database `name` and returns the superuser's URL to it.
    pub fn create_database(&self, name: &str) -> Result<String> {
        self.query(&format!(
            "CREATE DATABASE \"{}\"",
            name.replace('"', "\"\"")
        ))?;
        let user = self
            .parsed
            .user
            .clone()
            .unwrap_or_else(|| SUPERUSER.to_owned());
        Ok(self.url_for(name, &user))
    }

    fn private_mut(&mut self, operation: &'static str) -> Result<&mut PrivatePostgres> {
        self.private.as_mut().ok_or(TestkitError::ExternalServer {
            operation,
            env_var: POSTGRES_URL_ENV,
        })
    }

    /// Shuts the cluster down (fast shutdown: sessions terminated, nothing committed is
    /// lost). The port stays with the guard; connections are refused until `start_again`.
    /// Stopping twice is fine.
    pub fn stop(&mut self) -> Result<()> {
        self.private_mut("stop")?.stop("INT", process::STOP_TIMEOUT);
        Ok(())
    }

    /// Starts the stopped cluster again on the same port and data directory. A no-op when
    /// it is running.
    pub fn start_again(&mut self) -> Result<()> {
        let port = self.port;
        self.private_mut("start_again")?.start_again(port)
    }

    /// `stop` then `start_again`.
    pub fn restart(&mut self) -> Result<()> {
        self.private_mut("restart")?;
        self.stop()?;
        self.start_again()
    }
}

//! [`RedisServer`]: a private `redis-server` per guard, plus a minimal RESP2 client.
//!
//! The server runs without persistence (`save ""`, `appendonly no`) in its own scratch
//! directory on a free loopback port. `stop` kills it the way a crash would (SIGKILL: the
//! data is gone, as after a real crash without persistence), `start_again` brings it back
//! on the same port so clients holding the URL can reconnect.
//!
//! The RESP client, on the `redis` crate's blocking connection, exists for readiness probes
//! and for tests that want to poke the server directly (`FLUSHALL`, `DEBUG SLEEP`,
//! `CLIENT KILL`) and read the raw reply.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::binaries;
use crate::error::{Result, TestkitError};
use crate::private_server::PrivateServer;
use crate::process::{self, Launch, ServerProcess, StartFailure};
use crate::scratch::{ScratchDir, scratch_base};
use crate::tls::{CertFiles, TestCa};
use crate::url::{ConnectionUrl, redact};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisError, Value};

/// Points the guards at an external Redis instead of starting one.
pub const REDIS_URL_ENV: &str = "PROXYPOOL_TEST_REDIS_URL";

const SERVER: &str = "redis-server";

/// Socket timeouts of the RESP client: generous, but a hung server must not hang a test.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// A RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespValue {
    /// `+OK`
    Simple(String),
    /// `-ERR ...` inside an array (a top-level error reply is returned as `Err`).
    Error(String),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// `$-1` or `*-1`
    Nil,
    /// `*2 ...`
    Array(Vec<RespValue>),
}

impl RespValue {
    /// The reply as text, for simple strings and bulk strings (lossy UTF-8).
    pub fn as_text(&self) -> Option<String> {
        match self {
            Self::Simple(text) => Some(text.clone()),
            Self::Bulk(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        }
    }
}

impl From<Value> for RespValue {
    fn from(value: Value) -> Self {
        let array = |items: Vec<Value>| Self::Array(items.into_iter().map(Self::from).collect());
        match value {
            Value::Nil => Self::Nil,
            Value::Int(n) => Self::Integer(n),
            Value::BulkString(bytes) => Self::Bulk(bytes),
            Value::Array(items) => array(items),
            Value::SimpleString(text) => Self::Simple(text),
            Value::Okay => Self::Simple("OK".to_owned()),
            Value::ServerError(error) => Self::Error(match error.details() {
                Some(details) => format!("{} {details}", error.code()),
                None => error.code().to_owned(),
            }),
            // RESP3 only: the connection speaks RESP2, so these never arrive.
            other => Self::Error(format!("unexpected RESP3 reply {other:?}")),
        }
    }
}

/// One RESP2 connection (the `redis` crate's blocking client).
pub struct RespConnection {
    connection: redis::Connection,
}

impl std::fmt::Debug for RespConnection {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("RespConnection")
    }
}

fn redis_error(context: &str, error: &RedisError) -> TestkitError {
    match error.code() {
        // An error reply: the server's own line, as it sent it.
        Some(code) if !error.is_io_error() => TestkitError::Server {
            server: SERVER,
            message: match error.detail() {
                Some(detail) => format!("{code} {detail}"),
                None => code.to_owned(),
            },
        },
        _ => TestkitError::io(
            format!("redis: {context}"),
            std::io::Error::other(error.to_string()),
        ),
    }
}

impl RespConnection {
    /// Connects to `host:port` (no AUTH, database 0).
    pub fn connect(host: &str, port: u16) -> Result<Self> {
        Self::open(ConnectionAddr::Tcp(host.to_owned(), port).into_connection_info())
    }

    /// Connects as `info` says (its credentials and database), sending nothing the caller
    /// did not ask for: no `CLIENT SETINFO`, so tests that count commands see only theirs.
    fn open(info: redis::RedisResult<ConnectionInfo>) -> Result<Self> {
        let connecting = |error: RedisError| redis_error("connecting", &error);
        let info = info.map_err(connecting)?;
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let client = redis::Client::open(info.set_redis_settings(settings)).map_err(connecting)?;
        let connection = client
            .get_connection_with_timeout(CONNECT_TIMEOUT)
            .map_err(connecting)?;
        connection
            .set_read_timeout(Some(IO_TIMEOUT))
            .and_then(|()| connection.set_write_timeout(Some(IO_TIMEOUT)))
            .map_err(|error| redis_error("configuring the socket", &error))?;
        Ok(Self { connection })
    }

    /// Sends one command and reads its reply; an error reply becomes `Err(Server)`.
    pub fn command<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<RespValue> {
        let mut command = redis::Cmd::new();
        for arg in args {
            command.arg(arg.as_ref());
        }
        command
            .query::<Value>(&mut self.connection)
            .map(RespValue::from)
            .map_err(|error| redis_error("sending a command", &error))
    }
}

/// The private server: its process (while running), directory and files.
#[derive(Debug)]
struct PrivateRedis {
    // Field order matters: the process must die before its directory is removed.
    process: Option<ServerProcess>,
    binary: PathBuf,
    config: PathBuf,
    log: PathBuf,
    /// Also serve TLS on this port with these files (`--tls-port`).
    tls: Option<RedisTls>,
    dir: ScratchDir,
}

/// The TLS side of a private server: its port and the files of a [`TestCa`].
#[derive(Debug, Clone)]
struct RedisTls {
    port: u16,
    server: CertFiles,
    ca: PathBuf,
}

/// A Redis for one test: private (started and owned by this guard) or external
/// (`PROXYPOOL_TEST_REDIS_URL`). A private server is killed when the guard drops.
#[derive(Debug)]
pub struct RedisServer {
    url: String,
    host: String,
    port: u16,
    private: Option<PrivateRedis>,
    /// `rediss://127.0.0.1:TLS_PORT/` when the server also speaks TLS.
    tls_url: Option<String>,
}

/// Quotes a value for redis.conf (double quotes, backslash escapes).
pub(crate) fn config_quote(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Writes `dir/redis.conf`: the non-persistent base every private server runs with, then
/// `extra` (whole lines, e.g. the cluster settings of a cluster node).
pub(crate) fn write_config(dir: &Path, extra: &str) -> Result<PathBuf> {
    let config = dir.join("redis.conf");
    let text = format!(
        "# Written by proxypool-testkit: a throwaway, non-persistent test server.\n\
         bind 127.0.0.1\n\
         protected-mode yes\n\
         daemonize no\n\
         dir {}\n\
         save \"\"\n\
         appendonly no\n\
         logfile \"\"\n\
         {extra}",
        config_quote(&dir.to_string_lossy()),
    );
    std::fs::write(&config, text)
        .map_err(|error| TestkitError::io(format!("writing {}", config.display()), error))?;
    Ok(config)
}

/// The readiness probe: `PING` answered with `PONG`.
pub(crate) fn ping(port: u16) -> std::result::Result<(), String> {
    let mut connection =
        RespConnection::connect("127.0.0.1", port).map_err(|error| error.to_string())?;
    match connection.command(&["PING"]) {
        Ok(RespValue::Simple(pong)) if pong == "PONG" => Ok(()),
        Ok(other) => Err(format!("PING answered {other:?}")),
        Err(error) => Err(error.to_string()),
    }
}

impl PrivateServer for PrivateRedis {
    fn process_mut(&mut self) -> &mut Option<ServerProcess> {
        &mut self.process
    }

    fn launch(&mut self, port: u16) -> std::result::Result<(), StartFailure> {
        let log_offset = process::log_len(&self.log);
        let launch = Launch {
            server: SERVER,
            program: &self.binary,
            args: {
                let mut args: Vec<std::ffi::OsString> = vec![
                    self.config.clone().into_os_string(),
                    "--port".into(),
                    port.to_string().into(),
                ];
                // The plain port stays for the readiness check; clients under test use TLS.
                if let Some(tls) = &self.tls {
                    args.extend([
                        "--tls-port".into(),
                        tls.port.to_string().into(),
                        "--tls-cert-file".into(),
                        tls.server.cert.clone().into_os_string(),
                        "--tls-key-file".into(),
                        tls.server.key.clone().into_os_string(),
                        "--tls-ca-cert-file".into(),
                        tls.ca.clone().into_os_string(),
                        // A client certificate is checked when presented, not required.
                        "--tls-auth-clients".into(),
                        "optional".into(),
                    ]);
                }
                args
            },
            log: &self.log,
            working_dir: self.dir.path(),
            user: None,
            janitor_signal: "KILL",
            janitor_removes: Some(self.dir.path()),
        };
        let mut server = ServerProcess::spawn(&launch)?;
        process::wait_until_ready(&mut server, &self.log, log_offset, || ping(port))?;
        self.process = Some(server);
        Ok(())
    }
}

impl RedisServer {
    /// Starts a private server, or connects the guard to `PROXYPOOL_TEST_REDIS_URL` when
    /// that is set.
    pub fn start() -> Result<Self> {
        match std::env::var(REDIS_URL_ENV) {
            Ok(url) if !url.trim().is_empty() => Self::from_url(url.trim()),
            _ => Self::start_private(),
        }
    }

    /// Starts a private server even when `PROXYPOOL_TEST_REDIS_URL` is set (for tests that
    /// must stop and restart it).
    pub fn start_private() -> Result<Self> {
        Self::start_private_with(None)
    }

    /// A private server that also serves TLS with a server certificate of `ca`
    /// ([`tls_url`](Self::tls_url) is its `rediss://` URL).
    pub fn start_private_tls(ca: &TestCa) -> Result<Self> {
        let tls = RedisTls {
            port: process::free_loopback_port()?,
            server: ca.server("redis")?,
            ca: ca.ca_path().to_owned(),
        };
        Self::start_private_with(Some(tls))
    }

    /// The `rediss://` URL of a server started with [`start_private_tls`](Self::start_private_tls).
    pub fn tls_url(&self) -> Option<&str> {
        self.tls_url.as_deref()
    }

    fn start_private_with(tls: Option<RedisTls>) -> Result<Self> {
        let binary = binaries::redis_server()?;
        let dir = ScratchDir::create(&scratch_base(None), "redis")?;
        let config = write_config(dir.path(), "")?;
        let mut private = PrivateRedis {
            process: None,
            binary,
            config,
            log: dir.path().join("redis.log"),
            tls,
            dir,
        };
        let port = private.launch_on_free_port()?;
        Ok(Self {
            url: format!("redis://127.0.0.1:{port}/"),
            host: "127.0.0.1".to_owned(),
            port,
            tls_url: private
                .tls
                .as_ref()
                .map(|tls| format!("rediss://127.0.0.1:{}/", tls.port)),
            private: Some(private),
        })
    }

    /// A guard for an already running server (what `PROXYPOOL_TEST_REDIS_URL` does): it
    /// never starts, stops or kills anything.
    pub fn from_url(url: &str) -> Result<Self> {
        let parsed = ConnectionUrl::parse(url)?;
        if parsed.scheme != "redis" {
            return Err(TestkitError::InvalidUrl {
                url: redact(url),
                reason: "only redis:// is supported (no TLS, no unix sockets)".to_owned(),
            });
        }
        Ok(Self {
            url: url.to_owned(),
            host: parsed.host,
            port: parsed.port.unwrap_or(6379),
            private: None,
            tls_url: None,
        })
    }

    /// `redis://127.0.0.1:PORT/` for a private server, the override verbatim otherwise.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's host (`127.0.0.1` for a private server).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The server's TCP port; stays the same across `stop`/`start_again`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether this guard owns the server (and can stop and restart it).
    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }

    /// The private server's scratch directory (`None` for an external server).
    pub fn dir(&self) -> Option<&Path> {
        self.private.as_ref().map(|private| private.dir.path())
    }

    /// The private server's log file (`None` for an external server).
    pub fn log_path(&self) -> Option<&Path> {
        self.private.as_ref().map(|private| private.log.as_path())
    }

    /// The running private server's process id, e.g. to freeze it with `kill -STOP`
    /// and simulate a hung server (`None` when stopped or external).
    pub fn pid(&self) -> Option<u32> {
        let private = self.private.as_ref()?;
        private.process.as_ref().map(ServerProcess::pid)
    }

    /// Whether the private server is currently running (`true` for an external server).
    pub fn is_running(&mut self) -> bool {
        self.private.as_mut().is_none_or(PrivateRedis::is_running)
    }

    fn private_mut(&mut self, operation: &'static str) -> Result<&mut PrivateRedis> {
        self.private.as_mut().ok_or(TestkitError::ExternalServer {
            operation,
            env_var: REDIS_URL_ENV,
        })
    }

    /// Kills the server (SIGKILL, like a crash; all data is lost). The port stays with the
    /// guard; connections now fail with "connection refused". Stopping twice is fine.
    pub fn stop(&mut self) -> Result<()> {
        self.private_mut("stop")?
            .stop("KILL", process::STOP_TIMEOUT);
        Ok(())
    }

    /// Starts the stopped server again on the same port (empty: nothing was persisted).
    /// A no-op when it is running.
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

    /// Opens a RESP connection (authenticated and on the URL's database for an external
    /// server).
    pub fn connect(&self) -> Result<RespConnection> {
        RespConnection::open(self.url.as_str().into_connection_info())
    }

    /// Runs one command on a fresh connection, e.g. `redis.command(&["FLUSHALL"])`.
    pub fn command<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<RespValue> {
        self.connect()?.command(args)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(private) = &mut self.private {
            private.stop("KILL", process::STOP_TIMEOUT);
        }
    }
}

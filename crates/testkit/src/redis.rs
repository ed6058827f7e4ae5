//! [`RedisServer`]: a private `redis-server` per guard, plus a minimal RESP2 client.
//!
//! The server runs without persistence (`save ""`, `appendonly no`) in its own scratch
//! directory on a free loopback port. `stop` kills it the way a crash would (SIGKILL: the
//! data is gone, as after a real crash without persistence), `start_again` brings it back
//! on the same port so clients holding the URL can reconnect.
//!
//! The RESP client exists for readiness probes and for tests that want to poke the server
//! directly (`FLUSHALL`, `DEBUG SLEEP`, `CLIENT KILL`) without depending on a Redis crate.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::binaries;
use crate::error::{Result, TestkitError};
use crate::process::{self, Launch, ServerProcess, StartFailure};
use crate::scratch::{ScratchDir, scratch_base};
use crate::tls::{CertFiles, TestCa};
use crate::url::{ConnectionUrl, redact};

/// Points the guards at an external Redis instead of starting one.
pub const REDIS_URL_ENV: &str = "PROXYPOOL_TEST_REDIS_URL";

const SERVER: &str = "redis-server";

/// How many fresh ports to try when someone else grabs ours between probe and bind.
const PORT_ATTEMPTS: usize = 3;

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

/// One RESP2 connection over a blocking `TcpStream`.
#[derive(Debug)]
pub struct RespConnection {
    reader: BufReader<TcpStream>,
}

fn protocol(message: impl Into<String>) -> TestkitError {
    TestkitError::Protocol {
        server: SERVER,
        message: message.into(),
    }
}

fn io_error(context: &str, error: std::io::Error) -> TestkitError {
    TestkitError::io(format!("redis: {context}"), error)
}

impl RespConnection {
    /// Connects to `host:port` (no AUTH, database 0).
    pub fn connect(host: &str, port: u16) -> Result<Self> {
        let addresses = (host, port)
            .to_socket_addrs()
            .map_err(|error| io_error(&format!("resolving {host}:{port}"), error))?;
        let mut last_error = None;
        for address in addresses {
            match TcpStream::connect_timeout(&address, CONNECT_TIMEOUT) {
                Ok(stream) => {
                    stream
                        .set_read_timeout(Some(IO_TIMEOUT))
                        .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)))
                        .and_then(|()| stream.set_nodelay(true))
                        .map_err(|error| io_error("configuring the socket", error))?;
                    return Ok(Self {
                        reader: BufReader::new(stream),
                    });
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(io_error(
            &format!("connecting to {host}:{port}"),
            last_error.unwrap_or_else(|| std::io::Error::other("no address")),
        ))
    }

    /// Sends one command and reads its reply; an error reply becomes `Err(Server)`.
    pub fn command<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<RespValue> {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            let arg = arg.as_ref();
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg);
            request.extend_from_slice(b"\r\n");
        }
        self.reader
            .get_mut()
            .write_all(&request)
            .map_err(|error| io_error("sending a command", error))?;
        match self.read_value()? {
            RespValue::Error(message) => Err(TestkitError::Server {
                server: SERVER,
                message,
            }),
            value => Ok(value),
        }
    }

    fn read_line(&mut self) -> Result<String> {
        let mut line = Vec::new();
        let read = self
            .reader
            .read_until(b'\n', &mut line)
            .map_err(|error| io_error("reading a reply", error))?;
        if read == 0 {
            return Err(io_error(
                "reading a reply",
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"),
            ));
        }
        if !line.ends_with(b"\r\n") {
            return Err(protocol("reply line not terminated by CRLF"));
        }
        line.truncate(line.len() - 2);
        String::from_utf8(line).map_err(|_| protocol("reply line is not UTF-8"))
    }

    fn read_length(header: &str) -> Result<Option<usize>> {
        let length: i64 = header
            .parse()
            .map_err(|_| protocol(format!("bad length {header:?}")))?;
        if length < 0 {
            return Ok(None);
        }
        usize::try_from(length)
            .map(Some)
            .map_err(|_| protocol(format!("length {length} too large")))
    }

    fn read_value(&mut self) -> Result<RespValue> {
        let line = self.read_line()?;
        let (kind, rest) = line
            .split_at_checked(1)
            .ok_or_else(|| protocol("empty reply line"))?;
        match kind {
            "+" => Ok(RespValue::Simple(rest.to_owned())),
            "-" => Ok(RespValue::Error(rest.to_owned())),
            ":" => rest
                .parse()
                .map(RespValue::Integer)
                .map_err(|_| protocol(format!("bad integer {rest:?}"))),
            "$" => {
                let Some(length) = Self::read_length(rest)? else {
                    return Ok(RespValue::Nil);
                };
                let mut payload = vec![0; length + 2];
                std::io::Read::read_exact(&mut self.reader, &mut payload)
                    .map_err(|error| io_error("reading a bulk string", error))?;
                if !payload.ends_with(b"\r\n") {
                    return Err(protocol("bulk string not terminated by CRLF"));
                }
                payload.truncate(length);
                Ok(RespValue::Bulk(payload))
            }
            "*" => {
                let Some(count) = Self::read_length(rest)? else {
                    return Ok(RespValue::Nil);
                };
                (0..count)
                    .map(|_| self.read_value())
                    .collect::<Result<Vec<_>>>()
                    .map(RespValue::Array)
            }
            other => Err(protocol(format!("unknown reply type {other:?}"))),
        }
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

/// Credentials and database of an external server, from its URL.
#[derive(Debug)]
struct ExternalRedis {
    user: Option<String>,
    password: Option<String>,
    database: Option<String>,
}

/// A Redis for one test: private (started and owned by this guard) or external
/// (`PROXYPOOL_TEST_REDIS_URL`). A private server is killed when the guard drops.
#[derive(Debug)]
pub struct RedisServer {
    url: String,
    host: String,
    port: u16,
    private: Option<PrivateRedis>,
    external: Option<ExternalRedis>,
    /// `rediss://127.0.0.1:TLS_PORT/` when the server also speaks TLS.
    tls_url: Option<String>,
}

/// Quotes a value for redis.conf (double quotes, backslash escapes).
fn config_quote(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

fn write_config(dir: &Path) -> Result<PathBuf> {
    let config = dir.join("redis.conf");
    let text = format!(
        "# Written by proxypool-testkit: a throwaway, non-persistent test server.\n\
         bind 127.0.0.1\n\
         protected-mode yes\n\
         daemonize no\n\
         dir {}\n\
         save \"\"\n\
         appendonly no\n\
         logfile \"\"\n",
        config_quote(&dir.to_string_lossy()),
    );
    std::fs::write(&config, text)
        .map_err(|error| TestkitError::io(format!("writing {}", config.display()), error))?;
    Ok(config)
}

fn ping(port: u16) -> std::result::Result<(), String> {
    let mut connection =
        RespConnection::connect("127.0.0.1", port).map_err(|error| error.to_string())?;
    match connection.command(&["PING"]) {
        Ok(RespValue::Simple(pong)) if pong == "PONG" => Ok(()),
        Ok(other) => Err(format!("PING answered {other:?}")),
        Err(error) => Err(error.to_string()),
    }
}

impl PrivateRedis {
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
        let config = write_config(dir.path())?;
        let mut private = PrivateRedis {
            process: None,
            binary,
            config,
            log: dir.path().join("redis.log"),
            tls,
            dir,
        };
        let mut attempt = 0;
        let port = loop {
            attempt += 1;
            let port = process::free_loopback_port()?;
            match private.launch(port) {
                Ok(()) => break port,
                Err(failure) if failure.port_taken && attempt < PORT_ATTEMPTS => continue,
                Err(failure) => return Err(failure.error),
            }
        };
        Ok(Self {
            url: format!("redis://127.0.0.1:{port}/"),
            host: "127.0.0.1".to_owned(),
            port,
            tls_url: private
                .tls
                .as_ref()
                .map(|tls| format!("rediss://127.0.0.1:{}/", tls.port)),
            private: Some(private),
            external: None,
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
            external: Some(ExternalRedis {
                user: parsed.user,
                password: parsed.password,
                database: Some(parsed.path).filter(|path| !path.is_empty()),
            }),
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
        match &mut self.private {
            None => true,
            Some(private) => match &mut private.process {
                Some(process) => process.exited().is_none(),
                None => false,
            },
        }
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
        let private = self.private_mut("stop")?;
        if let Some(mut server) = private.process.take() {
            server.stop("KILL", process::STOP_TIMEOUT);
        }
        Ok(())
    }

    /// Starts the stopped server again on the same port (empty: nothing was persisted).
    /// A no-op when it is running.
    pub fn start_again(&mut self) -> Result<()> {
        let port = self.port;
        let private = self.private_mut("start_again")?;
        if let Some(server) = &mut private.process {
            if server.exited().is_none() {
                return Ok(());
            }
            private.process = None;
        }
        private.launch(port).map_err(|failure| failure.error)
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
        let mut connection = RespConnection::connect(&self.host, self.port)?;
        if let Some(external) = &self.external {
            match (&external.user, &external.password) {
                (Some(user), Some(password)) => {
                    connection.command(&["AUTH", user.as_str(), password.as_str()])?;
                }
                (None, Some(password)) => {
                    connection.command(&["AUTH", password.as_str()])?;
                }
                _ => {}
            }
            if let Some(database) = &external.database {
                connection.command(&["SELECT", database.as_str()])?;
            }
        }
        Ok(connection)
    }

    /// Runs one command on a fresh connection, e.g. `redis.command(&["FLUSHALL"])`.
    pub fn command<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<RespValue> {
        self.connect()?.command(args)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(private) = &mut self.private
            && let Some(mut server) = private.process.take()
        {
            server.stop("KILL", process::STOP_TIMEOUT);
        }
    }
}

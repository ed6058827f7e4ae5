//! A minimal PostgreSQL frontend/backend protocol (v3) client over a blocking `TcpStream`.
//!
//! Used for the readiness probe (which must tell "starting up" from "ready"), for
//! `create_database`, and for tests that want a quick `select`. It speaks only the simple
//! query protocol and trust or cleartext-password authentication; real adapters use a real
//! driver.

use std::io::{BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::TestkitError;

const SERVER: &str = "postgres";

/// Protocol version 3.0.
const PROTOCOL_VERSION: i32 = 196_608;

/// Sanity bound on one backend message; anything larger means we are out of sync.
const MAX_MESSAGE_LEN: usize = 64 * 1024 * 1024;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// CREATE DATABASE copies a template: allow it time, but never hang a test forever.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// SQLSTATE 57P03 `cannot_connect_now`: the server is starting up or shutting down.
pub(crate) const CANNOT_CONNECT_NOW: &str = "57P03";

/// A query result: rows of text columns (`None` = SQL NULL).
pub type Rows = Vec<Vec<Option<String>>>;

/// Failures of the wire client, detailed enough for the readiness probe.
#[derive(Debug)]
pub(crate) enum WireError {
    Io(std::io::Error),
    /// An ErrorResponse: SQLSTATE and human-readable text.
    Server {
        code: String,
        message: String,
    },
    Protocol(String),
    UnsupportedAuth(String),
}

impl WireError {
    pub(crate) fn sqlstate(&self) -> Option<&str> {
        match self {
            Self::Server { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl std::fmt::Display for WireError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(error) => write!(formatter, "{error}"),
            Self::Server { code, message } => write!(formatter, "{message} (SQLSTATE {code})"),
            Self::Protocol(message) => write!(formatter, "protocol error: {message}"),
            Self::UnsupportedAuth(method) => {
                write!(formatter, "unsupported authentication {method}")
            }
        }
    }
}

impl From<std::io::Error> for WireError {
    fn from(error: std::io::Error) -> Self {
        Self::Io(error)
    }
}

impl From<WireError> for TestkitError {
    fn from(error: WireError) -> Self {
        match error {
            WireError::Io(source) => TestkitError::io("postgres connection", source),
            WireError::Server { .. } => TestkitError::Server {
                server: SERVER,
                message: error.to_string(),
            },
            WireError::Protocol(message) => TestkitError::Protocol {
                server: SERVER,
                message,
            },
            WireError::UnsupportedAuth(method) => TestkitError::UnsupportedAuth {
                server: SERVER,
                method,
            },
        }
    }
}

/// Where and as whom to connect.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectParams<'a> {
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    pub(crate) user: &'a str,
    pub(crate) password: Option<&'a str>,
    pub(crate) database: &'a str,
}

/// An authenticated session, ready for queries.
#[derive(Debug)]
pub(crate) struct WireConnection {
    reader: BufReader<TcpStream>,
}

fn put_cstring(buffer: &mut Vec<u8>, text: &str) {
    buffer.extend_from_slice(text.as_bytes());
    buffer.push(0);
}

/// Frames a message: optional type byte, then a length that counts itself.
fn frame(kind: Option<u8>, body: &[u8]) -> Result<Vec<u8>, WireError> {
    let length = i32::try_from(body.len() + 4)
        .map_err(|_| WireError::Protocol("message too large".to_owned()))?;
    let mut message = Vec::with_capacity(body.len() + 5);
    message.extend(kind);
    message.extend_from_slice(&length.to_be_bytes());
    message.extend_from_slice(body);
    Ok(message)
}

/// Splits NUL-terminated strings off the front of a message body.
struct BodyReader<'a> {
    body: &'a [u8],
}

impl<'a> BodyReader<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], WireError> {
        if self.body.len() < count {
            return Err(WireError::Protocol(
                "message shorter than its fields".to_owned(),
            ));
        }
        let (taken, rest) = self.body.split_at(count);
        self.body = rest;
        Ok(taken)
    }

    fn i16(&mut self) -> Result<i16, WireError> {
        let bytes = self.take(2)?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn i32(&mut self) -> Result<i32, WireError> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn cstring(&mut self) -> Result<String, WireError> {
        let end = self
            .body
            .iter()
            .position(|&byte| byte == 0)
            .ok_or_else(|| WireError::Protocol("unterminated string".to_owned()))?;
        let text = String::from_utf8_lossy(&self.body[..end]).into_owned();
        self.body = &self.body[end + 1..];
        Ok(text)
    }
}

/// Reads the fields of an ErrorResponse into a [`WireError::Server`].
fn server_error(body: &[u8]) -> WireError {
    let mut reader = BodyReader { body };
    let (mut severity, mut code, mut message, mut detail) =
        (String::new(), String::new(), String::new(), None);
    while let Ok(field) = reader.take(1) {
        if field[0] == 0 {
            break;
        }
        let Ok(value) = reader.cstring() else {
            break;
        };
        match field[0] {
            b'S' => severity = value,
            b'C' => code = value,
            b'M' => message = value,
            b'D' => detail = Some(value),
            _ => {}
        }
    }
    let detail = detail
        .map(|detail| format!(" ({detail})"))
        .unwrap_or_default();
    WireError::Server {
        code,
        message: format!("{severity}: {message}{detail}"),
    }
}

impl WireConnection {
    /// Connects and authenticates; returns once the server is ready for queries.
    pub(crate) fn connect(params: ConnectParams<'_>) -> Result<Self, WireError> {
        let mut last_error = None;
        let mut stream = None;
        for address in (params.host, params.port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&address, CONNECT_TIMEOUT) {
                Ok(connected) => {
                    stream = Some(connected);
                    break;
                }
                Err(error) => last_error = Some(error),
            }
        }
        let stream = stream.ok_or_else(|| {
            WireError::Io(last_error.unwrap_or_else(|| std::io::Error::other("no address")))
        })?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        let mut connection = Self {
            reader: BufReader::new(stream),
        };
        connection.startup(params)?;
        Ok(connection)
    }

    fn send(&mut self, message: &[u8]) -> Result<(), WireError> {
        self.reader.get_mut().write_all(message)?;
        Ok(())
    }

    fn receive(&mut self) -> Result<(u8, Vec<u8>), WireError> {
        let mut header = [0u8; 5];
        self.reader.read_exact(&mut header)?;
        let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        let length = usize::try_from(length)
            .ok()
            .filter(|length| (4..=MAX_MESSAGE_LEN).contains(length))
            .ok_or_else(|| WireError::Protocol(format!("bad message length {length}")))?;
        let mut body = vec![0u8; length - 4];
        self.reader.read_exact(&mut body)?;
        Ok((header[0], body))
    }

    fn startup(&mut self, params: ConnectParams<'_>) -> Result<(), WireError> {
        let mut body = PROTOCOL_VERSION.to_be_bytes().to_vec();
        for (key, value) in [
            ("user", params.user),
            ("database", params.database),
            ("application_name", "proxypool-testkit"),
            ("client_encoding", "UTF8"),
        ] {
            put_cstring(&mut body, key);
            put_cstring(&mut body, value);
        }
        body.push(0);
        self.send(&frame(None, &body)?)?;
        loop {
            let (kind, body) = self.receive()?;
            match kind {
                b'R' => {
                    let mut reader = BodyReader { body: &body };
                    match reader.i32()? {
                        0 => {}
                        3 => {
                            let password = params.password.ok_or_else(|| {
                                WireError::UnsupportedAuth(
                                    "password (none given in the URL)".to_owned(),
                                )
                            })?;
                            let mut password_body = Vec::new();
                            put_cstring(&mut password_body, password);
                            self.send(&frame(Some(b'p'), &password_body)?)?;
                        }
                        5 => return Err(WireError::UnsupportedAuth("md5".to_owned())),
                        10 => return Err(WireError::UnsupportedAuth("SASL (SCRAM)".to_owned())),
                        other => return Err(WireError::UnsupportedAuth(format!("method {other}"))),
                    }
                }
                b'E' => return Err(server_error(&body)),
                b'Z' => return Ok(()),
                // ParameterStatus, BackendKeyData, NoticeResponse: nothing we need.
                b'S' | b'K' | b'N' => {}
                other => {
                    return Err(WireError::Protocol(format!(
                        "unexpected message {:?} during startup",
                        char::from(other)
                    )));
                }
            }
        }
    }

    /// Runs `sql` (one or more statements) with the simple query protocol; returns the
    /// rows of all statements, or the first error once the server is ready again.
    pub(crate) fn simple_query(&mut self, sql: &str) -> Result<Rows, WireError> {
        let mut body = Vec::new();
        put_cstring(&mut body, sql);
        self.send(&frame(Some(b'Q'), &body)?)?;
        let mut rows = Vec::new();
        let mut failure = None;
        loop {
            let (kind, body) = self.receive()?;
            match kind {
                b'D' => {
                    let mut reader = BodyReader { body: &body };
                    let columns = reader.i16()?;
                    let mut row = Vec::with_capacity(usize::try_from(columns).unwrap_or(0));
                    for _ in 0..columns {
                        let length = reader.i32()?;
                        row.push(match usize::try_from(length) {
                            Ok(length) => {
                                Some(String::from_utf8_lossy(reader.take(length)?).into_owned())
                            }
                            Err(_) => None,
                        });
                    }
                    rows.push(row);
                }
                b'E' => {
                    failure.get_or_insert(server_error(&body));
                }
                b'Z' => return failure.map_or(Ok(rows), Err),
                // RowDescription, CommandComplete, EmptyQueryResponse, notices, parameter
                // changes: nothing the caller asked for.
                b'T' | b'C' | b'I' | b'N' | b'S' => {}
                other => {
                    return Err(WireError::Protocol(format!(
                        "unexpected message {:?} (COPY is not supported)",
                        char::from(other)
                    )));
                }
            }
        }
    }
}

impl Drop for WireConnection {
    fn drop(&mut self) {
        // Terminate politely so the server does not log "unexpected EOF" for every probe.
        if let Ok(terminate) = frame(Some(b'X'), &[]) {
            let _ = self.reader.get_mut().write_all(&terminate);
        }
    }
}

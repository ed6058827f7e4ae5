//! The PostgreSQL client of the guards, on sqlx: the readiness probe (which must tell
//! "starting up" from "ready"), `create_database` and tests' quick queries (the simple query
//! protocol, every column as text). sqlx is async and the guards are blocking: each call
//! runs on a current-thread runtime on a thread of its own, so a guard works the same from
//! a plain test and from inside an async one.

use std::future::Future;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::{AssertSqlSafe, Connection, PgConnection, Row};

use crate::error::TestkitError;

const SERVER: &str = "postgres";

/// Connecting and authenticating on loopback takes milliseconds; a hung server must not
/// hang a test.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// CREATE DATABASE copies a template: allow it time, but never hang a test forever.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// SQLSTATE 57P03 `cannot_connect_now`: the server is starting up or shutting down.
pub(crate) const CANNOT_CONNECT_NOW: &str = "57P03";

/// A query result: rows of text columns (`None` = SQL NULL).
pub type Rows = Vec<Vec<Option<String>>>;

/// Where and as whom to connect.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectParams<'a> {
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    pub(crate) user: &'a str,
    pub(crate) password: Option<&'a str>,
    pub(crate) database: &'a str,
}

/// Failures of the client, detailed enough for the readiness probe.
#[derive(Debug)]
pub(crate) enum ClientError {
    Sql(sqlx::Error),
    TimedOut(&'static str),
    Runtime(std::io::Error),
}

impl ClientError {
    /// The SQLSTATE of an error the server sent.
    pub(crate) fn sqlstate(&self) -> Option<String> {
        match self {
            Self::Sql(error) => error
                .as_database_error()
                .and_then(|error| error.code())
                .map(|code| code.into_owned()),
            _ => None,
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sql(sqlx::Error::Database(error)) => match error.code() {
                Some(code) => write!(formatter, "{} (SQLSTATE {code})", error.message()),
                None => write!(formatter, "{}", error.message()),
            },
            Self::Sql(error) => write!(formatter, "{error}"),
            Self::TimedOut(what) => write!(formatter, "{what} timed out"),
            Self::Runtime(error) => write!(formatter, "starting a runtime: {error}"),
        }
    }
}

impl From<ClientError> for TestkitError {
    fn from(error: ClientError) -> Self {
        let message = error.to_string();
        match error {
            ClientError::Sql(sqlx::Error::Database(_)) => TestkitError::Server {
                server: SERVER,
                message,
            },
            ClientError::Sql(sqlx::Error::Io(source)) | ClientError::Runtime(source) => {
                TestkitError::io("postgres connection", source)
            }
            ClientError::TimedOut(_) => TestkitError::io(
                "postgres connection",
                std::io::Error::new(std::io::ErrorKind::TimedOut, message),
            ),
            ClientError::Sql(_) => TestkitError::Protocol {
                server: SERVER,
                message,
            },
        }
    }
}

/// Runs `work` to completion on a runtime of its own, on a thread of its own.
fn block_on<T: Send>(
    work: impl Future<Output = Result<T, ClientError>> + Send,
) -> Result<T, ClientError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(ClientError::Runtime)?
                    .block_on(work)
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

async fn connect(params: ConnectParams<'_>) -> Result<PgConnection, ClientError> {
    // Plain, as the probe must speak before a TLS server's certificate matters; the
    // environment's PG* variables and ~/.pgpass have no say either.
    let mut options = PgConnectOptions::new_without_pgpass()
        .host(params.host)
        .port(params.port)
        .username(params.user)
        .database(params.database)
        .ssl_mode(PgSslMode::Disable);
    if let Some(password) = params.password {
        options = options.password(password);
    }
    tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options))
        .await
        .map_err(|_| ClientError::TimedOut("connecting"))?
        .map_err(ClientError::Sql)
}

/// Connects and disconnects: whether the server accepts sessions.
pub(crate) fn probe(params: ConnectParams<'_>) -> Result<(), ClientError> {
    block_on(async move {
        let connection = connect(params).await?;
        // A failed goodbye still proved the server ready.
        let _ = connection.close().await;
        Ok(())
    })
}

/// Runs `sql` (one or more statements, the simple query protocol) and returns its rows.
pub(crate) fn simple_query(params: ConnectParams<'_>, sql: &str) -> Result<Rows, ClientError> {
    block_on(async move {
        let mut connection = connect(params).await?;
        let query = sqlx::raw_sql(AssertSqlSafe(sql)).fetch_all(&mut connection);
        let rows = tokio::time::timeout(QUERY_TIMEOUT, query)
            .await
            .map_err(|_| ClientError::TimedOut("the query"))?
            .map_err(ClientError::Sql)?;
        let _ = connection.close().await;
        // The simple query protocol sends every value as text, whatever its type.
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|column| row.try_get_unchecked::<Option<String>, _>(column))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(ClientError::Sql)
            })
            .collect()
    })
}

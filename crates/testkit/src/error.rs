//! The one error type of the testkit.
//!
//! Every variant says which server it is about and, when a server misbehaved, carries the
//! tail of that server's log: a failing test should explain itself without a rerun.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong while starting, stopping or talking to a test server.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// The server's binaries are not installed where the testkit looks.
    #[error("{binary} not found (searched {searched}); run scripts/test.sh to install it")]
    BinaryNotFound {
        /// The missing program, e.g. `redis-server` or `initdb`.
        binary: &'static str,
        /// Where the testkit looked, for the message.
        searched: String,
    },

    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What the testkit was doing.
        context: String,
        /// The underlying failure.
        #[source]
        source: io::Error,
    },

    /// A helper program (initdb, useradd, ...) ran but failed.
    #[error("{program} failed ({status}): {output}")]
    CommandFailed {
        /// The program that failed.
        program: String,
        /// Its exit status, as text.
        status: String,
        /// What it printed (stdout and stderr, trimmed).
        output: String,
    },

    /// The server process exited while the testkit waited for it to become ready.
    #[error("{server} exited during startup ({status}); log tail from {log}:\n{log_tail}")]
    ExitedEarly {
        /// `redis-server` or `postgres`.
        server: &'static str,
        /// Its exit status, as text.
        status: String,
        /// The log file.
        log: PathBuf,
        /// Its last lines.
        log_tail: String,
    },

    /// The server did not answer within the readiness bound.
    #[error("{server} not ready after {waited:?} ({last_probe}); log tail from {log}:\n{log_tail}")]
    NotReady {
        /// `redis-server` or `postgres`.
        server: &'static str,
        /// How long the testkit waited.
        waited: Duration,
        /// What the last readiness probe saw.
        last_probe: String,
        /// The log file.
        log: PathBuf,
        /// Its last lines.
        log_tail: String,
    },

    /// Stop/restart was asked of a server the testkit does not own.
    #[error(
        "cannot {operation} the external server from {env_var}: fault injection needs a \
         private server (unset {env_var})"
    )]
    ExternalServer {
        /// `stop`, `start_again` or `restart`.
        operation: &'static str,
        /// The environment variable that pointed at the external server.
        env_var: &'static str,
    },

    /// An environment override or derived URL could not be understood.
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given (never contains a password: the testkit redacts it first).
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The server answered, but not the way the protocol says it should.
    #[error("{server} protocol error: {message}")]
    Protocol {
        /// `redis-server` or `postgres`.
        server: &'static str,
        /// What was unexpected.
        message: String,
    },

    /// The server rejected a command or query.
    #[error("{server} error: {message}")]
    Server {
        /// `redis-server` or `postgres`.
        server: &'static str,
        /// The server's own error text (PostgreSQL: with the SQLSTATE).
        message: String,
    },

    /// A Redis Cluster did not reach the state a test waits for within the bound.
    #[error(
        "redis cluster: {waiting_for} not reached after {waited:?} (last seen: {last_seen}); \
         node log tails:\n{log_tails}"
    )]
    ClusterNotReady {
        /// What the testkit waited for, e.g. "every node agrees on all 16384 slots".
        waiting_for: String,
        /// How long it waited.
        waited: Duration,
        /// Why the last look at the cluster did not count.
        last_seen: String,
        /// The last lines of every node's log.
        log_tails: String,
    },

    /// A Redis Cluster guard was asked for something its nodes cannot do (an unknown port,
    /// a failover of a node that was no primary, resuming a killed node).
    #[error("redis cluster: {message}")]
    Cluster {
        /// What is wrong.
        message: String,
    },
}

impl TestkitError {
    /// Wraps an I/O error with what the testkit was doing when it happened.
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = TestkitError> = std::result::Result<T, E>;

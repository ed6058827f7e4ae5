//! `[quota]`: where the durable quota lives (memory, a SQLite file or PostgreSQL), its
//! pool and timeouts, and their checks. The URL is parsed into [`QuotaKind`] at load and
//! never carries a password.

use crate::check::Check;
use crate::duration::Millis;
use crate::secret::SecretRef;
use serde::{Deserialize, Serialize};

/// The durable quota: `memory`, `sqlite://PATH` or `postgres://user@host:port/db`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaStoreConfig {
    pub url: String,
    /// PostgreSQL only: the password of the URL's user (never written into the URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<SecretRef>,
    /// Pooled connections per process (default: PostgreSQL 4, SQLite 1, since SQLite
    /// writes one at a time anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    /// How long a decision waits for a pooled connection, connecting included.
    #[serde(default = "default_quota_acquire_timeout")]
    pub acquire_timeout: Millis,
    /// PostgreSQL's `statement_timeout` for every quota statement (row-lock waits
    /// included); SQLite's busy timeout (waiting for another connection's write lock).
    #[serde(default = "default_quota_statement_timeout")]
    pub statement_timeout: Millis,
    /// The bound on one whole decision (or settlement), whatever hangs; past it the
    /// answer is 503 and nothing is charged. Longer than the two above.
    #[serde(default = "default_quota_decision_timeout")]
    pub decision_timeout: Millis,
    #[serde(skip)]
    pub kind: QuotaKind,
}

fn default_quota_acquire_timeout() -> Millis {
    Millis::from_secs(2)
}

fn default_quota_statement_timeout() -> Millis {
    Millis::from_secs(2)
}

fn default_quota_decision_timeout() -> Millis {
    Millis::from_secs(3)
}

impl Default for QuotaStoreConfig {
    fn default() -> Self {
        QuotaStoreConfig {
            url: "memory".into(),
            password: None,
            max_connections: None,
            acquire_timeout: default_quota_acquire_timeout(),
            statement_timeout: default_quota_statement_timeout(),
            decision_timeout: default_quota_decision_timeout(),
            kind: QuotaKind::Memory,
        }
    }
}

/// The parsed quota URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum QuotaKind {
    #[default]
    Memory,
    /// A SQLite file (relative paths are relative to the config file).
    Sqlite { path: std::path::PathBuf },
    /// PostgreSQL; the URL carries no password.
    Postgres { url: String },
}

/// Checks `[quota]`, parses its URL into [`QuotaStoreConfig::kind`] (a SQLite path taken
/// from the file's directory) and resolves its password.
pub(crate) fn validate(c: &mut Check<'_>, quota: &mut QuotaStoreConfig) {
    let url = quota.url.clone();
    quota.kind = if url == "memory" {
        QuotaKind::Memory
    } else if let Some(path) = url.strip_prefix("sqlite://") {
        if path.is_empty() {
            return c.at("quota.url", "sqlite:// needs a file path");
        }
        QuotaKind::Sqlite {
            path: c.base_dir.join(path),
        }
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        if !no_userinfo_password(c, &url) {
            return;
        }
        QuotaKind::Postgres { url }
    } else {
        return c.at(
            "quota.url",
            "must be \"memory\", sqlite://PATH or postgres://USER@HOST:PORT/DB",
        );
    };
    if let Some(password) = &mut quota.password {
        c.resolve_plain("quota.password", password);
    }
    if !matches!(quota.kind, QuotaKind::Postgres { .. }) && quota.password.is_some() {
        c.at("quota.password", "only a postgres quota takes a password");
    }
    if let Some(connections) = quota.max_connections {
        c.require(
            (1..=256).contains(&connections),
            "quota.max_connections",
            "must be between 1 and 256",
        );
    }
    let (min, max) = (Millis(1), Millis::from_secs(60));
    c.duration("quota.acquire_timeout", quota.acquire_timeout, min, max);
    c.duration("quota.statement_timeout", quota.statement_timeout, min, max);
    c.duration("quota.decision_timeout", quota.decision_timeout, min, max);
    // The decision bound covers waiting for a connection and running the statement; one
    // shorter than either would cut every slow-but-healthy decision into a 503.
    for (key, part) in [
        ("acquire_timeout", quota.acquire_timeout),
        ("statement_timeout", quota.statement_timeout),
    ] {
        if quota.decision_timeout <= part {
            c.at(
                "quota.decision_timeout",
                format!("must be longer than quota.{key} ({part}): it bounds the whole decision"),
            );
        }
    }
}

/// PostgreSQL URLs name a user (`postgres://proxypool@db/...`) but never a password.
fn no_userinfo_password(c: &mut Check<'_>, url: &str) -> bool {
    let authority = url
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?']).next().unwrap_or(""))
        .unwrap_or("");
    let has_password = authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'));
    if has_password || url.contains("password=") {
        c.at(
            "quota.url",
            "the URL must not carry a password; use password_env or password_file",
        );
        return false;
    }
    true
}

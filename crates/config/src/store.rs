//! `[store]`: where the activity pool lives (the embedded memory store, one Redis, Redis
//! behind Sentinel, or a Redis Cluster), the Redis-only tuning and durability policy, and
//! their checks. The URL is parsed into [`StoreKind`] at load and never carries a password.

use crate::check::Check;
use crate::duration::Millis;
use crate::secret::SecretRef;
use crate::target::split_host_port;
use serde::{Deserialize, Serialize};

/// Where the activity pool lives: `memory`, `redis://host:port/db`,
/// `redis+sentinel://host:port[,host:port]/master_name[/db]` or
/// `redis+cluster://host:port[,host:port]` (`rediss+cluster://` over TLS).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    pub url: String,
    /// Redis only: the password (for Sentinel, the master's; for a Cluster, every node's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<SecretRef>,
    /// Redis only: every key lives under `{key_prefix}:{activity}:` (1-64 characters of
    /// `[A-Za-z0-9._:-]`), so several deployments can share one Redis.
    #[serde(default = "default_key_prefix")]
    pub key_prefix: String,
    /// Redis only: the shard groups the pool's keys are spread over, one hash tag each
    /// (1-64). On a Redis Cluster one per primary spreads the pool over them; 1 keeps the
    /// whole pool in one slot. A store keeps the count it was first used with.
    #[serde(default = "default_groups")]
    pub groups: u32,
    /// Redis only: bound of one Redis round trip (connecting included); past it the call
    /// fails as unavailable instead of hanging.
    #[serde(default = "default_call_timeout")]
    pub call_timeout: Millis,
    /// Redis only: the lease a controller holds to run the reconciler, checker, ownership
    /// and maintenance loops; a standby takes over within this long after the holder dies.
    #[serde(default = "default_leader_lease")]
    pub leader_lease: Millis,
    /// Redis only, with `rediss://` or `rediss+cluster://`: the CA bundle the server (every
    /// cluster node) must chain to (unset = the system roots) and a client certificate if
    /// Redis asks for one (`tls-auth-clients`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::ClientTlsConfig>,
    /// Redis Sentinel only: the sentinels and the master speak TLS (verified against the
    /// system roots).
    #[serde(default)]
    pub sentinel_tls: bool,
    /// Redis only: what the controller does when the server would forget the pool's state
    /// (AOF off, or a `maxmemory-policy` that evicts keys): `warn` (log each risk once the
    /// server answers) or `refuse` (fail the start, also when the server cannot be reached
    /// to tell).
    #[serde(default)]
    pub durability: DurabilityPolicy,
    #[serde(skip)]
    pub kind: StoreKind,
}

/// See [`StoreConfig::durability`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DurabilityPolicy {
    #[default]
    Warn,
    Refuse,
}

fn default_key_prefix() -> String {
    "pp".into()
}

fn default_groups() -> u32 {
    1
}

fn default_call_timeout() -> Millis {
    Millis(500)
}

fn default_leader_lease() -> Millis {
    Millis::from_secs(10)
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: "memory".into(),
            password: None,
            key_prefix: default_key_prefix(),
            groups: default_groups(),
            call_timeout: default_call_timeout(),
            leader_lease: default_leader_lease(),
            tls: None,
            sentinel_tls: false,
            durability: DurabilityPolicy::Warn,
            kind: StoreKind::Memory,
        }
    }
}

/// The parsed store URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StoreKind {
    #[default]
    Memory,
    /// A single Redis (`redis://` or `rediss://`); the URL carries no password.
    Redis { url: String },
    /// Redis behind Sentinel.
    Sentinel {
        sentinels: Vec<String>,
        master: String,
        db: u32,
    },
    /// A Redis Cluster: seed nodes as `host:port` (an IPv6 host without brackets); `tls`
    /// for `rediss+cluster://`. Database 0, the only one a cluster has.
    Cluster { nodes: Vec<String>, tls: bool },
}

/// A Redis URL names no user or password: the password is given as `password`.
fn no_userinfo(c: &mut Check<'_>, path: &str, url: &str) -> bool {
    let authority = url
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?']).next().unwrap_or(""))
        .unwrap_or("");
    if authority.contains('@') {
        c.at(
            path,
            "the URL must not carry credentials; use password_env or password_file",
        );
        return false;
    }
    true
}

/// Checks `[store]`, parses its URL into [`StoreConfig::kind`] and resolves its password.
pub(crate) fn validate(c: &mut Check<'_>, store: &mut StoreConfig) {
    let url = store.url.clone();
    store.kind = if url == "memory" {
        StoreKind::Memory
    } else if url.starts_with("redis://") || url.starts_with("rediss://") {
        if !no_userinfo(c, "store.url", &url) {
            return;
        }
        StoreKind::Redis { url }
    } else if let Some(rest) = url.strip_prefix("redis+sentinel://") {
        if !no_userinfo(c, "store.url", &url) {
            return;
        }
        match parse_sentinel(rest) {
            Ok(kind) => kind,
            Err(message) => return c.at("store.url", message),
        }
    } else if let Some((rest, tls)) = cluster_seeds(&url) {
        if !no_userinfo(c, "store.url", &url) {
            return;
        }
        match parse_cluster(rest, tls) {
            Ok(kind) => kind,
            Err(message) => return c.at("store.url", message),
        }
    } else {
        return c.at(
            "store.url",
            "must be \"memory\", redis://HOST:PORT[/DB], redis+sentinel://HOST:PORT[,HOST:PORT]/MASTER[/DB] \
             or redis+cluster://HOST:PORT[,HOST:PORT] (rediss:// and rediss+cluster:// over TLS)",
        );
    };
    if let Some(password) = &mut store.password {
        c.resolve_plain("store.password", password);
    }
    if store.kind == StoreKind::Memory && store.password.is_some() {
        c.at("store.password", "the memory store takes no password");
    }
    if let Some(tls) = &mut store.tls {
        crate::tls::check_client(c, "store.tls", tls);
        c.require(
            store.url.starts_with("rediss://") || store.url.starts_with("rediss+cluster://"),
            "store.tls",
            "needs a rediss:// or rediss+cluster:// URL (Sentinel over TLS trusts the system roots)",
        );
    }
    c.require(
        !store.sentinel_tls || matches!(store.kind, StoreKind::Sentinel { .. }),
        "store.sentinel_tls",
        "only for a redis+sentinel:// URL",
    );
    store_tuning(c, store);
}

/// The Redis-only knobs (checked for every store, so a file switched to Redis later by an
/// override does not start failing only then).
fn store_tuning(c: &mut Check<'_>, store: &StoreConfig) {
    let prefix = &store.key_prefix;
    c.require(
        (1..=64).contains(&prefix.len())
            && prefix
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | ':' | '-')),
        "store.key_prefix",
        "must be 1-64 characters of [A-Za-z0-9._:-]",
    );
    c.require(
        (1..=64).contains(&store.groups),
        "store.groups",
        "must be between 1 and 64",
    );
    c.duration(
        "store.call_timeout",
        store.call_timeout,
        Millis(10),
        Millis::from_secs(60),
    );
    c.duration(
        "store.leader_lease",
        store.leader_lease,
        Millis(500),
        Millis::from_secs(600),
    );
    // A renewal runs every third of the lease and the leader steps down a call timeout
    // (plus a tenth of the lease for clock skew) before it ends; below 4x the call timeout
    // one slow renewal would already cost the leadership.
    c.require(
        store.call_timeout.0.saturating_mul(4) <= store.leader_lease.0,
        "store.leader_lease",
        "must be at least 4 times store.call_timeout, so a slow renewal can be retried before the lease ends",
    );
}

fn parse_sentinel(rest: &str) -> Result<StoreKind, String> {
    let mut parts = rest.split('/');
    let hosts = parts.next().unwrap_or("");
    let master = parts
        .next()
        .filter(|m| !m.is_empty())
        .ok_or("redis+sentinel:// needs /MASTER_NAME after the sentinel hosts")?;
    let db = match parts.next() {
        None | Some("") => 0,
        Some(db) => db
            .parse()
            .map_err(|_| format!("invalid database number {db:?}"))?,
    };
    let sentinels = hosts
        .split(',')
        .map(|h| {
            split_host_port(h).map(|(host, port)| match port {
                Some(port) => format!("{host}:{port}"),
                None => format!("{host}:26379"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(StoreKind::Sentinel {
        sentinels,
        master: master.to_owned(),
        db,
    })
}

/// The seed list of a `redis+cluster://` or `rediss+cluster://` URL, and whether it is TLS.
fn cluster_seeds(url: &str) -> Option<(&str, bool)> {
    url.strip_prefix("redis+cluster://")
        .map(|rest| (rest, false))
        .or_else(|| {
            url.strip_prefix("rediss+cluster://")
                .map(|rest| (rest, true))
        })
}

/// `HOST[:PORT][,HOST[:PORT]...]`, default port 6379, at most a trailing `/` or `/0`.
fn parse_cluster(rest: &str, tls: bool) -> Result<StoreKind, String> {
    if rest.contains('?') {
        return Err("a redis+cluster:// URL takes no query parameters".into());
    }
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !matches!(path, "" | "0") {
        return Err(format!(
            "a Redis Cluster has only database 0, not {path:?}: drop the path after the seed nodes"
        ));
    }
    let nodes = hosts
        .split(',')
        .map(|h| {
            if h.is_empty() {
                return Err("an empty seed node (a stray comma?)".to_owned());
            }
            split_host_port(h).map(|(host, port)| format!("{host}:{}", port.unwrap_or(6379)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(StoreKind::Cluster { nodes, tls })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_give_seed_nodes_with_default_ports() {
        assert_eq!(
            parse_cluster("10.0.0.1,10.0.0.2:7001,[::1]:7002/", false),
            Ok(StoreKind::Cluster {
                nodes: vec![
                    "10.0.0.1:6379".into(),
                    "10.0.0.2:7001".into(),
                    "::1:7002".into()
                ],
                tls: false
            })
        );
        assert!(parse_cluster("h:7000/0", true).is_ok());
        for bad in ["", "h,", ",h", "h:0", "h:x", "h/1", "h?x=1", "[::1"] {
            assert!(parse_cluster(bad, false).is_err(), "{bad:?}");
        }
    }
}

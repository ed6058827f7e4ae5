//! The Redis store: a [`RedisPool`] from the `[store]` section, and the controller lease
//! on the same pool.
//!
//! The password comes only from `password_env` / `password_file` (the URL may not carry
//! one) and goes straight into the connection settings: it is never formatted into a URL,
//! an error or a log line. For Sentinel it is the master's password; the Sentinels
//! themselves are asked without one. For a Cluster every node takes it.
//!
//! TLS: a `rediss://` (or `rediss+cluster://`) URL connects over rustls, verifying the
//! server (every cluster node) against `[store.tls] ca` (else the system roots) and
//! presenting `[store.tls] cert`/`key` when set; `sentinel_tls` reaches the Sentinels and
//! the master over TLS.

use super::opened::{OpenedStore, StoreOpenError};
use crate::clock::SystemClock;
use crate::config::{ClientTlsConfig, DurabilityPolicy, StoreConfig, StoreKind};
use crate::leadership::{LeaseLeadership, LeaseOptions};
use proxypool_core::{Expectation, StoreIdentity};
use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use redis::{IntoConnectionInfo, RedisConnectionInfo};
use std::sync::Arc;

/// Builds the pool, checks what the server keeps (see [`check_durability`]) and starts
/// competing for the controller lease.
pub(super) async fn open(config: &StoreConfig) -> Result<OpenedStore, StoreOpenError> {
    let client = client(config)?;
    let options = RedisPoolOptions {
        key_prefix: config.key_prefix.clone(),
        call_timeout: config.call_timeout.as_duration(),
        groups: config.groups as usize,
        ..RedisPoolOptions::default()
    };
    tracing::info!(redis = ?client, key_prefix = %options.key_prefix, groups = options.groups, "opening the redis store");
    let pool =
        Arc::new(RedisPool::new(client, options).map_err(|e| StoreOpenError::Open(e.to_string()))?);
    check_durability(&pool, config.durability).await?;
    // Closed until the identity is known: the leader lease lives in the keyspace of the
    // store's incarnation, and a lease taken anywhere else would make a second leader.
    // The store guard opens it; a controller run without one opens it unchecked.
    pool.expect(Some(Expectation::unestablished()));
    let leadership = LeaseLeadership::start(
        pool.clone(),
        Arc::new(SystemClock),
        LeaseOptions::new(
            config.leader_lease.as_duration(),
            config.call_timeout.as_duration(),
        ),
    );
    tracing::info!(
        holder = leadership.holder(),
        "competing for the controller lease"
    );
    Ok(OpenedStore {
        pool,
        leadership: Arc::new(leadership),
    })
}

/// Exclusivity needs a Redis that keeps its data across a restart (AOF) and never evicts
/// (`noeviction`). `refuse`: the start fails unless the server is reachable and says so.
/// `warn`: a background task reads the settings once the server answers and logs each risk
/// (a Redis that is down at start must not fail the start).
async fn check_durability(
    pool: &Arc<RedisPool>,
    policy: DurabilityPolicy,
) -> Result<(), StoreOpenError> {
    match policy {
        DurabilityPolicy::Refuse => {
            let durability = pool.durability().await.map_err(|e| {
                StoreOpenError::Open(format!(
                    "store.durability = \"refuse\" needs the Redis settings at start: {e}"
                ))
            })?;
            let risks = durability.risks();
            if !risks.is_empty() {
                return Err(StoreOpenError::Open(format!(
                    "store.durability = \"refuse\": {}",
                    risks.join("; ")
                )));
            }
            Ok(())
        }
        DurabilityPolicy::Warn => {
            let pool = pool.clone();
            tokio::spawn(async move {
                loop {
                    match pool.durability().await {
                        Ok(durability) => {
                            for risk in durability.risks() {
                                tracing::warn!(
                                    "redis store: {risk}; exclusivity needs appendonly yes and \
                                     maxmemory-policy noeviction (set store.durability = \
                                     \"refuse\" to make this fatal)"
                                );
                            }
                            return;
                        }
                        Err(_) => tokio::time::sleep(std::time::Duration::from_secs(5)).await,
                    }
                }
            });
            Ok(())
        }
    }
}

/// The connection target with the password (if any) set in its settings.
fn client(config: &StoreConfig) -> Result<RedisClient, StoreOpenError> {
    let password = config
        .password
        .as_ref()
        .and_then(|p| p.plain())
        .map(|p| p.expose());
    match &config.kind {
        StoreKind::Redis { url } => {
            // Category only: the redis crate's detail may quote the URL.
            let invalid = |e: redis::RedisError| {
                StoreOpenError::Open(format!("invalid redis url: {}", e.category()))
            };
            let mut info = url.as_str().into_connection_info().map_err(invalid)?;
            if let Some(password) = password {
                let settings = info.redis_settings().clone().set_password(password);
                info = info.set_redis_settings(settings);
            }
            match &config.tls {
                Some(tls) => redis::Client::build_with_tls(info, certificates(tls)?),
                None => redis::Client::open(info),
            }
            .map(RedisClient::from)
            .map_err(invalid)
        }
        StoreKind::Sentinel {
            sentinels,
            master,
            db,
        } => {
            let nodes = sentinels
                .iter()
                .map(|node| node_address(node))
                .collect::<Result<Vec<_>, _>>()?;
            let mut settings = RedisConnectionInfo::default().set_db(i64::from(*db));
            if let Some(password) = password {
                settings = settings.set_password(password);
            }
            RedisClient::sentinel_with(&nodes, master, settings, config.sentinel_tls)
                .map_err(|e| StoreOpenError::Open(e.to_string()))
        }
        StoreKind::Cluster { nodes, tls } => {
            let seeds = nodes
                .iter()
                .map(|node| node_address(node))
                .collect::<Result<Vec<_>, _>>()?;
            let mut settings = RedisConnectionInfo::default();
            if let Some(password) = password {
                settings = settings.set_password(password);
            }
            let certificates = config.tls.as_ref().map(certificates).transpose()?;
            RedisClient::cluster(&seeds, settings, *tls, certificates)
                .map_err(|e| StoreOpenError::Open(e.to_string()))
        }
        StoreKind::Memory => Err(StoreOpenError::Open("not a redis store".into())),
    }
}

/// The CA bundle and client certificate of `[store.tls]`, read as PEM for the redis crate.
fn certificates(tls: &ClientTlsConfig) -> Result<redis::TlsCertificates, StoreOpenError> {
    let read = |path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| StoreOpenError::Open(format!("store.tls: {}: {e}", path.display())))
    };
    let client_tls = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: read(cert)?,
            client_key: read(key)?,
        }),
        _ => None,
    };
    Ok(redis::TlsCertificates {
        client_tls,
        root_cert: tls.ca.as_deref().map(read).transpose()?,
    })
}

/// `host:port` as validated by the config (an IPv6 host comes without brackets, and goes
/// back into them for the `redis://` URL the Sentinel or cluster client builds).
fn node_address(node: &str) -> Result<(String, u16), StoreOpenError> {
    let bad = || StoreOpenError::Open(format!("invalid node address {node:?}"));
    let (host, port) = node.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse().map_err(|_| bad())?;
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_addresses_split_and_bracket_ipv6() {
        assert_eq!(
            node_address("10.0.0.1:26379").unwrap(),
            ("10.0.0.1".to_owned(), 26379)
        );
        assert_eq!(
            node_address("::1:26380").unwrap(),
            ("[::1]".to_owned(), 26380)
        );
        assert!(node_address("nohost").is_err());
    }

    #[test]
    fn a_cluster_store_opens_a_cluster_client_on_its_seeds() {
        let config = StoreConfig {
            url: "redis+cluster://10.0.0.1:7000,[::1]:7001".into(),
            kind: StoreKind::Cluster {
                nodes: vec!["10.0.0.1:7000".into(), "::1:7001".into()],
                tls: false,
            },
            ..StoreConfig::default()
        };
        let client = client(&config).unwrap();
        assert!(client.is_cluster());
        let printed = format!("{client:?}");
        assert!(
            printed.contains("redis://10.0.0.1:7000/") && printed.contains("redis://[::1]:7001/"),
            "{printed}"
        );
    }
}

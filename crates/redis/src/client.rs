//! Where the pool's Redis is: one server, the master a set of Sentinels points at, or a
//! Redis Cluster.
//!
//! `RedisClient::open` takes `redis://`, `rediss://`-less plain URLs, `unix://` paths,
//! `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service[/db]` (the
//! Sentinel URL form other Redis clients use; default Sentinel port 26379; the credentials
//! are the master's) and `redis+cluster://[user[:password]@]host[:port][,host[:port]...]`
//! (`rediss+cluster://` over TLS; seed nodes of a Cluster, default port 6379, database 0
//! only, the same credentials on every node). A Sentinel target is resolved to its master
//! when the pool first connects and again after an I/O or READONLY error, because a
//! connection that Sentinel moved off the master is not moved by the redis crate itself.
//! A Cluster target needs only some of its nodes as seeds: the cluster client learns the
//! others and which primary owns which slot from them.
//!
//! `Debug` shows the kind and addresses only: a URL's password never reaches a log line.

use proxypool_core::PoolError;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Client, RedisConnectionInfo, TlsCertificates};
use std::fmt;
use std::time::Duration;

const SENTINEL_SCHEME: &str = "redis+sentinel://";
const SENTINEL_PORT: u16 = 26379;
const CLUSTER_SCHEME: &str = "redis+cluster://";
const CLUSTER_TLS_SCHEME: &str = "rediss+cluster://";
const CLUSTER_PORT: u16 = 6379;

/// The Redis an activity pool runs against.
#[derive(Clone)]
pub struct RedisClient {
    pub(crate) target: Target,
}

#[derive(Clone)]
pub(crate) enum Target {
    Direct(Client),
    Sentinel(SentinelTarget),
    Cluster(ClusterTarget),
}

/// A Sentinel-managed master: enough to build a fresh `SentinelClient` per resolution, so
/// no client state (or lock) is held across an await.
#[derive(Clone)]
pub(crate) struct SentinelTarget {
    nodes: Vec<String>,
    service: String,
    master: SentinelNodeConnectionInfo,
}

impl SentinelTarget {
    /// Asks the Sentinels for the current master.
    pub(crate) async fn resolve(&self) -> redis::RedisResult<Client> {
        let mut client = SentinelClient::build(
            self.nodes.clone(),
            self.service.clone(),
            Some(self.master.clone()),
            SentinelServerType::Master,
        )?;
        client.async_get_client().await
    }
}

/// A Redis Cluster: its seed nodes and what every node is reached with. The cluster
/// client is built per connection, with the pool's timeouts.
#[derive(Clone)]
pub(crate) struct ClusterTarget {
    /// `redis://host:port/` (or `rediss://`) per seed node, without credentials.
    seeds: Vec<String>,
    /// The credentials every node takes.
    settings: RedisConnectionInfo,
    /// With TLS: the CA bundle and client certificate (`None`: the system roots).
    certificates: Option<TlsCertificates>,
}

/// Redirections, retries after `TRYAGAIN`/`CLUSTERDOWN` and reconnections the cluster
/// client may make within one call. The call's timeout is the real bound; this only keeps
/// a call from spinning when the cluster answers fast and wrong.
const CLUSTER_RETRIES: u32 = 16;
/// The wait between those retries, in ms: short, so a few fit within one call timeout
/// (the client's defaults start at 1.28 s).
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (10, 100);

impl ClusterTarget {
    /// A cluster client for calls of `timeout` (see [`connect_timeout`] and
    /// [`reply_timeout`]).
    pub(crate) fn client(&self, timeout: Duration) -> redis::RedisResult<ClusterClient> {
        let mut builder = ClusterClientBuilder::new(self.seeds.iter().map(String::as_str))
            .connection_timeout(connect_timeout(timeout))
            .response_timeout(reply_timeout(timeout))
            .retries(CLUSTER_RETRIES)
            .min_retry_wait(CLUSTER_RETRY_WAIT_MS.0)
            .max_retry_wait(CLUSTER_RETRY_WAIT_MS.1);
        if let Some(username) = self.settings.username() {
            builder = builder.username(username);
        }
        if let Some(password) = self.settings.password() {
            builder = builder.password(password);
        }
        if let Some(certificates) = &self.certificates {
            builder = builder.certs(certificates.clone());
        }
        builder.build()
    }
}

/// How long connecting to one cluster node (its handshake included) may take within a
/// call of `timeout`: half of it, so that a new connection whose seeds include a hung node
/// still has time to read the slot map from the others and make the call.
pub(crate) fn connect_timeout(timeout: Duration) -> Duration {
    timeout / 2
}

/// How long a cluster node's reply may take: longer than the call, so the call's own
/// timeout always ends it first. The cluster client re-sends a command whose reply timed
/// out, and the node may still run the first one (a frozen node runs both once it
/// thaws); a call that is over sends nothing more.
pub(crate) fn reply_timeout(timeout: Duration) -> Duration {
    timeout * 2
}

impl RedisClient {
    /// Parses a Redis, Sentinel or Cluster URL (see the module docs). Nothing connects yet.
    pub fn open(url: &str) -> Result<RedisClient, PoolError> {
        if let Some(rest) = url.strip_prefix(SENTINEL_SCHEME) {
            return parse_sentinel(rest).map(|target| RedisClient {
                target: Target::Sentinel(target),
            });
        }
        for (scheme, tls) in [(CLUSTER_SCHEME, false), (CLUSTER_TLS_SCHEME, true)] {
            if let Some(rest) = url.strip_prefix(scheme) {
                return parse_cluster(rest, tls).map(|target| RedisClient {
                    target: Target::Cluster(target),
                });
            }
        }
        Client::open(url)
            .map(RedisClient::from)
            .map_err(|e| PoolError::invalid(format!("invalid redis url: {}", e.category())))
    }

    /// A Sentinel target from its parts (for configurations that do not use a URL).
    pub fn sentinel(
        sentinels: &[(String, u16)],
        service: &str,
        master: RedisConnectionInfo,
    ) -> Result<RedisClient, PoolError> {
        Self::sentinel_with(sentinels, service, master, false)
    }

    /// As [`sentinel`](Self::sentinel); with `tls` the Sentinels and the master are
    /// reached over TLS (`rediss://`), verified against the system roots.
    pub fn sentinel_with(
        sentinels: &[(String, u16)],
        service: &str,
        master: RedisConnectionInfo,
        tls: bool,
    ) -> Result<RedisClient, PoolError> {
        if sentinels.is_empty() || service.is_empty() {
            return Err(PoolError::invalid(
                "a sentinel target needs at least one sentinel and a service name",
            ));
        }
        Ok(RedisClient {
            target: Target::Sentinel(SentinelTarget {
                nodes: sentinels
                    .iter()
                    .map(|(host, port)| {
                        let scheme = if tls { "rediss" } else { "redis" };
                        format!("{scheme}://{host}:{port}/")
                    })
                    .collect(),
                service: service.to_owned(),
                master: {
                    let info =
                        SentinelNodeConnectionInfo::default().set_redis_connection_info(master);
                    if tls {
                        info.set_tls_mode(redis::TlsMode::Secure)
                    } else {
                        info
                    }
                },
            }),
        })
    }

    /// A Redis Cluster from its seed nodes (for configurations that do not use a URL).
    /// `settings` carries the credentials every node takes (its database must be 0, the
    /// only one a cluster has). With `tls` every node is reached over TLS, verified against
    /// `certificates` (the CA bundle, and a client certificate if the nodes ask for one)
    /// or, without them, the system roots.
    pub fn cluster(
        seeds: &[(String, u16)],
        settings: RedisConnectionInfo,
        tls: bool,
        certificates: Option<TlsCertificates>,
    ) -> Result<RedisClient, PoolError> {
        if seeds.is_empty() {
            return Err(PoolError::invalid(
                "a cluster target needs at least one seed node",
            ));
        }
        if settings.db() != 0 {
            return Err(PoolError::invalid("a redis cluster has only database 0"));
        }
        if certificates.is_some() && !tls {
            return Err(PoolError::invalid("cluster certificates need tls"));
        }
        let scheme = if tls { "rediss" } else { "redis" };
        Ok(RedisClient {
            target: Target::Cluster(ClusterTarget {
                seeds: seeds
                    .iter()
                    .map(|(host, port)| format!("{scheme}://{}:{port}/", bracketed(host)))
                    .collect(),
                settings,
                certificates,
            }),
        })
    }

    /// Whether the master is found through Sentinels.
    pub fn is_sentinel(&self) -> bool {
        matches!(self.target, Target::Sentinel(_))
    }

    /// Whether the target is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster(_))
    }
}

/// An IPv6 address goes into a URL in brackets.
fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

impl From<Client> for RedisClient {
    fn from(client: Client) -> Self {
        RedisClient {
            target: Target::Direct(client),
        }
    }
}

impl fmt::Debug for RedisClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Target::Direct(client) => f
                .debug_struct("RedisClient")
                .field("addr", &client.get_connection_info().addr().to_string())
                .finish(),
            Target::Sentinel(target) => f
                .debug_struct("RedisClient")
                .field("sentinels", &target.nodes)
                .field("service", &target.service)
                .finish(),
            Target::Cluster(target) => f
                .debug_struct("RedisClient")
                .field("cluster_seeds", &target.seeds)
                .field("tls_certificates", &target.certificates.is_some())
                .finish(),
        }
    }
}

fn percent_decode(raw: &str) -> Result<String, PoolError> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = raw
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| PoolError::invalid("invalid percent-encoding in sentinel url"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| PoolError::invalid("sentinel url credentials are not UTF-8"))
}

/// `[user[:password]@]host[:port][,host[:port]...]/service[/db]`
fn parse_sentinel(rest: &str) -> Result<SentinelTarget, PoolError> {
    let invalid = |why: &str| PoolError::invalid(format!("invalid sentinel url: {why}"));
    let (authority, path) = rest
        .split_once('/')
        .ok_or_else(|| invalid("no service name"))?;
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    let mut nodes = Vec::new();
    for host in hosts.split(',') {
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) if !name.ends_with(':') && !name.is_empty() => (
                name,
                port.parse::<u16>()
                    .map_err(|_| invalid("bad sentinel port"))?,
            ),
            _ => (host, SENTINEL_PORT),
        };
        if name.is_empty() {
            return Err(invalid("empty sentinel host"));
        }
        nodes.push(format!("redis://{name}:{port}/"));
    }
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    let service = segments.next().ok_or_else(|| invalid("no service name"))?;
    let mut master = RedisConnectionInfo::default();
    if let Some(db) = segments.next() {
        master = master.set_db(db.parse().map_err(|_| invalid("bad database number"))?);
    }
    if segments.next().is_some() {
        return Err(invalid("unexpected path after the database"));
    }
    if let Some(userinfo) = userinfo {
        let (user, password) = match userinfo.split_once(':') {
            Some((user, password)) => (user, Some(password)),
            None => (userinfo, None),
        };
        if !user.is_empty() {
            master = master.set_username(percent_decode(user)?);
        }
        if let Some(password) = password {
            master = master.set_password(percent_decode(password)?);
        }
    }
    Ok(SentinelTarget {
        nodes,
        service: percent_decode(service)?,
        master: SentinelNodeConnectionInfo::default().set_redis_connection_info(master),
    })
}

/// `[user[:password]@]host[:port][,host[:port]...][/]`; an IPv6 host in brackets.
fn parse_cluster(rest: &str, tls: bool) -> Result<ClusterTarget, PoolError> {
    let invalid = |why: &str| PoolError::invalid(format!("invalid cluster url: {why}"));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    // A cluster has database 0 only; anything else in the path is a mistake, not a choice.
    if !matches!(path, "" | "0") {
        return Err(invalid("a redis cluster has only database 0"));
    }
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    let mut seeds = Vec::new();
    for node in hosts.split(',') {
        let (name, port) = split_node(node).ok_or_else(|| invalid("bad seed node"))?;
        seeds.push((name.to_owned(), port.unwrap_or(CLUSTER_PORT)));
    }
    let mut settings = RedisConnectionInfo::default();
    if let Some(userinfo) = userinfo {
        let (user, password) = match userinfo.split_once(':') {
            Some((user, password)) => (user, Some(password)),
            None => (userinfo, None),
        };
        if !user.is_empty() {
            settings = settings.set_username(percent_decode(user)?);
        }
        if let Some(password) = password {
            settings = settings.set_password(percent_decode(password)?);
        }
    }
    match RedisClient::cluster(&seeds, settings, tls, None)?.target {
        Target::Cluster(target) => Ok(target),
        _ => unreachable!("RedisClient::cluster builds a cluster target"),
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; `None` when malformed.
fn split_node(node: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if let Some(rest) = node.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        match after {
            "" => (name, None),
            _ => (name, Some(after.strip_prefix(':')?)),
        }
    } else {
        match node.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (node, None),
        }
    };
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok().filter(|&p| p != 0)?),
        None => None,
    };
    (!name.is_empty()).then_some((name, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_urls_open_directly() {
        let client = RedisClient::open("redis://127.0.0.1:6379/0").unwrap();
        assert!(!client.is_sentinel());
        assert!(RedisClient::open("not a url").is_err());
    }

    #[test]
    fn sentinel_urls_list_nodes_service_and_db() {
        let client =
            RedisClient::open("redis+sentinel://:s3cr%40t@10.0.0.1,10.0.0.2:26380/mymaster/2")
                .unwrap();
        let Target::Sentinel(target) = &client.target else {
            panic!("not a sentinel target")
        };
        assert_eq!(
            target.nodes,
            vec!["redis://10.0.0.1:26379/", "redis://10.0.0.2:26380/"]
        );
        assert_eq!(target.service, "mymaster");
        let printed = format!("{client:?}");
        assert!(!printed.contains("s3cr"), "{printed}");
        assert!(RedisClient::open("redis+sentinel://10.0.0.1").is_err());
        assert!(RedisClient::open("redis+sentinel://10.0.0.1/").is_err());
        assert!(RedisClient::open("redis+sentinel://10.0.0.1:x/m").is_err());
    }

    #[test]
    fn cluster_urls_list_seeds_with_default_ports_and_no_database() {
        let client =
            RedisClient::open("redis+cluster://:s3cr%40t@10.0.0.1,10.0.0.2:7001,[::1]:7002/")
                .unwrap();
        assert!(client.is_cluster() && !client.is_sentinel());
        let Target::Cluster(target) = &client.target else {
            panic!("not a cluster target")
        };
        assert_eq!(
            target.seeds,
            vec![
                "redis://10.0.0.1:6379/",
                "redis://10.0.0.2:7001/",
                "redis://[::1]:7002/"
            ]
        );
        assert_eq!(target.settings.password(), Some("s3cr@t"));
        let printed = format!("{client:?}");
        assert!(!printed.contains("s3cr"), "{printed}");
        target.client(Duration::from_millis(500)).unwrap();

        let Target::Cluster(tls) = RedisClient::open("rediss+cluster://h1:7000")
            .unwrap()
            .target
        else {
            panic!("not a cluster target")
        };
        assert_eq!(tls.seeds, vec!["rediss://h1:7000/"]);
        assert!(RedisClient::open("redis+cluster://h1:7000/0").is_ok());
        for bad in [
            "redis+cluster://",
            "redis+cluster://h1,",
            "redis+cluster://h1:x",
            "redis+cluster://h1:0",
            "redis+cluster://h1:7000/2",
            "redis+cluster://[::1",
            "redis+cluster://[::1]7000",
        ] {
            assert!(RedisClient::open(bad).is_err(), "{bad}");
        }
        let db2 = RedisConnectionInfo::default().set_db(2);
        assert!(RedisClient::cluster(&[("h".into(), 1)], db2, false, None).is_err());
        assert!(RedisClient::cluster(&[], RedisConnectionInfo::default(), false, None).is_err());
    }
}

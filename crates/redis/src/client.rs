//! Where the pool's Redis is: one server, or the master a set of Sentinels points at.
//!
//! `RedisClient::open` takes `redis://`, `rediss://`-less plain URLs, `unix://` paths and
//! `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service[/db]` (the
//! Sentinel URL form other Redis clients use; default Sentinel port 26379; the credentials
//! are the master's). A Sentinel target is resolved to its master when the pool first
//! connects and again after an I/O or READONLY error, because a connection that Sentinel
//! moved off the master is not moved by the redis crate itself.
//!
//! `Debug` shows the kind and addresses only: a URL's password never reaches a log line.

use proxypool_core::PoolError;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Client, RedisConnectionInfo};
use std::fmt;

const SENTINEL_SCHEME: &str = "redis+sentinel://";
const SENTINEL_PORT: u16 = 26379;

/// The Redis an activity pool runs against.
#[derive(Clone)]
pub struct RedisClient {
    pub(crate) target: Target,
}

#[derive(Clone)]
pub(crate) enum Target {
    Direct(Client),
    Sentinel(SentinelTarget),
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

impl RedisClient {
    /// Parses a Redis or Sentinel URL (see the module docs). Nothing connects yet.
    pub fn open(url: &str) -> Result<RedisClient, PoolError> {
        if let Some(rest) = url.strip_prefix(SENTINEL_SCHEME) {
            return parse_sentinel(rest).map(|target| RedisClient {
                target: Target::Sentinel(target),
            });
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

    /// Whether the master is found through Sentinels.
    pub fn is_sentinel(&self) -> bool {
        matches!(self.target, Target::Sentinel(_))
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
}

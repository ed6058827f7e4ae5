//! What the Redis server keeps across a restart and under memory pressure, read at start.
//!
//! Exclusivity is state: a proxy extracted or leased is marked so in Redis. A Redis that
//! restarts without its data (no AOF) or evicts keys under `maxmemory` forgets those marks
//! and hands the same proxies out again. The controller reads the two settings that decide
//! it (on a Redis Cluster from every primary: slots move between them) and warns (or refuses to start, if so configured).

use crate::group::GroupPool;
use proxypool_core::PoolResult;
use std::collections::BTreeMap;

/// What the pool's servers keep: one entry for a single server (or Sentinel's master), one
/// per primary of a Redis Cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    pub servers: Vec<ServerDurability>,
}

/// One server's persistence and eviction settings (`None`: the server would not say, e.g.
/// `CONFIG` renamed away).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerDurability {
    /// The cluster primary's address (`host:port`); `None` for the one server.
    pub server: Option<String>,
    pub appendonly: Option<bool>,
    pub maxmemory_policy: Option<String>,
}

impl Durability {
    /// What can make the pool forget extractions or leases, one sentence each (naming the
    /// primary on a cluster: a failover makes any of them the pool's); empty when every
    /// server's settings keep them.
    pub fn risks(&self) -> Vec<String> {
        self.servers
            .iter()
            .flat_map(|server| {
                let risks = server.risks();
                let on = server.server.as_deref().map(|s| format!("primary {s}: "));
                risks
                    .into_iter()
                    .map(move |risk| format!("{}{risk}", on.as_deref().unwrap_or("")))
            })
            .collect()
    }
}

impl ServerDurability {
    fn risks(&self) -> Vec<String> {
        let mut risks = Vec::new();
        match self.appendonly {
            Some(true) => {}
            Some(false) => risks.push(
                "appendonly is off: a restarted Redis loses recent (or all) extractions and leases \
                 and hands those proxies out again"
                    .to_owned(),
            ),
            None => risks.push("could not read appendonly (CONFIG GET refused)".to_owned()),
        }
        // Every key of the pool carries a TTL, so the volatile-* policies can evict them
        // too: only noeviction keeps them.
        match self.maxmemory_policy.as_deref() {
            Some("noeviction") => {}
            Some(policy) => risks.push(format!(
                "maxmemory-policy is {policy}: under memory pressure Redis evicts the pool's \
                 keys (use noeviction)"
            )),
            None => risks.push("could not read maxmemory-policy (CONFIG GET refused)".to_owned()),
        }
        risks
    }
}

impl GroupPool {
    /// Reads the persistence and eviction settings of the server, or of every primary of
    /// a cluster. A server that refuses `CONFIG` answers `None` for both; one that cannot
    /// be reached (on a cluster: any primary) is an error.
    pub(crate) async fn durability(&self) -> PoolResult<Durability> {
        let mut servers = BTreeMap::new();
        for (server, value) in self.conn().config_get("appendonly").await? {
            settings_of(&mut servers, server).appendonly = value.map(|v| v == "yes");
        }
        // Asked separately (CONFIG GET of several names needs Redis 7): a primary that
        // answers only one of the two reads keeps `None` for the other.
        for (server, value) in self.conn().config_get("maxmemory-policy").await? {
            settings_of(&mut servers, server).maxmemory_policy = value;
        }
        Ok(Durability {
            servers: servers.into_values().collect(),
        })
    }
}

fn settings_of(
    servers: &mut BTreeMap<Option<String>, ServerDurability>,
    server: Option<String>,
) -> &mut ServerDurability {
    servers.entry(server.clone()).or_insert(ServerDurability {
        server,
        appendonly: None,
        maxmemory_policy: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(server: ServerDurability) -> Durability {
        Durability {
            servers: vec![server],
        }
    }

    #[test]
    fn only_aof_with_noeviction_is_free_of_risks() {
        let safe = ServerDurability {
            server: None,
            appendonly: Some(true),
            maxmemory_policy: Some("noeviction".into()),
        };
        assert!(one(safe.clone()).risks().is_empty());
        let volatile = ServerDurability {
            maxmemory_policy: Some("volatile-lru".into()),
            ..safe.clone()
        };
        assert_eq!(one(volatile).risks().len(), 1);
        let unknown = ServerDurability {
            server: None,
            appendonly: None,
            maxmemory_policy: None,
        };
        assert_eq!(one(unknown).risks().len(), 2);
        let no_aof = ServerDurability {
            appendonly: Some(false),
            ..safe
        };
        assert!(one(no_aof).risks()[0].starts_with("appendonly is off"));
    }

    #[test]
    fn a_cluster_names_the_primary_at_risk() {
        let primary = |server: &str, appendonly| ServerDurability {
            server: Some(server.to_owned()),
            appendonly: Some(appendonly),
            maxmemory_policy: Some("noeviction".into()),
        };
        let cluster = Durability {
            servers: vec![
                primary("10.0.0.1:6379", true),
                primary("10.0.0.2:6379", false),
            ],
        };
        let risks = cluster.risks();
        assert_eq!(risks.len(), 1, "{risks:?}");
        assert!(
            risks[0].starts_with("primary 10.0.0.2:6379: appendonly is off"),
            "{risks:?}"
        );
    }
}

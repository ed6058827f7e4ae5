//! What the Redis server keeps across a restart and under memory pressure, read at start.
//!
//! Exclusivity is state: a proxy extracted or leased is marked so in Redis. A Redis that
//! restarts without its data (no AOF) or evicts keys under `maxmemory` forgets those marks
//! and hands the same proxies out again. The controller reads the two settings that decide
//! it and warns (or refuses to start, if so configured).

use crate::pool::RedisPool;
use proxypool_core::PoolResult;

/// The server's persistence and eviction settings (`None`: the server would not say, e.g.
/// `CONFIG` renamed away).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    pub appendonly: Option<bool>,
    pub maxmemory_policy: Option<String>,
}

impl Durability {
    /// What can make the pool forget extractions or leases, one sentence each; empty when
    /// the settings keep them.
    pub fn risks(&self) -> Vec<String> {
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

impl RedisPool {
    /// Reads the server's persistence and eviction settings. A server that refuses
    /// `CONFIG` answers `None` for both; one that cannot be reached is an error.
    pub async fn durability(&self) -> PoolResult<Durability> {
        Ok(Durability {
            appendonly: self
                .conn()
                .config_get("appendonly")
                .await?
                .map(|v| v == "yes"),
            maxmemory_policy: self.conn().config_get("maxmemory-policy").await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_aof_with_noeviction_is_free_of_risks() {
        let safe = Durability {
            appendonly: Some(true),
            maxmemory_policy: Some("noeviction".into()),
        };
        assert!(safe.risks().is_empty());
        let volatile = Durability {
            maxmemory_policy: Some("volatile-lru".into()),
            ..safe.clone()
        };
        assert_eq!(volatile.risks().len(), 1);
        let unknown = Durability {
            appendonly: None,
            maxmemory_policy: None,
        };
        assert_eq!(unknown.risks().len(), 2);
        let no_aof = Durability {
            appendonly: Some(false),
            ..safe
        };
        assert!(no_aof.risks()[0].contains("appendonly is off"));
    }
}

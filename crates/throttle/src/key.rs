//! Bucket keys: which scope (policy or operation) and which client a bucket belongs to.

use crate::address::ClientAddr;
use serde::Serialize;
use std::fmt;
use std::hash::{Hash, Hasher};

/// What a bucket family is named after, as configured.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum ScopeName {
    /// The per-IP limiter for traffic that has no policy of its own.
    Global,
    /// A policy id shared by one or more operations.
    Policy(String),
    /// An operation whose policy has no id.
    Operation(String),
}

impl fmt::Display for ScopeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Global => f.write_str("global"),
            Self::Policy(id) => write!(f, "policy:{id}"),
            Self::Operation(name) => write!(f, "op:{name}"),
        }
    }
}

/// Index of a scope inside the engine that issued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ScopeId(pub(crate) u32);

impl ScopeId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

/// One bucket's identity: (scope, client address without port). 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketKey {
    /// The policy or operation.
    pub scope: ScopeId,
    /// The client (after prefix aggregation).
    pub client: ClientAddr,
}

impl Hash for BucketKey {
    // Three fixed-width writes: the engine's hasher does one multiply per word.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.client.high());
        state.write_u64(self.client.low());
        state.write_u32(self.scope.0);
    }
}

/// A key with its hash already computed, for callers that check the same key many times
/// (one per connection and operation). Checking it skips address normalization and the
/// shard choice: what remains is one lookup in one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreparedKey {
    pub(crate) key: BucketKey,
    pub(crate) hash: u64,
    /// Which engine computed `hash`: another engine's seeds would pick another shard.
    pub(crate) engine_id: u64,
}

impl PreparedKey {
    /// The key itself.
    pub fn key(&self) -> BucketKey {
        self.key
    }
}

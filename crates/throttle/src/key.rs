//! Bucket keys: which scope (policy or operation) and which client a bucket belongs to.
//! A key carries its hash, computed once when it is made, so reusing a key (a connection's
//! cached scope) costs no hashing at all.

use crate::address::ClientAddr;
use crate::hasher::hash_words;
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

/// One bucket's identity: (scope, client address without port), plus its hash. 32 bytes,
/// `Copy`: cache it per connection and check it as often as needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketKey {
    hash: u64,
    client: ClientAddr,
    scope: ScopeId,
}

impl BucketKey {
    /// The key of `client` in `scope`.
    #[inline]
    pub fn new(scope: ScopeId, client: ClientAddr) -> Self {
        Self {
            hash: hash_words(client.high(), client.low(), scope.0),
            client,
            scope,
        }
    }

    /// The scope.
    pub fn scope(&self) -> ScopeId {
        self.scope
    }

    /// The client (after prefix aggregation).
    pub fn client(&self) -> ClientAddr {
        self.client
    }

    pub(crate) fn stored_hash(&self) -> u64 {
        self.hash
    }
}

impl Hash for BucketKey {
    // The maps use `StoredHash`, which passes this value straight through.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

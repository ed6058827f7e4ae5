//! Why a pool store is not the one a role remembers (`crate::store_mark`). Its own module
//! because the port error (`crate::error`) names it and the store mark's ports return that
//! error.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a store's mark does not match what a role remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossReason {
    /// The store has no identity at all (it came back empty).
    Missing,
    /// The store carries another identity (another incarnation took its place).
    Replaced,
    /// The store's generation is below one already seen (restored from an older copy).
    RolledBack,
    /// An operator forced a recovery (`proxypool store recover`).
    Forced,
}

impl LossReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LossReason::Missing => "missing",
            LossReason::Replaced => "replaced",
            LossReason::RolledBack => "rolled_back",
            LossReason::Forced => "forced",
        }
    }

    /// The reason named by [`LossReason::as_str`].
    pub fn parse(text: &str) -> Option<LossReason> {
        [
            LossReason::Missing,
            LossReason::Replaced,
            LossReason::RolledBack,
            LossReason::Forced,
        ]
        .into_iter()
        .find(|r| r.as_str() == text)
    }
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossReason::Missing => "the store has no identity (it came back empty)",
            LossReason::Replaced => "the store carries another identity",
            LossReason::RolledBack => "the store's generation went backwards (an older copy)",
            LossReason::Forced => "an operator forced a recovery",
        })
    }
}

//! [`UnavailableReason`]: why a store gave no trustworthy answer, shared by decisions and
//! settlements.

use std::fmt;

/// Why a decision could not be made. Low-sensitivity on purpose: no database text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnavailableReason {
    /// The decision did not finish within its time bound (including a statement timeout).
    Timeout,
    /// The store could not be reached (refused, reset, pool closed).
    Connection,
    /// The store answered with an error.
    Database,
    /// The store answered with something that breaks an invariant (row count, types,
    /// count range, window bounds).
    MalformedResult,
    /// The bucket kept changing between the decision and the follow-up read.
    Contended,
    /// The memory backend tracks as many buckets as it may.
    Capacity,
}

impl fmt::Display for UnavailableReason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            UnavailableReason::Timeout => "timeout",
            UnavailableReason::Connection => "connection",
            UnavailableReason::Database => "database",
            UnavailableReason::MalformedResult => "malformed_result",
            UnavailableReason::Contended => "contended",
            UnavailableReason::Capacity => "capacity",
        })
    }
}

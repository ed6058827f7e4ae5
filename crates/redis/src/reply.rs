//! Script replies: `{status, payload...}` arrays turned into payloads or `PoolError`s.
//!
//! Scripts report expected outcomes as a status word (`not_found`, `conflict <kind>`,
//! `insufficient <matching>`, `scan_budget`, `corrupt <what>`), so no business answer
//! travels as a Redis error and every Redis error is a store failure.

use proxypool_core::{Conflict, PoolError, PoolResult, Unavailable};
use redis::Value;

/// A successful reply: its status word (`ok`, `replay`, `batch`, ...) and payload.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: String,
    pub(crate) items: Vec<Value>,
}

fn malformed(what: &str) -> PoolError {
    PoolError::corrupt(format!("unexpected script reply: {what}"))
}

pub(crate) fn items(value: Value) -> PoolResult<Vec<Value>> {
    match value {
        Value::Array(items) => Ok(items),
        _ => Err(malformed("not an array")),
    }
}

pub(crate) fn text(value: &Value) -> PoolResult<String> {
    match value {
        Value::BulkString(bytes) => {
            String::from_utf8(bytes.clone()).map_err(|_| malformed("not UTF-8"))
        }
        Value::SimpleString(text) => Ok(text.clone()),
        Value::Int(n) => Ok(n.to_string()),
        _ => Err(malformed("not a string")),
    }
}

pub(crate) fn number(value: &Value) -> PoolResult<u64> {
    match value {
        Value::Int(n) => u64::try_from(*n).map_err(|_| malformed("negative number")),
        other => text(other)?.parse().map_err(|_| malformed("not a number")),
    }
}

fn conflict(kind: &str) -> PoolResult<Conflict> {
    Ok(match kind {
        "fenced" => Conflict::Fenced,
        "digest" => Conflict::IdempotencyDigest,
        "expired" => Conflict::IdempotencyExpired,
        "ownership" => Conflict::Ownership,
        "lease_expired" => Conflict::LeaseExpired,
        "not_drained" => Conflict::NotDrained,
        "sequence" => Conflict::Sequence,
        "snapshot" => Conflict::Snapshot,
        "status" => Conflict::Status,
        _ => return Err(malformed("unknown conflict")),
    })
}

/// The first release time of a `{'recovering', first release}` reply (an extraction that
/// found too little while records are withheld), if it is one.
pub(crate) fn recovering(value: &Value) -> Option<u64> {
    let Value::Array(items) = value else {
        return None;
    };
    match (items.first(), items.get(1)) {
        (Some(Value::BulkString(word)), Some(first)) if word == b"recovering" => number(first).ok(),
        _ => None,
    }
}

/// Splits a reply into status and payload, mapping the error statuses.
/// `requested` is echoed into `InsufficientInventory`.
pub(crate) fn parse(value: Value, requested: u32) -> PoolResult<Reply> {
    let mut items = items(value)?;
    if items.is_empty() {
        return Err(malformed("empty"));
    }
    let status = text(&items.remove(0))?;
    let detail = || items.first().map(text).transpose();
    match status.as_str() {
        "not_found" => Err(PoolError::NotFound),
        "conflict" => Err(PoolError::Conflict(conflict(
            &detail()?.unwrap_or_default(),
        )?)),
        "insufficient" => Err(PoolError::InsufficientInventory {
            requested,
            matching: u32::try_from(number(items.first().ok_or_else(|| malformed("count"))?)?)
                .unwrap_or(u32::MAX),
        }),
        "scan_budget" => Err(PoolError::Unavailable(Unavailable::ScanBudget)),
        "corrupt" => Err(PoolError::corrupt(format!(
            "undecodable {} in redis",
            detail()?.unwrap_or_default()
        ))),
        _ => Ok(Reply { status, items }),
    }
}

impl Reply {
    pub(crate) fn text(&self, index: usize) -> PoolResult<String> {
        text(
            self.items
                .get(index)
                .ok_or_else(|| malformed("missing item"))?,
        )
    }

    pub(crate) fn number(&self, index: usize) -> PoolResult<u64> {
        number(
            self.items
                .get(index)
                .ok_or_else(|| malformed("missing item"))?,
        )
    }

    /// `None` for an empty payload (how a script answers that what was asked for is
    /// absent), otherwise what `decode` makes of the reply.
    pub(crate) fn optional<T>(
        &self,
        decode: impl FnOnce(&Reply) -> PoolResult<T>,
    ) -> PoolResult<Option<T>> {
        if self.items.is_empty() {
            return Ok(None);
        }
        decode(self).map(Some)
    }

    /// The payload as strings (for list replies).
    pub(crate) fn texts(&self) -> PoolResult<Vec<String>> {
        self.items.iter().map(text).collect()
    }
}

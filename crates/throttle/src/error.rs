//! Configuration errors. Every invalid setting is rejected when it is loaded, with a message
//! naming the setting and the value; nothing is silently clamped or rounded.

use std::time::Duration;

/// A limiter configuration (engine options or a policy) that cannot be used as written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// `token_scale` out of range.
    #[error("token_scale must be between 1 and {max}, got {value}")]
    TokenScale {
        /// The rejected value.
        value: u32,
        /// The largest accepted value.
        max: u32,
    },
    /// `shard_count` is not a power of two in range.
    #[error("shard_count must be a power of two between 1 and {max}, got {value}")]
    ShardCount {
        /// The rejected value.
        value: usize,
        /// The largest accepted value.
        max: usize,
    },
    /// A duration setting below one millisecond (a lockout or retry hint of 0 ms would tell
    /// clients to retry immediately, which is no limit at all).
    #[error("{setting} must be at least 1 ms, got {value:?}")]
    DurationTooShort {
        /// Which setting, e.g. `policy "op:extract" hard_lockout`.
        setting: String,
        /// The rejected value.
        value: Duration,
    },
    /// A count setting that must be at least 1 was 0.
    #[error("{setting} must be at least 1, got 0")]
    ZeroCount {
        /// Which setting.
        setting: String,
    },
    /// An address prefix longer than the address.
    #[error("{setting} must be between 0 and {max} bits, got {value}")]
    PrefixLength {
        /// Which setting.
        setting: &'static str,
        /// The rejected value.
        value: u8,
        /// The address width in bits.
        max: u8,
    },
    /// A rate or burst that is not a finite number above zero.
    #[error("{setting} must be a finite number greater than 0, got {value}")]
    NotPositive {
        /// Which setting.
        setting: String,
        /// The rejected value.
        value: f64,
    },
    /// A rate or burst that the fixed-point representation cannot hold exactly.
    #[error(
        "{setting} = {value} is not a whole multiple of 1/token_scale (1/{token_scale}); \
         pick a representable value or raise token_scale"
    )]
    NotRepresentable {
        /// Which setting.
        setting: String,
        /// The rejected value.
        value: f64,
        /// The engine's token scale.
        token_scale: u32,
    },
    /// A bucket that could never admit anything.
    #[error("{setting} must be at least 1 token, got {value}")]
    BurstBelowOneToken {
        /// Which setting.
        setting: String,
        /// The rejected value.
        value: f64,
    },
    /// A value too large for the fixed-point arithmetic at this token scale.
    #[error(
        "{setting} = {value} is larger than the supported maximum {max} at token_scale {token_scale}"
    )]
    TooLarge {
        /// Which setting.
        setting: String,
        /// The rejected value.
        value: f64,
        /// The largest accepted value.
        max: f64,
        /// The engine's token scale.
        token_scale: u32,
    },
    /// The configured initial tokens exceed a policy's burst.
    #[error("initial_tokens = {initial} exceeds the burst {burst} of policy {scope}")]
    InitialAboveBurst {
        /// The policy's scope.
        scope: String,
        /// Configured initial whole tokens.
        initial: u32,
        /// The policy's burst.
        burst: f64,
    },
    /// An empty or unprintable policy id or operation name.
    #[error("{what} must be 1 to 128 printable characters without spaces, got {value:?}")]
    InvalidName {
        /// `policy id` or `operation name`.
        what: &'static str,
        /// The rejected value.
        value: String,
    },
    /// Two operations name the same policy id with different limits.
    #[error(
        "policy id {id:?} is used by operation {first:?} and operation {second:?} with different \
         limits; operations sharing a policy id share one bucket and must agree on its limits"
    )]
    ConflictingSharedPolicy {
        /// The shared policy id.
        id: String,
        /// The operation that defined it first.
        first: String,
        /// The operation that disagrees.
        second: String,
    },
    /// The same operation configured twice.
    #[error("operation {0:?} is configured twice")]
    DuplicateOperation(String),
    /// The same scope given twice to an engine.
    #[error("scope {0} is configured twice")]
    DuplicateScope(String),
    /// The coarse clock's helper thread could not be started.
    #[error("cannot start the limiter clock thread: {0}")]
    ClockThread(String),
    /// More scopes than a key can address.
    #[error("at most {max} scopes are supported, got {value}")]
    TooManyScopes {
        /// The number requested.
        value: usize,
        /// The largest accepted number.
        max: usize,
    },
}

//! proxypool-throttle: the policy token-bucket limiter used by the gateway (per-client policy
//! limits) and by the HTTP API as its pre-authentication per-IP shield.
//!
//! # What it guarantees
//!
//! * **Exact admissions.** Tokens are fixed-point integers (`token_scale` units per token)
//!   and the refill remainder is carried between calls, so over any period a key is admitted
//!   at most `burst + rate × T` times, and exactly that many when it asks continuously. No
//!   floating point on the request path, no drift, no lost fractions.
//! * **Exact retry hints.** A soft denial's `retry_after_ms` is the smallest whole
//!   millisecond after which a token is back; a client that waits exactly that long is
//!   admitted. A lockout's hint points to the later of the lockout's end and the next token;
//!   it may be a few milliseconds long (measured from [`CoarseClock`]'s cheaper reading, or
//!   from a lock-free answer that rounded the token's time at the lockout's start), never
//!   short.
//! * **Escalation.** Denials closer together than `soft_violation_window` count up; at
//!   `max_soft_violations` the key is locked out for `hard_lockout` (never 0 ms). An
//!   admission resets the count.
//! * **Bounded memory.** At most `max_tracked` keys; a new key beyond that is denied (fail
//!   closed) while known keys keep working. [`TokenBucketEngine::sweep`] (driven by the caller
//!   or by a [`Sweeper`] thread) evicts idle keys in bounded batches, then, if still full,
//!   the least recently seen unlocked keys. Per key: one cache-line entry (24-byte bucket
//!   state, 16-byte address, 4-byte scope, 8-byte stored hash; 64 bytes aligned) plus the
//!   map's control byte.
//! * **Validated configuration.** Invalid options or policies fail at load with a
//!   [`ConfigError`] naming the setting. Nothing is clamped or rounded to tiers.
//!
//! # Using it
//!
//! ```
//! use proxypool_throttle::{EngineOptions, Policy, PolicyLimiter, Reason};
//! use std::net::IpAddr;
//!
//! let limiter = PolicyLimiter::builder(EngineOptions::default(), Policy::new(50.0, 100.0))
//!     .operation("extract", Policy::new(5.0, 10.0))
//!     .operation("search", Policy::new(0.5, 2.0).with_id("read"))
//!     .operation("list", Policy::new(0.5, 2.0).with_id("read")) // shares "search"'s buckets
//!     .build()?;
//!
//! let extract = limiter.operation("extract").expect("configured");
//! let client: IpAddr = "203.0.113.7".parse()?;
//! let decision = limiter.check(Some(extract), client);
//! assert!(decision.allowed);
//!
//! // Per connection: resolve once, then each check is one shard lookup.
//! let mut connection = limiter.connection(client);
//! assert!(connection.check(&limiter, Some(extract)).allowed);
//!
//! // The pre-auth shield: the global per-IP limiter.
//! assert_eq!(limiter.check_global(client).reason, Reason::None);
//!
//! println!("{}", limiter.report(10).to_text());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # API at a glance
//!
//! * [`PolicyLimiter::builder`]`(EngineOptions, global: Policy)` → [`PolicyLimiterBuilder`]
//!   `.operation(name, Policy)` … `.build()` / `.build_with_clock(clock)` →
//!   `Result<PolicyLimiter, ConfigError>`.
//! * [`PolicyLimiter::operation`]`(&str) -> Option<OperationHandle>` (resolve once);
//!   [`PolicyLimiter::check`]`(Option<OperationHandle>, IpAddr) -> Decision` (`None` = the
//!   global per-IP limiter); [`PolicyLimiter::check_global`]`(IpAddr)`;
//!   [`PolicyLimiter::check_operation`]`(&str, IpAddr)`.
//! * Per connection: [`PolicyLimiter::connection`]`(IpAddr) -> ConnectionScopes`, then
//!   [`ConnectionScopes::check`]`(&limiter, Option<OperationHandle>) -> Decision`; or keep a
//!   [`BucketKey`] from [`PolicyLimiter::key`] and call [`PolicyLimiter::check_key`].
//! * Upkeep and diagnostics: [`PolicyLimiter::sweep`]`(max_evictions) -> SweepOutcome`,
//!   [`Sweeper::spawn`], [`PolicyLimiter::report`]`(top_n) -> PolicyReport` with
//!   `to_text()` / `to_json()`.
//! * [`Decision`] `{ allowed, retry_after_ms, credit, reason: Reason }`, with
//!   [`Decision::retry_after_secs_ceil`] for a `Retry-After` header.
//!
//! # Module map
//!
//! | module | what it is for |
//! | --- | --- |
//! | `policy_limiter` | [`PolicyLimiter`], [`PolicyLimiterBuilder`], [`OperationHandle`], [`ConnectionScopes`]: the API other crates call |
//! | `policy` | [`Policy`]: the configured limits of an operation (serde) |
//! | `options` | [`EngineOptions`], [`InitialTokens`]: engine-wide settings and their validation |
//! | `limits` | [`BucketLimits`]: a policy as exact fixed-point integers |
//! | `engine` | [`TokenBucketEngine`]: the sharded bounded map and the check path; inside: `token_bucket_engine` (the engine and its check path), `entry`, `shard`, `lockout_board` (lock-free answers for locked keys), `striped_counter`, `sweep` (eviction, [`SweepOutcome`]), `inspect` (reports) |
//! | `bucket` | the per-key state machine (refill, admit, deny, escalate), pure and 24 bytes |
//! | `key`, `address` | [`BucketKey`] (carries its hash), [`ScopeName`], [`ScopeId`]; [`ClientAddr`] and [`AddressAggregation`] (IPv6 prefixes, no ports) |
//! | `hasher` | the keyed multiply hash stored in each key, and the pass-through hasher the maps use |
//! | `clock` | [`Clock`], [`CoarseClock`] (production default), [`MonotonicClock`], [`ManualClock`] (tests) |
//! | `decision` | [`Decision`] and [`Reason`] |
//! | `report`, `text_table` | [`EngineReport`], [`PolicyReport`], [`Counters`], … with `to_text()` and serde JSON |
//! | `sweeper` | [`Sweeper`]: optional background cleanup thread; the [`Sweep`] trait |
//! | `error` | [`ConfigError`] |
//!
//! # Threads and cost
//!
//! Everything is `Send + Sync`; share a limiter through an `Arc`. A check locks one shard
//! for a few dozen nanoseconds; a client flooding after a lockout is usually answered
//! without any lock.
//! Sweeps and reports lock one shard at a time. The default clock ([`CoarseClock`]) runs one
//! small helper thread per limiter; pass another [`Clock`] to `build_with_clock` to avoid
//! it. `docs/BENCHMARKS.md` compares the engine with the `governor` crate.

mod address;
mod bucket;
mod clock;
mod decision;
mod engine;
mod error;
mod hasher;
mod key;
mod limits;
mod options;
mod policy;
mod policy_limiter;
mod report;
mod serde_ms;
mod sweeper;
mod text_table;

pub use address::{AddressAggregation, ClientAddr};
pub use clock::{Clock, CoarseClock, ManualClock, MonotonicClock};
pub use decision::{Decision, Reason};
pub use engine::{ScopeSpec, SweepOutcome, TokenBucketEngine};
pub use error::ConfigError;
pub use key::{BucketKey, ScopeId, ScopeName};
pub use limits::BucketLimits;
pub use options::{EngineOptions, InitialTokens, MAX_SHARDS, MAX_TOKEN_SCALE};
pub use policy::Policy;
pub use policy_limiter::{ConnectionScopes, OperationHandle, PolicyLimiter, PolicyLimiterBuilder};
pub use report::{Counters, EngineReport, KeyPressure, OperationReport, PolicyReport, ScopeReport};
pub use sweeper::{Sweep, Sweeper};

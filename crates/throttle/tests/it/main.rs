//! The throttle's integration tests, one binary; `common` builds limiters on a manual
//! clock. One module per concern:
//!
//! - `capacity`: bounded memory: new keys denied at the cap, sweeps evict stale keys first.
//! - `concurrency`: threads on one key never exceed `burst + rate × T`; the cap holds.
//! - `config`: invalid configuration is rejected at load with a message naming the setting.
//! - `escalation`: soft violations escalate to a hard lockout; lockouts expire.
//! - `exactness`: admissions over long simulated periods and retry hints are exact.
//! - `reports`: text and JSON reports: counters, tracked keys, keys under most pressure.
//! - `scoping`: keys by policy id or operation and client IP (IPv6 by prefix).

mod common;

mod capacity;
mod concurrency;
mod config;
mod escalation;
mod exactness;
mod reports;
mod scoping;

//! The controller's one source of `now`: the shared [`proxypool_core::clock`], re-exported.
//!
//! Every port call takes `now` explicitly; the controller reads it from a [`Clock`] so the
//! wall clock is read in exactly one place ([`SystemClock`]) and tests can move time with
//! a [`ManualClock`] (leases, sessions and proxy lifetimes all key off it). Sleeps between
//! loop rounds still use tokio's timer: they pace the work, they do not decide anything.

pub use proxypool_core::clock::{Clock, ManualClock, SharedClock, SystemClock};

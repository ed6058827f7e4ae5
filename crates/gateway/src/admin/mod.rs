//! The admin listener: liveness, readiness, status and metrics for operators.

pub(crate) mod listener;

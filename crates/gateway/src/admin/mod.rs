//! The admin listener: liveness, readiness, status and metrics for operators (`listener`),
//! the last two optionally behind a bearer token (`token`).

pub(crate) mod listener;
pub(crate) mod token;

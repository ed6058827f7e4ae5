//! The admin listener: liveness, readiness, status and metrics for operators (`listener`),
//! the status JSON (`status`), and what a request may read with or without the optional
//! bearer token (`token`: without one, no tenant's series or detail).

pub(crate) mod listener;
pub(crate) mod status;
pub(crate) mod token;

//! The smallest request-head cap an HTTP listener can enforce.
//!
//! hyper reads a request head into a buffer of at least this size, so a cap below it could
//! not be kept. The edge's server scaffold sizes its buffer by it and the configuration
//! refuses a smaller `max_header_bytes`; it lives here because both depend on this crate
//! and neither may depend on the other.

/// hyper's smallest read buffer: the least `max_header_bytes` any listener accepts.
pub const MIN_HEADER_BYTES: usize = 8192;

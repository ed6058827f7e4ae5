//! The core crate's integration tests, one binary:
//!
//! - `snapshot_content`: a delta made from two snapshot contents turns the first into the
//!   second, checksums agree however the content is held, a delta that does not fit
//!   changes nothing.

mod snapshot_content;

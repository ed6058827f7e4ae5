//! The configuration's integration tests, one binary:
//!
//! - `load`: loading the shipped examples, unknown keys, overrides, secret references, and
//!   errors that say where (file, line, key).

mod load;

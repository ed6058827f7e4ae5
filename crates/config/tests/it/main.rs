//! The configuration's integration tests, one binary:
//!
//! - `backconnect`: backconnect templates, their transforms, and the group values they refuse;
//! - `client_tls`: a client's TLS inspection setting and the certificate names that are it;
//! - `fleet`: `[gateway.fleet]`, the example's table, advertise's default, each wrong input by key;
//! - `inspection`: `[gateway.inspection]`, what loads and each wrong input by its key;
//! - `load`: loading the shipped examples, unknown keys, overrides, secret references, and
//!   errors that say where (file, line, key).
//! - `ownership`: the share of the pool kept for extraction, by role, and its bad values.
//! - `ranges`: values out of their range, refused with the range in words.

mod backconnect;
mod client_tls;
mod fleet;
mod inspection;
mod load;
mod ownership;
mod ranges;

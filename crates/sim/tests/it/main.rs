//! The simulated vendor's integration tests, one binary, over real sockets. One module per
//! concern:
//!
//! - `bans`: the origin's bans per (exit, host) pair, changed at runtime, counted per pair.
//! - `upstream`: every kind of upstream proxy reaches the origin from its own exit;
//!   credentials are enforced; the fault knobs do what they say.
//! - `vendor`: the vendor list endpoint: formats, fault knobs and rotation.

mod bans;
mod upstream;
mod vendor;

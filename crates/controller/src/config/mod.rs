//! The controller's configuration: one TOML file plus environment overrides.
//!
//! - [`model`]: the file's shape (every table rejects unknown keys).
//! - [`load`]: read → parse → overrides → type → validate, with errors that name the file,
//!   the key path and the overriding variable.
//! - [`env`]: the environment snapshot and `PROXYPOOL__A__B=value` overrides.
//! - [`validate`]: cross-key checks and secret resolution.
//! - [`secrets`]: `*_env` / `*_file` / `*_hash` references.
//! - [`duration`]: `"30s"`-style durations.
//! - [`target`]: plain-HTTP URLs (check targets, vendor lists).
//!
//! `examples/proxypool.toml` at the repository root is the commented reference.

pub mod duration;
pub mod env;
pub mod error;
mod load;
pub mod model;
mod secrets;
pub mod target;
pub mod validate;

pub use duration::Millis;
pub use env::{ENV_PREFIX, Env};
pub use error::{ConfigError, Problem};
pub use model::*;
pub use target::TargetUrl;

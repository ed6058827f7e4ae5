//! Loading the configuration file for a serving command, with the error the binary shows
//! (file, line, key) and its exit code.

use crate::failure::Failure;
use proxypool_config::{Config, Role};
use std::path::Path;

/// Loads `path` for `role` with the process environment.
pub(crate) fn load(path: &Path, role: Role) -> Result<Config, Failure> {
    Config::load(path, role).map_err(|e| Failure::config(e.to_string()))
}

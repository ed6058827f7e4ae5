//! The resolved configuration as TOML (`proxypool check-config FILE --effective`): the file
//! with environment overrides applied and every default filled in. Secrets appear only as
//! their references (`{ env = "VAR" }`, `{ file = "PATH" }`), hashes as `<redacted>`.

use crate::model::Config;

impl Config {
    /// The effective configuration, as a TOML document.
    pub fn effective_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string_pretty(self)
    }
}

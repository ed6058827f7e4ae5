//! The configuration file as the binary reads it.
//!
//! One TOML file serves every role. The controller's sections (`[store]`, `[quota]`,
//! `[listen]`, `[[upstreams]]`, `[[clients]]`, ...) are parsed and validated by
//! `proxypool-controller`; two more tables belong to the binary because they configure
//! components the controller does not know about:
//!
//! - `[api]`: the client API's limits, extraction settings and per-IP shield;
//! - `[gateway]`: a gateway worker (see [`crate::gateway_section`]).
//!
//! The binary takes those two tables out before the controller sees the rest, so the
//! controller keeps rejecting unknown keys everywhere else. Environment overrides work for
//! both parts: `PROXYPOOL__GATEWAY__LISTENERS__HTTP=0.0.0.0:8080` goes to the binary's
//! table, every other `PROXYPOOL__*` to the controller's loader.

use crate::failure::Failure;
use crate::overrides;
use proxypool_api::{ApiLimits, ExtractionSettings, ShieldSettings};
use proxypool_controller::Config;
use proxypool_controller::config::{ENV_PREFIX, Env};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// Tables the binary owns (never handed to the controller's loader).
const CLI_SECTIONS: [&str; 2] = ["api", "gateway"];

/// A configuration file, split into the controller's part and the binary's tables.
#[derive(Debug)]
pub(crate) struct ConfigFile {
    /// How the file is named in messages.
    pub file: String,
    /// Relative paths in the file (`*_file`, `sqlite://`) are relative to this.
    pub base_dir: PathBuf,
    controller: Table,
    api: Option<Table>,
    gateway: Option<Table>,
    /// The process environment, read once.
    env: Vec<(String, String)>,
}

/// The `[api]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ApiSection {
    pub limits: ApiLimits,
    pub extraction: ExtractionSettings,
    pub shield: ShieldSettings,
}

impl ConfigFile {
    /// Reads and parses `path` with the process environment.
    pub(crate) fn read(path: &Path) -> Result<ConfigFile, Failure> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::config(format!("{file}: cannot read the file: {e}")))?;
        let base_dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        ConfigFile::parse(&text, file, base_dir, std::env::vars().collect())
    }

    /// Parses `text` (split out for tests).
    pub(crate) fn parse(
        text: &str,
        file: String,
        base_dir: PathBuf,
        env: Vec<(String, String)>,
    ) -> Result<ConfigFile, Failure> {
        let mut table: Table = text.parse().map_err(|e: toml::de::Error| {
            // Only the parser's message and position: the source line could hold a secret
            // pasted by mistake.
            let (line, column) = e
                .span()
                .map(|span| line_column(text, span.start))
                .unwrap_or((0, 0));
            Failure::config(format!(
                "{file}:{line}:{column}: TOML syntax error: {}",
                e.message()
            ))
        })?;
        let mut take = |name: &str| -> Result<Option<Table>, Failure> {
            match table.remove(name) {
                None => Ok(None),
                Some(Value::Table(t)) => Ok(Some(t)),
                Some(_) => Err(Failure::config(format!(
                    "{file}: invalid configuration:\n  - {name}: must be a table ([{name}])"
                ))),
            }
        };
        let mut api = take("api")?;
        let mut gateway = take("gateway")?;
        for (section, slot) in [("api", &mut api), ("gateway", &mut gateway)] {
            overrides::apply(section, slot, &env).map_err(|problem| {
                Failure::config(format!("{file}: invalid configuration:\n  - {problem}"))
            })?;
        }
        Ok(ConfigFile {
            file,
            base_dir,
            controller: table,
            api,
            gateway,
            env,
        })
    }

    /// Whether the file configures a controller (any controller section, or `[api]`,
    /// which only a controller serves); a gateway-only file does not.
    pub(crate) fn has_controller(&self) -> bool {
        !self.controller.is_empty() || self.api.is_some()
    }

    pub(crate) fn has_gateway(&self) -> bool {
        self.gateway.is_some()
    }

    /// The controller's configuration, loaded and validated by the controller crate.
    pub(crate) fn controller(&self) -> Result<Config, Failure> {
        let text = toml::to_string(&self.controller)
            .map_err(|e| Failure::config(format!("{}: {e}", self.file)))?;
        Config::from_toml_str(&text, &self.file, &self.base_dir, &self.controller_env())
            .map_err(|e| Failure::config(e.to_string()))
    }

    /// The `[api]` table (defaults when absent).
    pub(crate) fn api(&self) -> Result<ApiSection, Failure> {
        let Some(table) = &self.api else {
            return Ok(ApiSection::default());
        };
        let section: ApiSection = serde_path_to_error::deserialize(Value::Table(table.clone()))
            .map_err(|e| self.invalid(&format!("api.{}", e.path()), e.inner().message()))?;
        section
            .limits
            .validate()
            .and_then(|()| section.extraction.validate())
            .map_err(|e| self.invalid("api", &e.to_string()))?;
        Ok(section)
    }

    /// The raw `[gateway]` table, if any.
    pub(crate) fn gateway_table(&self) -> Option<&Table> {
        self.gateway.as_ref()
    }

    /// The value of an environment variable (for `*_env` references in the binary's tables).
    pub(crate) fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A problem at `key`, in the controller's error style (file, key, message).
    pub(crate) fn invalid(&self, key: &str, message: &str) -> Failure {
        Failure::config(format!(
            "{}: invalid configuration:\n  - {key}: {message}",
            self.file
        ))
    }

    /// The environment the controller's loader sees: everything but the overrides of the
    /// binary's own tables (which it would reject as unknown sections).
    fn controller_env(&self) -> Env {
        Env::from_pairs(
            self.env
                .iter()
                .filter(|(k, _)| !is_cli_override(k))
                .cloned(),
        )
    }
}

fn is_cli_override(var: &str) -> bool {
    let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
        return false;
    };
    let section = rest.split("__").next().unwrap_or("");
    CLI_SECTIONS.iter().any(|s| section.eq_ignore_ascii_case(s))
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |nl| before.len() - nl - 1)
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, env: &[(&str, &str)]) -> Result<ConfigFile, Failure> {
        ConfigFile::parse(
            text,
            "test.toml".into(),
            PathBuf::from("."),
            env.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn splits_the_binary_tables_from_the_controller_sections() {
        let file = parse(
            "[listen]\ncontrol = \"127.0.0.1:0\"\n[api.limits]\nmax_connections = 7\n[gateway]\nworker_id = \"gw\"\n",
            &[],
        )
        .unwrap();
        assert!(file.has_controller());
        assert!(file.has_gateway());
        assert_eq!(file.api().unwrap().limits.max_connections, 7);
        let config = file.controller().unwrap();
        assert_eq!(config.listen.control.port(), 0);
    }

    #[test]
    fn overrides_reach_both_parts_and_errors_name_the_key() {
        let file = parse(
            "[gateway]\nworker_id = \"gw\"\n",
            &[
                ("PROXYPOOL__API__LIMITS__MAX_CONNECTIONS", "9"),
                ("PROXYPOOL__LISTEN__API", "127.0.0.1:1"),
            ],
        )
        .unwrap();
        assert_eq!(file.api().unwrap().limits.max_connections, 9);
        assert_eq!(file.controller().unwrap().listen.api.port(), 1);

        let bad = parse("[api.limits]\nmax_conections = 1\n", &[]).unwrap();
        let message = bad.api().unwrap_err().message;
        assert!(message.contains("api.limits"), "{message}");
        let syntax = parse("[api\n", &[]).unwrap_err().message;
        assert!(syntax.starts_with("test.toml:1:"), "{syntax}");
    }
}

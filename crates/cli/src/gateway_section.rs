//! The `[gateway]` table: a gateway worker's settings, in the file of a split gateway or
//! beside the controller's sections in a `serve` file.
//!
//! The table is `proxypool_gateway::GatewayConfig` (durations in `_ms` fields, unknown keys
//! rejected) with one change: the worker token is never written inline but referenced,
//! as `worker_token_env` (a variable name) or `worker_token_file` (a path relative to the
//! file). Where the gateway runs decides what else it needs:
//!
//! - [`Placement::Remote`] (`proxypool gateway`): `worker_id`, `controller_url` and a
//!   token reference are required.
//! - [`Placement::InProcess`] (`serve`, `dev`): the gateway talks to this process's own
//!   controller over loopback with a token made up at start, so `controller_url` and the
//!   token reference are ignored (the same file can then also feed split gateways) and
//!   `worker_id` defaults to `local`.

use crate::config_file::ConfigFile;
use crate::failure::Failure;
use proxypool_core::{Secret, WorkerId};
use proxypool_gateway::GatewayConfig;
use toml::{Table, Value};

/// Where the gateway runs relative to its controller.
#[derive(Debug)]
pub(crate) enum Placement {
    Remote,
    InProcess {
        controller_url: String,
        token: Secret,
    },
}

/// The worker id an in-process gateway gets when the file names none.
pub(crate) const LOCAL_WORKER: &str = "local";

/// Builds and validates the gateway configuration from the file's `[gateway]` table.
pub(crate) fn gateway_config(
    file: &ConfigFile,
    placement: Placement,
) -> Result<GatewayConfig, Failure> {
    let Some(table) = file.gateway_table() else {
        return Err(file.invalid(
            "gateway",
            "missing: add a [gateway] table with at least listeners.http or listeners.socks5 \
             (see examples/gateway.toml)",
        ));
    };
    let mut table = table.clone();
    if table.contains_key("worker_token") {
        return Err(file.invalid(
            "gateway.worker_token",
            "tokens are never written in the file: use worker_token_env or worker_token_file",
        ));
    }
    let token_env = take_string(file, &mut table, "worker_token_env")?;
    let token_file = take_string(file, &mut table, "worker_token_file")?;
    match placement {
        Placement::Remote => {
            for key in ["worker_id", "controller_url"] {
                if !table.contains_key(key) {
                    return Err(file.invalid(&format!("gateway.{key}"), "is required"));
                }
            }
            let token = resolve_token(file, token_env, token_file)?;
            table.insert("worker_token".into(), Value::String(token.expose().into()));
        }
        Placement::InProcess {
            controller_url,
            token,
        } => {
            if table.contains_key("controller_url") || token_env.is_some() || token_file.is_some() {
                tracing::info!(
                    "the in-process gateway talks to this process's controller; \
                     gateway.controller_url and the worker token reference are not used"
                );
            }
            table.insert("controller_url".into(), Value::String(controller_url));
            table.insert("worker_token".into(), Value::String(token.expose().into()));
            table
                .entry("worker_id")
                .or_insert_with(|| Value::String(LOCAL_WORKER.into()));
        }
    }
    let config: GatewayConfig =
        serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
            let path = e.path().to_string();
            let key = if path == "." {
                "gateway".to_owned()
            } else {
                format!("gateway.{path}")
            };
            file.invalid(&key, e.inner().message())
        })?;
    config
        .validate()
        .map_err(|e| file.invalid("gateway", &e.0))?;
    Ok(config)
}

/// The worker id the table names, if it is a valid one (for summaries).
pub(crate) fn worker_id(table: &Table) -> Option<WorkerId> {
    table
        .get("worker_id")
        .and_then(Value::as_str)
        .and_then(|id| WorkerId::new(id).ok())
}

fn take_string(file: &ConfigFile, table: &mut Table, key: &str) -> Result<Option<String>, Failure> {
    match table.remove(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(file.invalid(&format!("gateway.{key}"), "must be a string")),
    }
}

fn resolve_token(
    file: &ConfigFile,
    env: Option<String>,
    path: Option<String>,
) -> Result<Secret, Failure> {
    let value = match (env, path) {
        (Some(var), None) => file.env_var(&var).map(str::to_owned).ok_or_else(|| {
            file.invalid(
                "gateway.worker_token_env",
                &format!("environment variable {var} is not set"),
            )
        })?,
        (None, Some(path)) => {
            let full = file.base_dir.join(&path);
            let text = std::fs::read_to_string(&full).map_err(|e| {
                file.invalid(
                    "gateway.worker_token_file",
                    &format!("cannot read {}: {e}", full.display()),
                )
            })?;
            // Files usually end with a newline that is not part of the token.
            text.trim_end_matches(['\r', '\n']).to_owned()
        }
        (Some(_), Some(_)) => {
            return Err(file.invalid(
                "gateway.worker_token_env",
                "set only one of worker_token_env and worker_token_file",
            ));
        }
        (None, None) => {
            return Err(file.invalid(
                "gateway.worker_token_env",
                "is required (or worker_token_file)",
            ));
        }
    };
    if value.is_empty() {
        return Err(file.invalid("gateway.worker_token_env", "the token is empty"));
    }
    Ok(Secret::new(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file(text: &str, env: &[(&str, &str)]) -> ConfigFile {
        ConfigFile::parse(
            text,
            "gw.toml".into(),
            PathBuf::from("."),
            env.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
        .unwrap()
    }

    const REMOTE: &str = r#"
[gateway]
worker_id = "gw-1"
controller_url = "http://127.0.0.1:7070"
worker_token_env = "WT"
[gateway.listeners]
http = "127.0.0.1:0"
"#;

    #[test]
    fn a_remote_gateway_resolves_its_token_reference() {
        let config = gateway_config(&file(REMOTE, &[("WT", "s3cret")]), Placement::Remote).unwrap();
        assert_eq!(config.worker_token.expose(), "s3cret");
        assert_eq!(config.worker_id.as_str(), "gw-1");

        let missing = gateway_config(&file(REMOTE, &[]), Placement::Remote).unwrap_err();
        assert!(
            missing.message.contains("gateway.worker_token_env"),
            "{missing}"
        );
        assert!(!missing.message.contains("s3cret"));
    }

    #[test]
    fn in_process_fills_the_controller_and_defaults_the_worker() {
        let text = "[gateway.listeners]\nsocks5 = \"127.0.0.1:0\"\n";
        let config = gateway_config(
            &file(text, &[]),
            Placement::InProcess {
                controller_url: "http://127.0.0.1:1".into(),
                token: Secret::new("t"),
            },
        )
        .unwrap();
        assert_eq!(config.worker_id.as_str(), LOCAL_WORKER);
        assert_eq!(config.controller_url, "http://127.0.0.1:1");
    }

    #[test]
    fn errors_name_the_key() {
        let typo = REMOTE.replace("[gateway.listeners]", "[gateway.listners]");
        let error = gateway_config(&file(&typo, &[("WT", "x")]), Placement::Remote).unwrap_err();
        assert!(error.message.contains("listners"), "{error}");
        let inline =
            format!("{REMOTE}\n").replace("worker_token_env = \"WT\"", "worker_token = \"x\"");
        let error = gateway_config(&file(&inline, &[]), Placement::Remote).unwrap_err();
        assert!(error.message.contains("gateway.worker_token"), "{error}");
    }
}

//! Opening the durable quota named by `[quota] url`, and each client's limits.
//!
//! One backend instance (memory, one SQLite file, or one PostgreSQL pool) serves every
//! client: limits travel with each call, so the file's per-client limits
//! (`[clients.quota.<operation>]`) become a table of [`QuotaConfig`] by (project, client)
//! that the API clients carry and pass on every charge.

use crate::failure::Failure;
use proxypool_config::{ClientConfig, Config, QuotaKind};
use proxypool_core::StoreLedger;
use proxypool_quota::{
    MemoryQuota, Operation, OperationLimits, PostgresQuota, PostgresSettings, QuotaConfig,
    QuotaPort, SqliteQuota, SqliteSettings,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The opened quota, every client's limits, and what closing the store takes.
#[derive(Debug)]
pub(crate) struct OpenedQuota {
    pub port: Arc<dyn QuotaPort>,
    /// The same database as the pool store's durable ledger (the store guard's memory of
    /// the store's identity, `proxypool_core::store_mark`).
    pub ledger: Arc<dyn StoreLedger>,
    /// (project, client id) -> that client's limits; clients not listed get the defaults.
    limits: HashMap<(String, String), QuotaConfig>,
    sqlite: Option<SqliteQuota>,
    postgres: Option<PostgresQuota>,
}

impl OpenedQuota {
    /// The limits of `client` in `project`, as configured (the defaults when not listed).
    /// Replaces the per-client limits (a configuration reload).
    pub(crate) fn replace_limits(&mut self, limits: HashMap<(String, String), QuotaConfig>) {
        self.limits = limits;
    }

    pub(crate) fn limits_for(&self, project: &str, client: &str) -> QuotaConfig {
        self.limits
            .get(&(project.to_owned(), client.to_owned()))
            .copied()
            .unwrap_or_default()
    }

    /// Closes the store connections (the SQLite file is checkpointed and closed cleanly).
    pub(crate) async fn close(self) {
        if let Some(quota) = &self.sqlite {
            quota.close().await;
        }
        if let Some(quota) = &self.postgres {
            quota.pool().close().await;
        }
    }
}

/// Opens the configured backend (applying SQLite's migrations; PostgreSQL's are applied by
/// `proxypool migrate`, because the serving role may not create tables) and builds the
/// clients' limits, rejecting a limit outside the quota's caps.
/// Every configured client's limits by (project, client id).
pub(crate) fn limits_table(
    config: &Config,
) -> Result<HashMap<(String, String), QuotaConfig>, Failure> {
    let default = QuotaConfig::default();
    config
        .clients
        .iter()
        .map(|client| {
            Ok((
                (client.project.clone(), client.id.to_string()),
                client_limits(client, default)?,
            ))
        })
        .collect()
}

pub(crate) async fn open(config: &Config) -> Result<OpenedQuota, Failure> {
    let memory = Arc::new(MemoryQuota::new());
    let mut opened = OpenedQuota {
        port: memory.clone(),
        ledger: memory,
        limits: limits_table(config)?,
        sqlite: None,
        postgres: None,
    };
    match &config.quota.kind {
        QuotaKind::Memory => {}
        QuotaKind::Sqlite { path } => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| {
                    Failure::runtime(format!("quota: cannot create {}: {e}", dir.display()))
                })?;
            }
            let mut settings = SqliteSettings::new(path);
            let store = &config.quota;
            settings.max_connections = store.max_connections.unwrap_or(settings.max_connections);
            settings.acquire_timeout = store.acquire_timeout.as_duration();
            settings.busy_timeout = store.statement_timeout.as_duration();
            settings.decision_timeout = store.decision_timeout.as_duration();
            let quota = SqliteQuota::open(&settings).await.map_err(|e| {
                Failure::runtime(format!("quota: cannot open {}: {e}", path.display()))
            })?;
            opened.port = Arc::new(quota.clone());
            opened.ledger = Arc::new(quota.clone());
            opened.sqlite = Some(quota);
        }
        QuotaKind::Postgres { url } => {
            let password = config
                .quota
                .password
                .as_ref()
                .and_then(|p| p.plain())
                .map(|p| p.expose().to_owned());
            let mut settings = PostgresSettings::new(url.clone());
            settings.password = password;
            let store = &config.quota;
            settings.max_connections = store.max_connections.unwrap_or(settings.max_connections);
            settings.acquire_timeout = store.acquire_timeout.as_duration();
            settings.statement_timeout = store.statement_timeout.as_duration();
            settings.decision_timeout = store.decision_timeout.as_duration();
            let quota = PostgresQuota::connect_lazy(&settings)
                .map_err(|e| Failure::config(format!("quota.url: {e}")))?;
            opened.port = Arc::new(quota.clone());
            opened.ledger = Arc::new(quota.clone());
            opened.postgres = Some(quota);
        }
    }
    Ok(opened)
}

/// The limits of one client: the defaults with its `[clients.quota.<operation>]` applied.
fn client_limits(client: &ClientConfig, default: QuotaConfig) -> Result<QuotaConfig, Failure> {
    let mut limits = default;
    for (name, limit) in &client.quota {
        let operation: Operation = name.parse().map_err(|_| {
            Failure::config(format!(
                "clients[{}].quota.{name}: unknown operation",
                client.id
            ))
        })?;
        // Durations are whole seconds in the quota's windows; the controller's validation
        // already bounded them to 1 s..=5 min.
        let window = Duration::from_secs(limit.window.as_ms().div_ceil(1000));
        let value = OperationLimits::new(window, limit.limit)
            .map_err(|e| Failure::config(format!("clients[{}].quota.{name}: {e}", client.id)))?;
        limits = limits.with(operation, value);
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_quota::{QuotaCommand, QuotaDecision};

    #[tokio::test]
    async fn each_client_is_charged_under_its_own_limits() {
        let text = r#"
[[clients]]
id = "small"
project = "p"
api_token = { hash = "sha256:salt:0000000000000000000000000000000000000000000000000000000000000000" }
[clients.quota.extract]
limit = 1
window = "60s"

[[clients]]
id = "big"
project = "p"
api_token = { hash = "sha256:salt:0000000000000000000000000000000000000000000000000000000000000000" }
"#;
        let config = Config::from_toml_str(
            text,
            "t.toml",
            std::path::Path::new("."),
            proxypool_config::Role::Controller,
            &proxypool_config::Env::default(),
        )
        .unwrap();
        let quota = open(&config).await.unwrap();
        // What the API does per request: the client's limits go with the command.
        let charge = async |client: &str, receipt: &str| {
            let command = QuotaCommand::new("p", client, Operation::Extract, receipt);
            let limits = quota.limits_for("p", client).limits(Operation::Extract);
            quota.port.consume(&command, limits).await.unwrap()
        };
        let admitted = |d: QuotaDecision| matches!(d, QuotaDecision::Admitted { .. });
        assert!(admitted(charge("small", "r1").await));
        assert!(!admitted(charge("small", "r2").await));
        assert!(admitted(charge("big", "r1").await));
        assert!(admitted(charge("big", "r2").await));
        assert_eq!(
            quota.limits_for("p", "small").limits(Operation::Extract),
            OperationLimits::new(Duration::from_secs(60), 1).unwrap()
        );
        assert_eq!(quota.limits_for("p", "big"), QuotaConfig::default());
        quota.close().await;
    }
}

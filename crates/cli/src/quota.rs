//! Opening the durable quota named by `[quota] url`, with each client's limits.
//!
//! A quota backend decides with one set of per-operation limits ([`QuotaConfig`]), while
//! the file gives limits per client (`[clients.quota.extract]`). [`ClientQuotas`] bridges
//! the two: one backend instance per distinct set of limits, over the same store (the
//! same file, the same PostgreSQL pool), and each command routed by its (project, client).
//! Buckets are keyed by (project, client, operation) in every backend, so instances that
//! share a store never share a bucket.

use crate::failure::Failure;
use async_trait::async_trait;
use proxypool_config::{ClientConfig, Config, QuotaKind};
use proxypool_quota::{
    InvalidCommand, MemoryQuota, Operation, OperationLimits, PostgresQuota, PostgresSettings,
    QuotaCommand, QuotaConfig, QuotaDecision, QuotaPort, SqliteQuota, SqliteSettings,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The opened quota and what closing it takes.
#[derive(Debug)]
pub(crate) struct OpenedQuota {
    pub port: Arc<dyn QuotaPort>,
    sqlite: Vec<SqliteQuota>,
    postgres: Option<PostgresQuota>,
}

impl OpenedQuota {
    /// Closes the store connections (the SQLite file is checkpointed and closed cleanly).
    pub(crate) async fn close(self) {
        for quota in &self.sqlite {
            quota.close().await;
        }
        if let Some(quota) = &self.postgres {
            quota.pool().close().await;
        }
    }
}

/// Opens the configured backend (applying SQLite's migrations; PostgreSQL's are applied by
/// `proxypool migrate`, because the serving role may not create tables).
pub(crate) async fn open(config: &Config) -> Result<OpenedQuota, Failure> {
    let default = QuotaConfig::default();
    let mut configs = vec![default];
    let mut routes = HashMap::new();
    for client in &config.clients {
        let limits = client_limits(client, default)?;
        let index = configs
            .iter()
            .position(|c| *c == limits)
            .unwrap_or_else(|| {
                configs.push(limits);
                configs.len() - 1
            });
        routes.insert((client.project.clone(), client.id.to_string()), index);
    }
    let mut opened = OpenedQuota {
        port: Arc::new(MemoryQuota::new(default)),
        sqlite: Vec::new(),
        postgres: None,
    };
    let instances: Vec<Arc<dyn QuotaPort>> = match &config.quota.kind {
        QuotaKind::Memory => configs
            .iter()
            .map(|c| Arc::new(MemoryQuota::new(*c)) as Arc<dyn QuotaPort>)
            .collect(),
        QuotaKind::Sqlite { path } => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| {
                    Failure::runtime(format!("quota: cannot create {}: {e}", dir.display()))
                })?;
            }
            let settings = SqliteSettings::new(path);
            let mut instances: Vec<Arc<dyn QuotaPort>> = Vec::new();
            for c in &configs {
                let quota = SqliteQuota::open(&settings, *c).await.map_err(|e| {
                    Failure::runtime(format!("quota: cannot open {}: {e}", path.display()))
                })?;
                opened.sqlite.push(quota.clone());
                instances.push(Arc::new(quota));
            }
            instances
        }
        QuotaKind::Postgres { url } => {
            let password = config
                .quota
                .password
                .as_ref()
                .and_then(|p| p.plain())
                .map(|p| p.expose().to_owned());
            let settings = PostgresSettings::new(with_password(url, password.as_deref()));
            let first = PostgresQuota::connect_lazy(&settings, configs[0])
                .map_err(|e| Failure::config(format!("quota.url: {e}")))?;
            let instances = configs
                .iter()
                .map(|c| {
                    Arc::new(PostgresQuota::from_pool(
                        first.pool().clone(),
                        *c,
                        settings.decision_timeout,
                    )) as Arc<dyn QuotaPort>
                })
                .collect();
            opened.postgres = Some(first);
            instances
        }
    };
    let by_client = routes
        .into_iter()
        .map(|(key, index)| (key, instances[index].clone()))
        .collect();
    opened.port = Arc::new(ClientQuotas {
        default: instances[0].clone(),
        by_client,
    });
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

/// `postgres://user@host/db` with the password put in as userinfo (percent-encoded).
pub(crate) fn with_password(url: &str, password: Option<&str>) -> String {
    let Some(password) = password else {
        return url.to_owned();
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let encoded = percent_encode(password);
    match rest.split_once('@') {
        Some((user, host)) => format!("{scheme}://{user}:{encoded}@{host}"),
        // No user in the URL: the driver's default user, with this password.
        None => format!("{scheme}://:{encoded}@{rest}"),
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Routes each command to the backend instance with its client's limits.
#[derive(Debug)]
struct ClientQuotas {
    default: Arc<dyn QuotaPort>,
    by_client: HashMap<(String, String), Arc<dyn QuotaPort>>,
}

#[async_trait]
impl QuotaPort for ClientQuotas {
    async fn consume(&self, command: &QuotaCommand) -> Result<QuotaDecision, InvalidCommand> {
        // The lookup allocates a key; a few bytes per extraction, next to a store round trip.
        let key = (command.project.clone(), command.subject.clone());
        let port = self.by_client.get(&key).unwrap_or(&self.default);
        port.consume(command).await
    }

    fn config(&self) -> &QuotaConfig {
        self.default.config()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_go_into_the_userinfo_encoded() {
        assert_eq!(
            with_password("postgres://app@db:5432/pp", Some("p@ss:w/rd")),
            "postgres://app:p%40ss%3Aw%2Frd@db:5432/pp"
        );
        assert_eq!(with_password("postgres://db/pp", None), "postgres://db/pp");
    }

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
        let charge = |client: &str, receipt: &str| {
            QuotaCommand::new("p", client, Operation::Extract, receipt)
        };
        let admitted = |d: QuotaDecision| matches!(d, QuotaDecision::Admitted { .. });
        assert!(admitted(
            quota.port.consume(&charge("small", "r1")).await.unwrap()
        ));
        assert!(!admitted(
            quota.port.consume(&charge("small", "r2")).await.unwrap()
        ));
        assert!(admitted(
            quota.port.consume(&charge("big", "r1")).await.unwrap()
        ));
        assert!(admitted(
            quota.port.consume(&charge("big", "r2")).await.unwrap()
        ));
        quota.close().await;
    }
}

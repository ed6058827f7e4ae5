//! `proxypool migrate --config FILE`: applies the quota store's migrations.
//!
//! SQLite: creates the file and its table (serving commands do this too, so this is for
//! preparing a host ahead of time). PostgreSQL: the serving role should not be able to
//! create tables, so migrations run here, as the configured role or as an owner given by
//! `--admin-url-env`; `--create-role NAME` then creates (or re-asserts) the
//! least-privilege login role the quota runs as (SELECT/INSERT/UPDATE on its tables: the
//! quota's and the pool store's ledger).

use crate::args::MigrateArgs;
use crate::failure::Failure;
use crate::settings;
use proxypool_config::{Env, QuotaKind, Role};
use proxypool_quota::{SqliteQuota, SqliteSettings};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::time::Duration;

pub(crate) async fn run(args: MigrateArgs) -> Result<(), Failure> {
    let config = settings::load(&args.config, Role::Controller)?;
    let postgres_only = args.admin_url_env.is_some() || args.create_role.is_some();
    match &config.quota.kind {
        QuotaKind::Memory => {
            if postgres_only {
                return Err(Failure::config(
                    "--admin-url-env and --create-role apply to a PostgreSQL quota only",
                ));
            }
            println!("quota is in memory: nothing to migrate");
        }
        QuotaKind::Sqlite { path } => {
            if postgres_only {
                return Err(Failure::config(
                    "--admin-url-env and --create-role apply to a PostgreSQL quota only",
                ));
            }
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| {
                    Failure::runtime(format!("cannot create {}: {e}", dir.display()))
                })?;
            }
            // Opening applies the migrations.
            let quota = SqliteQuota::open(&SqliteSettings::new(path))
                .await
                .map_err(|e| Failure::runtime(format!("{}: {e}", path.display())))?;
            quota.close().await;
            println!("SQLite quota migrated: {}", path.display());
        }
        QuotaKind::Postgres { url } => {
            // An admin URL from the environment carries its own credentials; the
            // configured URL gets the configured password beside it, never inside it.
            let (admin_url, admin_password) = match &args.admin_url_env {
                Some(var) => (
                    Env::from_process()
                        .get(var)
                        .map(str::to_owned)
                        .ok_or_else(|| {
                            Failure::config(format!("--admin-url-env: {var} is not set"))
                        })?,
                    None,
                ),
                None => (
                    url.clone(),
                    config
                        .quota
                        .password
                        .as_ref()
                        .and_then(|p| p.plain())
                        .map(|p| p.expose().to_owned()),
                ),
            };
            proxypool_quota::postgres::migrate_url(&admin_url, admin_password.as_deref())
                .await
                .map_err(|e| Failure::runtime(format!("PostgreSQL quota migrations: {e}")))?;
            println!("PostgreSQL quota migrated: {url}");
            if let Some(role) = &args.create_role {
                let password = match &args.role_password_env {
                    Some(var) => Some(Env::from_process().get(var).map(str::to_owned).ok_or_else(
                        || Failure::config(format!("--role-password-env: {var} is not set")),
                    )?),
                    None => None,
                };
                let options: PgConnectOptions = admin_url
                    .parse()
                    .map_err(|e| Failure::config(format!("PostgreSQL URL: {e}")))?;
                let options = match &admin_password {
                    Some(password) => options.password(password),
                    None => options,
                };
                let admin = PgPoolOptions::new()
                    .max_connections(1)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_with(options)
                    .await
                    .map_err(|e| Failure::runtime(format!("PostgreSQL: {e}")))?;
                let created =
                    proxypool_quota::postgres::create_quota_role(&admin, role, password.as_deref())
                        .await;
                admin.close().await;
                created.map_err(|e| Failure::runtime(format!("role {role}: {e}")))?;
                println!("role {role}: LOGIN, SELECT/INSERT/UPDATE on the quota table only");
            }
        }
    }
    Ok(())
}

//! `proxypool init [DIR] (--single | --split)`: a starter configuration with freshly
//! generated secrets, and the commands to run next.
//!
//! - `--single`: `proxypool.toml` for one `proxypool serve` (memory store, SQLite quota).
//! - `--split`: `proxypool.toml` for `proxypool controller` (Redis store, PostgreSQL quota)
//!   and `gateway.toml` for `proxypool gateway`.
//!
//! The secrets (the client's API token and gateway password; in the split shape the
//! gateway's worker token and the PostgreSQL role's password) come from the operating
//! system's random source and go into `secrets/`, mode 0600; the configuration holds the
//! hashes of those the service verifies and the paths of those it sends. Existing files
//! are never replaced without `--force`, and what is written is checked as `check-config`
//! checks it before it is put in place (`files`).
//!
//! The upstream is the vendor list `--vendor-url` names (https://), a `proxypool sim` on
//! this machine (`--vendor-url` with `--sim-origin`: plain http and loopback proxies
//! allowed, the checks and the gateway aimed at its origin), or, without `--vendor-url`, a
//! commented placeholder: the file checks out but serves nothing until it is filled in,
//! and `init` says so.
//!
//! - `vendor`: where the proxies come from, from the flags.
//! - `render`: the files' text.
//! - `files`: writing them all or nothing.

mod files;
mod render;
mod vendor;

use crate::args::InitArgs;
use crate::failure::Failure;
use crate::shell;
use files::Planned;
use proxypool_config::{Config, Env, Role};
use render::Secrets;
use std::fmt::Write as _;
use std::path::Path;
use vendor::Vendor;

pub(crate) fn run(args: InitArgs) -> Result<(), Failure> {
    let vendor = vendor::from_args(&args)?;
    let dir = args.dir.as_path();
    files::check_dir(dir)?;
    let secrets = Secrets::generate();
    let planned = plan(args.split, &secrets, &vendor)?;
    let existing = files::existing(dir, &planned)?;
    if !existing.is_empty() && !args.force {
        let names: Vec<String> = existing.iter().map(|p| p.display().to_string()).collect();
        return Err(Failure::config(format!(
            "already there: {}; nothing was written. Use --force to replace them (the secrets \
             are then made anew, so whoever uses the old ones must be given the new)",
            names.join(", ")
        )));
    }
    let created = files::create_dir(dir)?;
    let written = stage_check_install(dir, &planned);
    if written.is_err() && created {
        let _ = std::fs::remove_dir(dir);
    }
    written?;
    print!("{}", report(dir, args.split, &vendor, &planned));
    Ok(())
}

/// Writes the files to a staging directory, loads the configurations from there, then
/// puts every file in place.
fn stage_check_install(dir: &Path, planned: &[Planned]) -> Result<(), Failure> {
    let staging = files::stage(dir, planned)?;
    for file in planned.iter().filter(|f| f.relative.ends_with(".toml")) {
        let path = staging.path.join(file.relative);
        let name = path.display().to_string();
        let checked = Config::load_with_env(&path, Role::Check, &Env::default())
            .map_err(|e| Failure::config(e.to_string()))
            .and_then(|config| super::check_config::summary(&config, &name));
        if let Err(mut failure) = checked {
            // Name the file as it would have been called, not its staging copy.
            failure.message = failure
                .message
                .replace(&name, &dir.join(file.relative).display().to_string());
            failure.message.push_str("\nnothing was written");
            return Err(failure);
        }
    }
    files::install(dir, &staging, planned)
}

/// The files of a shape, configurations first.
fn plan(split: bool, secrets: &Secrets, vendor: &Vendor) -> Result<Vec<Planned>, Failure> {
    let secret = |relative, value: &str| Planned {
        relative,
        text: render::secret_file(value),
    };
    let mut planned = if split {
        vec![
            Planned {
                relative: "proxypool.toml",
                text: render::controller(secrets, vendor)?,
            },
            Planned {
                relative: "gateway.toml",
                text: render::gateway(vendor),
            },
        ]
    } else {
        vec![Planned {
            relative: "proxypool.toml",
            text: render::single(secrets, vendor)?,
        }]
    };
    planned.push(secret(render::API_TOKEN_FILE, &secrets.api_token));
    planned.push(secret(
        render::GATEWAY_PASSWORD_FILE,
        &secrets.gateway_password,
    ));
    if split {
        planned.push(secret(render::WORKER_TOKEN_FILE, &secrets.worker_token));
        planned.push(secret(
            render::POSTGRES_PASSWORD_FILE,
            &secrets.postgres_password,
        ));
    }
    Ok(planned)
}

/// What was written and the commands to run next, ready to paste from the directory
/// `init` ran in.
fn report(dir: &Path, split: bool, vendor: &Vendor, planned: &[Planned]) -> String {
    let path = |relative: &str| shell::word(&dir.join(relative).display().to_string());
    let exe = shell::this_binary();
    let mut out = String::new();
    let shape = if split {
        "a controller and a gateway (Redis store, PostgreSQL quota)"
    } else {
        "one `proxypool serve` (memory store, SQLite quota)"
    };
    let _ = writeln!(
        out,
        "Wrote a configuration for {shape} in {}:\n",
        dir.display()
    );
    let width = planned
        .iter()
        .map(|file| dir.join(file.relative).display().to_string().len())
        .max()
        .unwrap_or(0);
    for file in planned {
        let what = match file.relative {
            "proxypool.toml" if split => "the controller's file",
            "proxypool.toml" => "the configuration",
            "gateway.toml" => "the gateway's file",
            render::API_TOKEN_FILE => "the client's API token",
            render::GATEWAY_PASSWORD_FILE => "the client's gateway password",
            render::WORKER_TOKEN_FILE => "the gateway's worker token",
            _ => "the PostgreSQL role's password",
        };
        let _ = writeln!(
            out,
            "  {:<width$}  {what} (mode 0600)",
            dir.join(file.relative).display()
        );
    }
    out.push('\n');
    if matches!(vendor, Vendor::Placeholder) {
        let _ = writeln!(
            out,
            "No vendor yet: the upstream in {} is a commented placeholder. Fill in your\n\
             vendor's list URL (docs/vendors.md) before serving, or run init again with\n\
             --vendor-url URL --force.\n",
            dir.join("proxypool.toml").display()
        );
    }
    let config = path("proxypool.toml");
    let _ = writeln!(out, "Next:\n");
    if split {
        let gateway = path("gateway.toml");
        let password = path(render::POSTGRES_PASSWORD_FILE);
        let (role, host, db) = (
            render::POSTGRES_ROLE,
            render::POSTGRES_HOST,
            render::POSTGRES_DB,
        );
        let _ = writeln!(
            out,
            "  {exe} check-config {config} && {exe} check-config {gateway}\n  \
             PROXYPOOL_PG_ADMIN=postgres://postgres@{host}/{db} PROXYPOOL_PG_PASSWORD=\"$(cat {password})\" {exe} migrate --config {config} --admin-url-env PROXYPOOL_PG_ADMIN --create-role {role} --role-password-env PROXYPOOL_PG_PASSWORD\n  \
             {exe} controller --config {config}\n  \
             {exe} gateway --config {gateway}\n\n\
             Redis is expected at {redis} and PostgreSQL's database {db} at {host} (edit\n\
             [store] and [quota] otherwise; migrate needs the database and an owner's URL).\n",
            redis = render::REDIS_URL,
        );
    } else {
        let _ = writeln!(
            out,
            "  {exe} check-config {config}\n  {exe} serve --config {config}\n"
        );
    }
    let target = match vendor {
        Vendor::Sim { origin, .. } => format!("http://{origin}/"),
        _ => "https://example.com/".to_owned(),
    };
    let _ = writeln!(
        out,
        "Then, through the gateway and the client API:\n\n  \
         curl -x \"http://{client}:$(cat {password})@{http}\" {target}\n  \
         PROXYPOOL_TOKEN=\"$(cat {token})\" {exe} extract --api http://{api} --count 1",
        client = render::CLIENT,
        password = path(render::GATEWAY_PASSWORD_FILE),
        token = path(render::API_TOKEN_FILE),
        http = render::HTTP,
        api = render::API,
    );
    out
}

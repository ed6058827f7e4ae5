//! `proxypool`: the one binary of the proxy pool platform.
//!
//! Subcommands (see `proxypool --help`): `dev` (everything on loopback with a simulated
//! vendor), `init` (a starter configuration with generated secrets), `serve` (controller +
//! client API + gateway in one process), `controller` and `gateway` (split deployment on
//! Redis + PostgreSQL), `extract` (an API client), `check-config`, `migrate`, `store` (the
//! pool store's record in the quota's database), `sim` (the simulated vendor on its own),
//! `hash-secret` and `probe` (a health check for images without an HTTP client).
//!
//! Module map:
//! - `args`: the command line (clap derive).
//! - `commands`: one module per subcommand.
//! - `stack`: controller + client API (+ gateway) in one process, and their shutdown order.
//! - `reload`: SIGHUP and `POST /v1/admin/reload`: re-read the file, apply what may change live.
//! - `settings`: loading the file (the `proxypool-config` crate owns it) for a command.
//! - `gateway_section`: the `[gateway]` table as a split or in-process gateway's settings.
//! - `quota`: opening the quota store with per-client limits.
//! - `adapters`: the client API's view of the controller (upstream status, cordons).
//! - `http_client`: the one-request HTTP client of `extract`.
//! - `signal`: SIGINT/SIGTERM handling.
//! - `shell`: command lines printed for pasting (`dev`'s banner, `init`'s next steps).
//! - `logging`, `random`, `failure`: logs to stderr, generated secrets, exit codes.

mod adapters;
mod args;
mod commands;
mod failure;
mod gateway_section;
mod http_client;
mod logging;
mod quota;
mod random;
mod reload;
mod settings;
mod shell;
mod signal;
mod stack;

use args::{Cli, Command};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `dev` keeps the terminal for its banner: only warnings unless asked for more.
    let default_filter = match cli.command {
        Command::Dev(_) | Command::Sim(_) => "warn",
        Command::Extract(_) | Command::CheckConfig(_) | Command::Migrate(_) => "warn",
        Command::Store(_) => "warn",
        Command::HashSecret | Command::Probe(_) | Command::Init(_) | Command::Ca(_) => "warn",
        _ => "info",
    };
    // The file's `[log] format`, read before the first line is logged.
    let config_file = match &cli.command {
        Command::Serve(args) | Command::Controller(args) | Command::Gateway(args) => {
            Some(args.config.as_path())
        }
        Command::Migrate(args) => Some(args.config.as_path()),
        Command::Store(args) => args.config.as_deref(),
        _ => None,
    };
    let format = config_file
        .and_then(|file| {
            proxypool_config::peek_log_format(file, &proxypool_config::Env::from_process())
        })
        .unwrap_or_default();
    logging::init(default_filter, format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(failure::code::RUNTIME);
        }
    };
    let outcome = runtime.block_on(async move {
        match cli.command {
            Command::Dev(args) => commands::dev::run(args).await,
            Command::Init(args) => commands::init::run(args),
            Command::Serve(args) => commands::serve::run(args).await,
            Command::Controller(args) => commands::controller::run(args).await,
            Command::Gateway(args) => commands::gateway::run(args).await,
            Command::Extract(args) => commands::extract::run(args).await,
            Command::CheckConfig(args) => commands::check_config::run(args).await,
            Command::Migrate(args) => commands::migrate::run(args).await,
            Command::Store(args) => commands::store::run(args).await,
            Command::Sim(args) => commands::sim::run(args).await,
            Command::HashSecret => commands::hash_secret::run(),
            Command::Ca(args) => commands::ca::run(args),
            Command::Probe(args) => commands::probe::run(args).await,
        }
    });
    // Tasks still running (idle keep-alive connections, the signal watcher) are dropped
    // here; the components already finished their graceful shutdown.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::from(failure.code)
        }
    }
}

//! Assembling and running a controller: the API the CLI calls.
//!
//! ```no_run
//! # async fn demo() -> Result<(), proxypool_controller::ControllerError> {
//! use proxypool_controller::config::Role;
//! use proxypool_controller::{Config, Controller};
//! let config = Config::load("proxypool.toml", Role::Controller)?;
//! let running = Controller::from_config(config).await?.start().await?;
//! println!("control API on {}", running.control_addr());
//! // ... on SIGTERM:
//! running.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! `Controller` holds the shared parts (store, clock, leadership, status board, snapshot
//! publisher), so an embedding process (`proxypool serve`/`dev`) can hand the same store
//! to a client API, or mount the control router on its own listener.
//!
//! Module map: `assembly` ([`Controller`]: the shared parts and what is built from them),
//! `loops` (the leader-only loops of one configuration, stopped and restarted on reload),
//! `running` ([`Controller::start`], [`RunningController`]: reload and shutdown),
//! `listener` ([`server_tls`], [`serve_limits`]: the edge scaffold's settings),
//! `gateway_clients` (the clients every snapshot carries), `error` ([`ControllerError`]).

mod assembly;
mod error;
mod gateway_clients;
mod listener;
mod loops;
mod running;

pub use assembly::Controller;
pub use error::ControllerError;
pub use listener::{serve_limits, server_tls};
pub use running::{RunningController, SHUTDOWN_GRACE};

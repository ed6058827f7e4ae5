//! One module per subcommand; each exposes `run(args) -> Result<(), Failure>` (and
//! `sim_tls`, the certificate `sim` makes for its HTTPS proxy).

pub(crate) mod ca;
pub(crate) mod check_config;
pub(crate) mod controller;
pub(crate) mod dev;
pub(crate) mod extract;
pub(crate) mod gateway;
pub(crate) mod hash_secret;
pub(crate) mod init;
pub(crate) mod migrate;
pub(crate) mod probe;
pub(crate) mod serve;
pub(crate) mod sim;
mod sim_tls;
pub(crate) mod store;

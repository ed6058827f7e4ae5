//! `[gateway]`: a gateway worker, in the file of a split gateway (`proxypool gateway`) or
//! beside the controller's sections in a `serve` file.
//!
//! A split gateway needs `worker_id`, `controller_url` (one URL, or a list of every
//! controller to fail over between) and `worker_token`; the in-process
//! gateway of `serve` talks to its own controller over loopback with a token made up at
//! start, so those keys are ignored there (and `worker_id` defaults to `local`).
//! Listeners and identity need a restart to change; everything else applies on a reload.
//!
//! One file per concern: [`section`] (the table, its listeners and the checks that tie it
//! together), [`limits`], [`rotation`] (picks and sticky sessions), [`dial`], [`bans`],
//! [`destinations`], [`inspection`] (TLS inspection of opted-in clients' tunnels),
//! [`fleet`] (the gateways that share sticky sessions and rotation keys),
//! [`access_log`] and [`control`] (the controllers it talks to and the control loop's
//! pacing). Each checks its own keys.

pub mod access_log;
pub mod bans;
pub mod control;
pub mod destinations;
pub mod dial;
pub mod fleet;
pub mod inspection;
pub mod limits;
pub mod rotation;
pub mod section;

pub use access_log::{AccessLogConfig, AccessLogFormat};
pub use bans::{BansConfig, MAX_BAN_RETRIES};
pub use control::{ControlConfig, ControllerUrls, MAX_CONTROLLER_URLS};
pub use destinations::Destinations;
pub use dial::DialConfig;
pub use fleet::{FleetConfig, MAX_FLEET_CONNECTIONS};
pub use inspection::{InspectionConfig, MAX_LEAF_CACHE};
pub use limits::Limits;
pub use rotation::{Rotation, StickySessions};
pub use section::{GatewaySection, LOCAL_WORKER, Listeners, MAX_IO_THREADS};

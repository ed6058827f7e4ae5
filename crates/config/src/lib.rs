//! proxypool-config: the one owner of proxypool's configuration file, for every role.
//!
//! The file is parsed once into the typed settings of [`Config`]; the controller, the client
//! API, the gateway and the quota take the parts they need as plain structs, and no other
//! crate reads TOML or the environment. Module map:
//!
//! - [`load`]: read → parse → environment overrides → type → validate for a [`Role`]
//!   ([`role`]); `validate` (private) runs every section's checks in order and the rules
//!   that span sections.
//! - [`env`]: the environment snapshot and `PROXYPOOL__SECTION__KEY=value` overrides.
//! - [`secret`]: [`SecretRef`], the one way a secret is given (`env` | `file` | `hash`).
//! - [`duration`]: [`Millis`], the one duration type (`"250ms"`, `"30s"`, `"5m"`, `"1h"`).
//! - [`error`]: [`ConfigError`] and [`Problem`]: file, line, key, overriding variable.
//! - [`model`]: the whole file ([`Config`]) and `[listen]`.
//!
//! One module per section, each with its types, defaults and checks:
//!
//! - [`store`], [`quota`]: the activity pool's and the durable quota's stores.
//! - [`control`]: the worker control API (`[control]`) and `[[worker_tokens]]`.
//! - [`tuning`]: `[snapshot]`, `[ownership]`, `[checker]`, `[cooldowns]`, `[maintenance]`.
//! - [`upstream`], [`provider`], [`health`]: vendors, their lists and their health checks;
//!   [`backconnect`]: a vendor gateway whose username picks the exit, and its templates;
//!   [`vendor_api`]: a list API's pagination, authentication and JSON field pointers.
//! - [`client`]: tenants (`[[clients]]`).
//! - [`api`], [`gateway`]: the client API's and a gateway worker's tables.
//! - [`limiter`]: token-bucket policies and engine settings, as the throttle crate takes them.
//! - [`tls`]: the TLS tables of listeners and outbound links.
//!
//! Shared pieces:
//!
//! - [`cidr`]: CIDR blocks ([`Cidrs`]), the one parser of every block list.
//! - [`target`]: the URLs the controller dials (check targets, vendor lists).
//! - `floors`: the floors many sections share (at least 1, hyper's smallest head, the
//!   connection caps of a listener, the first-byte deadline).
//! - [`timing`]: the rule between the lease timings that keeps gateways serving through a
//!   leader failover.
//! - [`reload`]: what differs between two loads, and what of it needs a restart.
//! - [`effective`]: the resolved configuration as TOML, every secret redacted.
//!
//! `examples/proxypool.toml` at the repository root is the commented reference;
//! `docs/ARCHITECTURE.md` says how to add a key.

pub mod api;
pub mod backconnect;
mod check;
pub mod cidr;
pub mod client;
pub mod control;
pub mod duration;
pub mod effective;
pub mod env;
pub mod error;
mod floors;
pub mod gateway;
pub mod health;
pub mod limiter;
pub mod load;
mod locate;
pub mod log;
pub mod model;
pub mod provider;
pub mod quota;
pub mod reload;
pub mod role;
pub mod secret;
pub mod store;
pub mod target;
pub mod timing;
pub mod tls;
pub mod tuning;
pub mod upstream;
mod validate;
pub mod vendor_api;

pub use api::{ApiLimits, ApiSection, ApiShield, ExtractionSettings};
pub use backconnect::{BackconnectConfig, Placeholder, SessionGroup, Template};
pub use cidr::{Cidrs, parse_block, parse_cidr, parse_cidrs};
pub use client::{
    ClientConfig, ClientRotation, MAX_ROTATE_EVERY, MAX_ROTATE_REQUESTS, QUOTA_OPERATIONS,
    QuotaLimit,
};
pub use control::{ControlLimits, ControlSection, WorkerTokenConfig};
pub use duration::Millis;
pub use env::{ENV_PREFIX, Env};
pub use error::{ConfigError, Problem};
pub use gateway::{GatewaySection, LOCAL_WORKER};
pub use health::{CheckTarget, HealthConfig, HttpCheckMode};
pub use limiter::{LimiterConfig, RatePolicy};
pub use log::{LogFormat, LogSection, peek_log_format};
pub use model::{Config, ListenConfig};
pub use provider::{AllowedHost, ListFormat, ProviderConfig, ProviderKind};
pub use quota::{QuotaKind, QuotaStoreConfig};
pub use reload::{ReloadPlan, with_restart_keys};
pub use role::Role;
pub use secret::{MIN_VERIFIED_LEN, SecretRef, SecretSource};
pub use store::{DurabilityPolicy, StoreConfig, StoreKind};
pub use target::TargetUrl;
pub use tls::{ClientTlsConfig, ProxyTlsConfig, ServerTlsConfig};
pub use tuning::{
    CheckerConfig, CooldownsConfig, MAX_FEEDBACK_RATE, MaintenanceConfig, OwnershipConfig,
    SnapshotConfig,
};
pub use upstream::{CredentialsConfig, UpstreamConfig, UpstreamDefaults};
pub use vendor_api::{
    AuthHeaderConfig, BasicAuthConfig, FieldMapConfig, FlagValue, MS_FROM, PageStyle,
    PaginationConfig, QueryAuthConfig, TimeUnit, VendorAuthConfig, parse_redirect_host,
};

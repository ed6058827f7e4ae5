//! proxypool-api: the client HTTP API: exclusive extraction, feedback on bans, inspection,
//! inventory and worker administration over HTTP, behind the full admission chain.
//!
//! # Why a crate of its own
//!
//! The public API surface builds and is tested independently of the controller's
//! background loops (reconciler, checker, ownership manager, snapshot publisher), and the
//! controller crate does not need the quota crate: only this crate does, and only its port
//! and types (no SQL driver; the CLI opens the backend and hands it over). The controller,
//! or the CLI, builds an [`ApiState`] from narrow inputs and mounts [`router`] (or runs
//! [`serve`]). Each [`ApiClient`] carries its own quota limits, passed on every charge.
//!
//! # Wiring
//!
//! ```ignore
//! let ports = ApiPorts::from_pool(pool, quota, upstream_status); // or field by field
//! let state = ApiState::builder(ports, clients)      // Vec<ApiClient>, tokens hashed
//!     .limits(ApiLimits::default())
//!     .extraction(ExtractionSettings { reserve_for_gateway: 2, ..Default::default() })
//!     .shield_settings(ShieldSettings::default())
//!     .metrics(proxypool_metrics::install()?)
//!     .ownership_wake(controller)                     // optional
//!     .build()?;
//! proxypool_api::serve(listener, proxypool_api::router(state), &ApiLimits::default(), shutdown).await?;
//! ```
//!
//! # Routes
//!
//! See [`ROUTES`] and `openapi.json` (served at `/openapi.json`). Conventions (docs/ARCHITECTURE.md): JSON bodies with unknown fields rejected; errors `{"error":{"code","message"},
//! "request_id"}` with the fixed codes of [`ErrorCode`]; `Retry-After` on 429 and 503;
//! `RateLimit-Policy`/`RateLimit` on quota-governed responses; `Cache-Control: no-store`
//! and `X-Request-Id` on every response. An extraction without `Idempotency-Key` is not
//! idempotent across requests: each one is a new extraction and a new quota charge.
//!
//! # Module map
//!
//! | module | what it is for |
//! | --- | --- |
//! | `routes` | [`router`], [`ROUTES`]; one file per resource (extractions, feedback, upstreams, usage, admin, dashboard, health, meta), and what they share: `idempotency` (the `Idempotency-Key` and `Idempotent-Replayed` headers), `domain` (a domain named in a field) |
//! | `admission` | the chain in order: `limits`, `shield` (its limiter: `shield_limiter`), `auth`, `authorize`, `quota` |
//! | `observe` | outermost middleware: request ids, error bodies, common headers, metrics, tracing |
//! | `state` | [`ApiState`], [`ApiStateBuilder`], [`ApiPorts`] |
//! | `config` | [`ApiLimits`], [`ExtractionSettings`], [`ShieldSettings`], [`ApiConfigError`] |
//! | `clients` | [`ApiClient`], [`ClientDirectory`]: hashed bearer tokens |
//! | `controller_view` | [`UpstreamStatusSource`], [`UpstreamStatus`], [`ExtractionShare`], [`OwnershipWake`]: what the controller provides |
//! | `wire` | the JSON shapes |
//! | `body` | JSON bodies: content type, size cap, field-naming errors |
//! | `completion` | admitted work runs to completion even when the client goes away |
//! | `error` | [`ApiError`], [`ErrorCode`] |
//! | `request_id` | [`RequestId`] (the edge's): server-generated, unique across replicas |
//! | `ticket_key` | the store's feedback-ticket key, read through the port and kept, to check the gateways' tickets |
//! | `metrics` | metric names, help texts and the helpers the routes call (the recorder is `proxypool-metrics`) |
//! | `ui` | the operators' dashboard at `/ui/`: built-in assets, cookie sessions with CSRF tokens |
//! | `serve` | [`serve`]: the router on the edge's server scaffold (caps per IP and in total at accept, header and idle timeouts, head size cap) |

mod admission;
mod body;
mod clients;
mod completion;
mod config;
mod controller_view;
mod error;
mod metrics;
mod observe;
mod readiness;
mod request_id;
mod routes;
mod serve;
mod state;
mod ticket_key;
mod ui;
pub mod wire;

pub use admission::auth::{AdminPrincipal, Principal};
pub use admission::feedback_rate::FeedbackRate;
pub use admission::shield_limiter::Shield;
pub use clients::{ApiClient, ClientDirectory};
pub use config::{ApiConfigError, ApiLimits, ExtractionSettings, ShieldSettings};
pub use controller_view::{
    ExtractionShare, FetchHealth, OwnershipWake, UpstreamStatus, UpstreamStatusSource,
};
pub use error::{ApiError, ErrorCode};
pub use proxypool_metrics::MetricsHandle;
pub use request_id::RequestId;
pub use routes::meta::OPENAPI_JSON;
pub use routes::{ROUTES, router};
pub use serve::{serve, serve_limits, serve_with};
pub use state::{ApiPorts, ApiState, ApiStateBuilder, ConfigReloader};
/// Failed dashboard sign-ins an address may make before it is backed off.
pub use ui::sign_in_guard::FREE_FAILURES as SIGN_IN_FREE_FAILURES;

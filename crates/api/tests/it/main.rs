//! The API's integration tests, one binary; `common` is the harness (a real server over a
//! real pool and quota). One module per concern:
//!
//! - `admin`: listing workers, and cordoning, draining and uncordoning one.
//! - `admission`: the admission chain layer by layer; a denial leaves later layers untouched.
//! - `charging`: how requests are charged on the memory and SQLite quotas; refunds, receipts.
//! - `edges`: the client listener under hostile connections (idle floods, trickles, big heads).
//! - `errors`: every error code from a real request, in the documented shape.
//! - `extraction`: extraction's response, idempotent replays, filters, 50 concurrent clients.
//! - `feedback`: `POST /v1/feedback`, each verdict's effect read back from the store.
//! - `feedback_scope`: feedback writes only the reporting client's own project's scope.
//! - `geo_filters`: `country`, `city`, `state` and `asn` filters; bad values cost nothing.
//! - `given_back`: a returned proxy leaves its extraction and goes to nobody else; tickets
//!   from before the proxy moved on are refused.
//! - `readiness`: `GET /readyz` under load: one store check at a time, about one per second.
//! - `redis_postgres`: the API on Redis and PostgreSQL, with a Redis outage mid-test.
//! - `replay`: a keyed extraction replayed after a dropped connection, charged once.
//! - `routes`: the route table against the OpenAPI document; health, readiness, metrics.
//! - `slow_bodies`: slow request bodies hold no global slot; 408 and 429 as configured.
//! - `ui`: the dashboard's sign-in, session cookie, CSRF and the admin read routes.
//! - `usage`: `GET /v1/usage` for a client and for an admin, read from the store.

#[macro_use]
mod common;

mod admin;
mod admission;
mod charging;
mod edges;
mod errors;
mod extraction;
mod feedback;
mod feedback_scope;
mod geo_filters;
mod given_back;
mod readiness;
mod redis_postgres;
mod replay;
mod routes;
mod slow_bodies;
mod ui;
mod usage;

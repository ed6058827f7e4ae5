//! The vendor list endpoint: what a provider's "get proxies" URL looks like, over a fleet
//! of real upstream proxies that rotates like a residential vendor's.
//!
//! Serves the current list at any other path than the API's (use [`VendorEndpoint::url`]) as text lines
//! (`host:port[:user:pass]`, optionally `scheme://` first) or JSON (an array of objects
//! with host, port, protocol, username, password, region, carrier, expires_at_ms).
//! [`ListFaults`] makes it misbehave for reconciler tests: malformed entries mixed in,
//! an oversized body, an error status, a slow answer, chunked encoding. Knobs can be
//! changed while it runs. Beside it, `api` serves the same proxies as a vendor API would:
//! paginated token-authenticated gzip JSON with its own field names
//! ([`VendorEndpoint::api_url`]), a text list behind HTTP Basic
//! ([`VendorEndpoint::basic_url`]), and a list in Webshare's shape
//! ([`VendorEndpoint::webshare_url`]).

//!
//! Module map: `endpoint` ([`VendorEndpoint`]: the list server, its knobs and the
//! rotation), `config` ([`VendorConfig`], [`FleetConfig`], [`ListFormat`],
//! [`ListFaults`]), `fleet` (the upstream proxies behind the list and their lifetimes),
//! `listing` ([`Listing`]: one proxy as the list shows it, and malformed entries), `api`
//! (the paginated API and the Basic-auth list), `webshare` (Webshare's list API: DRF
//! pages, ISO times, validity flags).

mod api;
mod config;
mod endpoint;
mod fleet;
mod listing;
mod webshare;

pub use config::{
    ApiConfig, ApiKnobs, ContentEncoding, FleetConfig, ListFaults, ListFormat, VendorConfig,
};
pub use endpoint::VendorEndpoint;
pub use listing::Listing;
pub use webshare::{iso8601, webshare_valid};

//! The `proxypool` binary's end-to-end tests, one test binary: each module starts the built
//! binary (`CARGO_BIN_EXE_proxypool`) as processes and talks to them over real sockets,
//! with private Redis and PostgreSQL servers from the testkit. Run one module with
//! `cargo test -p proxypool --test it MODULE::`.
//!
//! - `admin_private`: the admin listener of `serve` shows no tenant's series or detail
//!   without its token, everything with it.
//! - `bans`: ban-aware rotation in split mode; cooldowns follow a proxy to another gateway,
//!   and clients report bans inside tunnels and by session.
//! - `ca`: `proxypool ca init`'s files, modes and printout, refusals, and a gateway file
//!   with its CA checking out.
//! - `check_failures`: an untrusted https proxy's failed checks, and why, on the listing,
//!   the metric, the log and the dashboard.
//! - `clients`: the Python client package `clients/python/` (its pytest suite, from the
//!   built wheel) and the client examples of `examples/clients/` that use it (requests,
//!   Scrapy, Playwright) against `proxypool dev`.
//! - `config`: `check-config`, `migrate` and `hash-secret` as a user runs them.
//! - `dashboard`: the dashboard in headless Chromium, every number checked against the API.
//! - `deploy_compose`: the root `Dockerfile` and the Compose stack, on a Docker Engine when
//!   one answers (a killed leader, a cut-off gateway).
//! - `deploy_debian`: the Debian package of `scripts/build-deb.sh`, its control file and
//!   contents, installed, removed and purged in a Debian container when an engine answers.
//! - `deploy_kubernetes`: the shipped Kubernetes base renders and runs unprivileged.
//! - `deploy_prometheus`: the example scrape configuration, the alert rules and their unit
//!   tests against what `dev` exports.
//! - `deploy_systemd`: the shipped systemd units pass `systemd-analyze verify`.
//! - `dev`: `proxypool dev` end to end with `curl` and `proxypool extract`.
//! - `failover`: split mode through a killed, a stopped and a draining leader.
//! - `fleet`: three gateways of a fleet behind HAProxy: sessions and rotation keys hold
//!   whichever gateway a connection lands on, and through a killed member.
//! - `gateway_reload`: live reload (SIGHUP) of a split gateway and its controller's clients.
//! - `grafana`: the Grafana dashboard against what proxypool exports, and its shape.
//! - `init`: `proxypool init` writes files that check out and that `serve` runs as written
//!   against `proxypool sim`, with its generated secrets; refusals change nothing.
//! - `inspection`: TLS inspection under `dev`: its inspected curl line, the ticket reported
//!   through `POST /v1/feedback`, the CA kept across runs, its key in no output.
//! - `logs`: JSON and text logs on stderr as a collector reads them.
//! - `metrics`: every `/metrics` endpoint renders the one registry; `dev` exports every
//!   controller family.
//! - `probe`: `proxypool probe URL`, the container health check, and its exit codes.
//! - `reload`: live reload (SIGHUP) of `proxypool serve`.
//! - `schemathesis`: the client API against its own OpenAPI document.
//! - `serve`: `proxypool serve --config FILE` end to end.
//! - `sim`: `proxypool sim` as a person uses it.
//! - `split`: split mode end to end, with and without TLS on every link.
//! - `split_cluster`: split mode on a Redis Cluster that loses a primary.
//! - `store_loss`: exclusivity through a loss of the pool store.
//! - `store_operator`: `store recover` and `acknowledge` on PostgreSQL need the operator's
//!   credential; the runtime role's raw statements are refused; the controller carries
//!   the operator's orders out.
//! - `tenants`: clients of two projects against each other's limits.
//! - `tls_listener`: Python `requests` through dev's TLS listener (`https://` proxy URL).
//! - `usage`: usage accounting across two controllers and two upstreams.
//! - `webshare`: `docs/vendors.md`'s Webshare example against `sim`'s Webshare-shaped list
//!   under `serve`: invalid entries counted and not stored, extraction and the gateway by
//!   country, city and ASN.
//!
//! `common` holds the shared helpers (processes, scratch directories, `curl`, bounded
//! waits, the API client that retries a 503 as a real client does).
//!
//! Every test here only starts processes and talks to them, so all of them share this one
//! process safely: none sets process-wide state.

mod common;

mod admin_private;
mod bans;
mod ca;
mod check_failures;
mod clients;
mod config;
mod dashboard;
mod deploy_compose;
mod deploy_debian;
mod deploy_kubernetes;
mod deploy_prometheus;
mod deploy_systemd;
mod dev;
mod failover;
mod fleet;
mod gateway_reload;
mod grafana;
mod init;
mod inspection;
mod logs;
mod metrics;
mod probe;
mod reload;
mod schemathesis;
mod serve;
mod sim;
mod split;
mod split_cluster;
mod store_loss;
mod store_operator;
mod tenants;
mod tls_listener;
mod usage;
mod webshare;

//! What the gateway tells operators about each request and tunnel: one [`Exchange`] per
//! request (plain HTTP, `CONNECT`, SOCKS5), created when the request is read and finished
//! when it ends however it ends, which records the request and tunnel duration histograms
//! and hands one line to the access log ([`AccessLog`]).
//!
//! - [`exchange`]: [`Exchange`], the record a request fills in on its way; its drop is the
//!   one place a request is accounted, so each request yields exactly one line.
//! - [`sink`]: [`AccessLog`], the bounded queue and the writer thread (standard output or
//!   a file reopened on reload), sampling, and the duration histograms.
//! - `refusal_budget`: the refusal lines' own rate and share of the queue, so a refusal
//!   flood cannot crowd served lines out.
//! - [`line`]: the JSON shape of a line (`format = "json"`).
//! - [`text`]: squid's native line and the NCSA combined line (`format = "squid"`,
//!   `"combined"`), their escaping and squid's result tags.

pub(crate) mod exchange;
pub(crate) mod line;
mod refusal_budget;
pub(crate) mod sink;
pub(crate) mod text;

pub(crate) use exchange::{Exchange, Kind};
pub(crate) use sink::AccessLog;

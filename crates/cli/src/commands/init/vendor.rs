//! Where `init`'s upstream gets its proxies, from `--vendor-url` and `--sim-origin`,
//! checked before anything is written: a vendor's list must be https:// (it carries the
//! account's credentials one way and the proxies' the other); plain http is taken only for
//! `proxypool sim`, whose origin must be given as the address it printed, since the
//! gateway's destination policy lifts exactly that address and port.

use crate::args::InitArgs;
use crate::failure::Failure;
use std::net::SocketAddr;
use url::{Host, Url};

/// Where the proxies come from.
pub(super) enum Vendor {
    /// No `--vendor-url`: a commented placeholder.
    Placeholder,
    /// A vendor's list over https.
    List(Url),
    /// `proxypool sim`: its list and its origin.
    Sim { list: Url, origin: SocketAddr },
}

/// `--vendor-url` and `--sim-origin`, checked before anything is written.
pub(super) fn from_args(args: &InitArgs) -> Result<Vendor, Failure> {
    let Some(raw) = args.vendor_url.as_deref() else {
        return Ok(Vendor::Placeholder);
    };
    let list = Url::parse(raw)
        .map_err(|e| Failure::config(format!("--vendor-url {raw:?}: not a URL ({e})")))?;
    if list.host_str().is_none_or(str::is_empty) {
        return Err(Failure::config(format!(
            "--vendor-url {raw:?}: names no host"
        )));
    }
    let Some(origin) = args.sim_origin.as_deref() else {
        if list.scheme() != "https" {
            return Err(Failure::config(format!(
                "--vendor-url {raw:?}: a vendor's list is fetched over https:// (the request \
                 carries the account's credentials, the answer the proxies'); for the plain \
                 http list of `proxypool sim` add --sim-origin with the origin it printed"
            )));
        }
        return Ok(Vendor::List(list));
    };
    if !matches!(list.scheme(), "http" | "https") {
        return Err(Failure::config(format!(
            "--vendor-url {raw:?}: not an http:// or https:// URL"
        )));
    }
    Ok(Vendor::Sim {
        list,
        origin: sim_origin(origin)?,
    })
}

/// The origin `proxypool sim` printed (`http://127.0.0.1:PORT/`), as an address: the
/// gateway's destination policy lifts exactly that address and port.
fn sim_origin(raw: &str) -> Result<SocketAddr, Failure> {
    let wrong = |why: &str| {
        Failure::config(format!(
            "--sim-origin {raw:?}: {why}; give the origin `proxypool sim` printed, e.g. http://127.0.0.1:40123/"
        ))
    };
    let url = Url::parse(raw).map_err(|e| wrong(&format!("not a URL ({e})")))?;
    if url.scheme() != "http" {
        return Err(wrong("not an http:// URL"));
    }
    let ip = match url.host() {
        Some(Host::Ipv4(ip)) => ip.into(),
        Some(Host::Ipv6(ip)) => ip.into(),
        _ => return Err(wrong("names no IP address")),
    };
    let port = url.port().ok_or_else(|| wrong("names no port"))?;
    Ok(SocketAddr::new(ip, port))
}

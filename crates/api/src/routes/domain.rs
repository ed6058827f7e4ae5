//! [`domain_of`]: the registrable domain a request names in a field (a host, an IP
//! literal, `host:port` or a URL), as feedback and extraction filters take it.

use crate::error::ApiError;
use proxypool_core::Domain;

/// The registrable domain of `raw` (a host, an IP literal, `host:port` or a URL), or a 400
/// naming `field`.
pub(crate) fn domain_of(field: &str, raw: &str) -> Result<Domain, ApiError> {
    let invalid = || {
        // Echoed back cut short: the body may be kilobytes of it.
        let shown: String = raw.chars().take(80).collect();
        ApiError::invalid(format!(
            "{field}: expected a host name, an IP address or a URL, got {shown:?}"
        ))
    };
    let mut host = raw.trim();
    if let Some((scheme, rest)) = host.split_once("://") {
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        {
            return Err(invalid());
        }
        host = rest;
    }
    host = host.split(['/', '?', '#']).next().unwrap_or_default();
    if let Some((_, after)) = host.rsplit_once('@') {
        host = after;
    }
    // Drop a port: `[v6]:port` keeps its brackets for `of_host`, `name:port` loses it; a
    // bare IPv6 literal has several colons and no port.
    if let Some(end) = host.find(']') {
        host = &host[..=end];
    } else if host.matches(':').count() == 1 {
        host = host.split(':').next().unwrap_or_default();
    }
    if host.is_empty() {
        return Err(invalid());
    }
    Domain::of_host(host).ok_or_else(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_come_from_hosts_and_urls() {
        let cases = [
            ("www.shop-a.test", "shop-a.test"),
            (
                "https://user:pw@WWW.Example.co.uk:8443/path?q#f",
                "example.co.uk",
            ),
            ("shop-b.test:8080", "shop-b.test"),
            ("http://[::1]:80/", "::1"),
            ("::1", "::1"),
            ("10.0.0.1", "10.0.0.1"),
        ];
        for (raw, expected) in cases {
            assert_eq!(
                domain_of("domain", raw).unwrap().as_str(),
                expected,
                "{raw}"
            );
        }
        for bad in ["", "https://", "bad host", "://x", "a..b", "http:///path"] {
            let error = domain_of("domain", bad).unwrap_err();
            assert!(
                error.message.starts_with("domain: "),
                "{bad}: {}",
                error.message
            );
        }
    }
}

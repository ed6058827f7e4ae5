//! The edge scaffold's settings of the control listener: [`serve_limits`] from
//! `[control.limits]`, [`server_tls`] from a `[*.tls]` table.

use crate::config::ControlLimits;
use proxypool_edge::ServeLimits;

/// A listener's TLS from its `[*.tls]` table (the client API's uses it too).
pub fn server_tls(
    tls: &proxypool_config::ServerTlsConfig,
) -> Result<proxypool_edge::ServerTls, proxypool_edge::TlsError> {
    proxypool_edge::ServerTls::load_polling(
        proxypool_edge::ServerTlsFiles {
            cert: tls.cert.clone(),
            key: tls.key.clone(),
            client_ca: tls.client_ca.clone(),
        },
        tls.poll_interval.as_duration(),
    )
}

/// The edge scaffold's settings from `[control.limits]`.
pub fn serve_limits(limits: &ControlLimits) -> ServeLimits {
    ServeLimits {
        max_connections: limits.max_connections,
        max_connections_per_ip: limits.max_connections_per_ip,
        ipv6_prefix: limits.ipv6_prefix,
        first_byte_timeout: limits.first_byte_deadline().as_duration(),
        header_read_timeout: limits.header_read_timeout.as_duration(),
        keepalive_idle: limits.keepalive_idle.as_duration(),
        max_header_bytes: limits.max_header_bytes,
        proxy_protocol_from: Vec::new(),
        uncounted_per_ip: Vec::new(),
        tls: None,
    }
}

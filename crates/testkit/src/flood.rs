//! Idle floods from many addresses, for connection-cap tests: loopback IPv4 sources
//! (`127.0.0.10` and up; all of 127/8 is loopback on Linux) and IPv6 sources spread over
//! one /64 ([`IPV6_FLOOD_NETWORK`]), which the kit routes to the loopback device as local
//! ("AnyIP") so a socket can bind any address of it with `IPV6_FREEBIND` (as
//! [`crate::edge::connect_from`] does). Adding that
//! route needs root (`ip -6 route`); without it an IPv6 test skips with a banner, and
//! under `CI=true` it fails.

use crate::edge::connect_from;
use crate::skip::running_in_ci;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::Command;
use std::time::Duration;
use tokio::net::TcpStream;

/// The /64 IPv6 floods come from (a unique local block, routed to loopback by the kit).
pub const IPV6_FLOOD_NETWORK: &str = "fd70:7000:0:1::/64";

/// The `index`-th IPv4 flood source: `127.0.0.10`, `127.0.0.11`, ... (at most 200).
pub fn ipv4_source(index: u8) -> IpAddr {
    assert!(index < 200, "loopback flood sources end at 127.0.0.209");
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + index))
}

/// The `index`-th IPv6 flood source, each a different address of [`IPV6_FLOOD_NETWORK`]
/// (the interface identifier varies in its high bits, as privacy addresses do).
pub fn ipv6_source(index: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0xfd70, 0x7000, 0, 1, index, 0x5a5a, index, 1))
}

/// Makes [`IPV6_FLOOD_NETWORK`] bindable, or says why it cannot be: `None` after a banner
/// (a skip), a panic under `CI=true`.
pub fn ipv6_flood_network() -> Option<()> {
    let route = Command::new("ip")
        .args([
            "-6",
            "route",
            "replace",
            "local",
            IPV6_FLOOD_NETWORK,
            "dev",
            "lo",
        ])
        .output();
    let problem = match route {
        Ok(output) if output.status.success() => return Some(()),
        Ok(output) => String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        Err(error) => format!("`ip` could not run: {error}"),
    };
    let message = format!(
        "routing {IPV6_FLOOD_NETWORK} to loopback failed ({problem}); it needs root and iproute2"
    );
    if running_in_ci() {
        panic!("CI=true and {message}, so this test cannot run");
    }
    let banner = "=".repeat(78);
    let _ = writeln!(
        io::stderr(),
        "\n{banner}\nSKIPPED: {message}\nThis test did NOT run. Under CI=true this is a failure.\n{banner}"
    );
    None
}

/// Opens `per_source` connections to `addr` from each of `sources` that never send a
/// byte (each connect bounded to 2 s); returns those that were established.
pub async fn spread_idle_flood(
    addr: SocketAddr,
    sources: &[IpAddr],
    per_source: usize,
) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(sources.len() * per_source);
    for source in sources {
        let mut tasks = Vec::with_capacity(per_source);
        for _ in 0..per_source {
            let source = *source;
            tasks.push(tokio::spawn(tokio::time::timeout(
                Duration::from_secs(2),
                connect_from(source, addr),
            )));
        }
        for task in tasks {
            if let Ok(Ok(Ok(stream))) = task.await {
                streams.push(stream);
            }
        }
    }
    streams
}

/// Opens one silent connection to `addr` from each of `count` addresses of
/// [`IPV6_FLOOD_NETWORK`] and says how many the server still holds half a second later
/// (a server that counts the network as one address holds at most its per-address cap).
pub async fn ipv6_network_flood_held(addr: SocketAddr, count: u16) -> usize {
    let sources: Vec<_> = (0..count).map(ipv6_source).collect();
    let flood = spread_idle_flood(addr, &sources, 1).await;
    assert_eq!(
        flood.len(),
        usize::from(count),
        "every flood connect completed"
    );
    crate::edge::still_open(flood, Duration::from_millis(500)).await
}

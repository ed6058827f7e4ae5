//! Runs a simulated vendor until Ctrl-C and prints how to use it with curl:
//! `cargo run -p proxypool-sim --example sim [PROXIES] [TTL_SECS]`.

use std::time::Duration;

use proxypool_sim::{SimConfig, SimVendor};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let proxies = args.next().and_then(|n| n.parse().ok()).unwrap_or(4);
    let ttl = args
        .next()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs);
    let sim = SimVendor::start(SimConfig {
        proxies,
        ttl,
        ..SimConfig::default()
    })
    .await?;
    println!("vendor list: curl -s {}", sim.list_url());
    println!("origin:      {}", sim.origin().url("/"));
    for proxy in sim.proxies() {
        println!(
            "curl -s -x {} {}   # exit {}",
            proxy.url(),
            sim.origin().url("/"),
            proxy.exit_ip()
        );
    }
    tokio::signal::ctrl_c().await
}

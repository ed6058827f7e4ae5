//! The simulated side of `scripts/bench-gateway.sh` and `scripts/bench-gateway-tls.sh`:
//! proxypool-sim's origin (plain, or https with a certificate from files), or one
//! simulated upstream HTTP proxy with Basic credentials, each in its own process so that
//! neither shares a descriptor limit or a runtime with the other (10,000 tunnels need
//! 20,000 descriptors in the upstream alone). Prints the address, then runs until killed.
//!
//! ```text
//! bench_sim origin COUNT     # COUNT origins on 127.0.0.10, .11, ...
//! bench_sim tls-origin CERT KEY   # one https origin on 127.0.0.1 (reached by a .test name)
//! bench_sim upstream USER:PASS
//! ```

use proxypool_edge::{ServerTls, ServerTlsFiles};
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy, UpstreamProxyConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        match args.first().map(String::as_str) {
            Some("origin") => {
                // The simulated upstream opens one origin connection per request; several
                // origin addresses keep that churn from exhausting one destination's
                // ephemeral ports (TIME_WAIT) and becoming the benchmark.
                let count: u8 = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(1);
                let mut origins = Vec::new();
                for i in 0..count {
                    let ip = std::net::Ipv4Addr::new(127, 0, 0, 10 + i);
                    origins.push(Origin::start_on(ip).await.expect("origin starts"));
                }
                let list: Vec<String> = origins.iter().map(|o| o.addr().to_string()).collect();
                println!("origin={}", list.join(","));
                let _ = tokio::signal::ctrl_c().await;
            }
            Some("tls-origin") => {
                let tls = ServerTls::load(ServerTlsFiles {
                    cert: args[1].clone().into(),
                    key: args[2].clone().into(),
                    client_ca: None,
                })
                .expect("the origin's certificate and key");
                let origin = Origin::start_tls(tls.current())
                    .await
                    .expect("origin starts");
                println!("tls_origin={}", origin.addr());
                let _ = tokio::signal::ctrl_c().await;
            }
            Some("upstream") => {
                let (user, pass) = args[1].split_once(':').expect("USER:PASS");
                let upstream = UpstreamProxy::start(UpstreamProxyConfig {
                    kind: ProxyKind::Http,
                    credentials: Some((user.to_owned(), pass.to_owned())),
                    ..UpstreamProxyConfig::default()
                })
                .await
                .expect("upstream starts");
                println!("upstream={}", upstream.addr());
                let _ = tokio::signal::ctrl_c().await;
            }
            _ => eprintln!(
                "usage: bench_sim origin COUNT | bench_sim tls-origin CERT KEY | bench_sim upstream USER:PASS"
            ),
        }
    });
}

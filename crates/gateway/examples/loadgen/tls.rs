//! The https modes of the load generator, both through a `CONNECT` tunnel and with TLS to
//! the target inside it, as a browser or a scraper speaks https through a proxy:
//!
//! - `tunnel-requests`: each connection opens one tunnel, does one TLS handshake and then
//!   sends keep-alive GETs until the time is up (a warm connection), so the cost per
//!   request excludes the set-up. Through a plain tunnel the TLS is the origin's (`CA` is
//!   the origin's CA); through an inspecting gateway (a username with `-inspect`) it is
//!   the gateway's, with a leaf it minted for the host (`CA` is the gateway's CA), and
//!   every request is forwarded by the gateway itself.
//! - `tls-connect`: connect, `CONNECT`, TLS handshake, close: what one new https
//!   connection costs. A `{n}` in `HOST` is replaced by a name no connection of this run
//!   used before (`h<pid>x<count>`), so an inspecting gateway mints a fresh leaf for each
//!   connection instead of serving one from its cache.

use crate::{basic, open_tunnel, report};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use proxypool_edge::{ClientTls, ClientTlsFiles};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn client_tls(ca: &str) -> ClientTls {
    let files = ClientTlsFiles {
        ca: Some(ca.into()),
        ..ClientTlsFiles::default()
    };
    ClientTls::load(&files).expect("CA: a CA bundle")
}

/// `HOST:PORT` split at its last colon.
fn host_and_port(target: &str) -> (&str, &str) {
    target.rsplit_once(':').expect("HOST:PORT")
}

/// Keep-alive https GETs inside one tunnel per connection (see the module doc).
pub(crate) async fn tunnel_requests(
    proxy: SocketAddr,
    credentials: &str,
    target: &str,
    ca: &str,
    connections: usize,
    seconds: u64,
) {
    let auth = basic(credentials);
    let tls = client_tls(ca);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let (auth, tls, target) = (auth.clone(), tls.clone(), target.to_owned());
        workers.spawn(async move {
            let (host, _) = host_and_port(&target);
            let mut latencies: Vec<u32> = Vec::with_capacity(1 << 16);
            let mut errors = 0u64;
            let mut sender = None;
            while Instant::now() < deadline {
                if sender.as_ref().is_none_or(
                    |s: &hyper::client::conn::http1::SendRequest<Empty<Bytes>>| s.is_closed(),
                ) {
                    let Some(tunnel) = open_tunnel(proxy, &auth, &target).await else {
                        errors += 1;
                        continue;
                    };
                    let Ok(stream) = tls.connect(host, tunnel).await else {
                        errors += 1;
                        continue;
                    };
                    let Ok((s, conn)) =
                        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
                    else {
                        errors += 1;
                        continue;
                    };
                    tokio::spawn(conn);
                    sender = Some(s);
                }
                let s = sender.as_mut().unwrap();
                if s.ready().await.is_err() {
                    sender = None;
                    continue;
                }
                // Timed from here: the set-up above is the first request's alone, and the
                // warm cost is what this mode measures.
                let started = Instant::now();
                let request = hyper::Request::get("/")
                    .header("host", target.as_str())
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                match s.send_request(request).await {
                    Ok(response) => {
                        let ok = response.status().is_success();
                        let _ = response.into_body().collect().await;
                        if ok {
                            latencies.push(started.elapsed().as_micros() as u32);
                        } else {
                            errors += 1;
                        }
                    }
                    Err(_) => {
                        errors += 1;
                        sender = None;
                    }
                }
            }
            (latencies, errors)
        });
    }
    report(workers, seconds).await;
}

/// Connect, `CONNECT`, TLS handshake, close (see the module doc).
pub(crate) async fn tls_connect(
    proxy: SocketAddr,
    credentials: &str,
    target: &str,
    ca: &str,
    concurrency: usize,
    seconds: u64,
) {
    static FRESH: AtomicU64 = AtomicU64::new(0);
    let auth = basic(credentials);
    let tls = client_tls(ca);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut workers = tokio::task::JoinSet::new();
    let pid = std::process::id();
    for _ in 0..concurrency {
        let (auth, tls, target) = (auth.clone(), tls.clone(), target.to_owned());
        workers.spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0;
            while Instant::now() < deadline {
                let started = Instant::now();
                let target = if target.contains("{n}") {
                    let n = FRESH.fetch_add(1, Ordering::Relaxed);
                    target.replace("{n}", &format!("h{pid}x{n}"))
                } else {
                    target.clone()
                };
                let (host, _) = host_and_port(&target);
                let Some(tunnel) = open_tunnel(proxy, &auth, &target).await else {
                    errors += 1;
                    continue;
                };
                match tls.connect(host, tunnel).await {
                    Ok(stream) => {
                        latencies.push(started.elapsed().as_micros() as u32);
                        drop(stream);
                    }
                    Err(_) => errors += 1,
                }
            }
            (latencies, errors)
        });
    }
    report(workers, seconds).await;
}

//! Load generator for `scripts/bench-gateway.sh` and `scripts/bench-gateway-tls.sh`: a
//! keep-alive origin, plain HTTP load through a proxy (requests/s, p50/p99), CONNECT
//! setups/s, idle tunnels held open while a process's resident memory is measured, and
//! the https modes of [`tls`]: keep-alive requests inside one tunnel, and tunnels that end
//! after their TLS handshake.
//!
//! ```text
//! loadgen origin  LISTEN
//! loadgen http    PROXY USER:PASS URL[,URL...] CONNECTIONS SECONDS
//! loadgen connect PROXY USER:PASS TARGET[,TARGET...] CONCURRENCY SECONDS
//! loadgen hold    PROXY USER:PASS TARGET[,TARGET...] COUNT PID
//! loadgen tunnel-requests PROXY USER:PASS HOST:PORT CA CONNECTIONS SECONDS
//! loadgen tls-connect     PROXY USER:PASS HOST:PORT CA CONCURRENCY SECONDS
//! ```
//! Several URLs or targets are used in turn (spreading connections over destinations).
//! Results are printed as one `key=value` line for the script to parse.
//! `LOADGEN_USER_AGENT` adds that `User-Agent` to every request and `CONNECT` (as a browser
//! or a scraper sends one), for what a log format that copies it costs.
//! `LOADGEN_PROXY_CA=FILE` speaks TLS to the proxy (its TLS listener), trusting the CA
//! certificates of `FILE`; every mode then runs inside that TLS link.

mod tls;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use proxypool_edge::{ClientTls, ClientTlsFiles, Conn};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        match args.first().map(String::as_str) {
            Some("origin") => origin(args[1].parse().unwrap()).await,
            Some("http") => {
                http_load(
                    args[1].parse().unwrap(),
                    &args[2],
                    &args[3],
                    args[4].parse().unwrap(),
                    args[5].parse().unwrap(),
                )
                .await
            }
            Some("connect") => {
                connect_load(
                    args[1].parse().unwrap(),
                    &args[2],
                    &args[3],
                    args[4].parse().unwrap(),
                    args[5].parse().unwrap(),
                )
                .await
            }
            Some("hold") => {
                hold(
                    args[1].parse().unwrap(),
                    &args[2],
                    &args[3],
                    args[4].parse().unwrap(),
                    args[5].parse().unwrap(),
                )
                .await
            }
            Some("tunnel-requests") => {
                tls::tunnel_requests(
                    args[1].parse().unwrap(),
                    &args[2],
                    &args[3],
                    &args[4],
                    args[5].parse().unwrap(),
                    args[6].parse().unwrap(),
                )
                .await
            }
            Some("tls-connect") => {
                tls::tls_connect(
                    args[1].parse().unwrap(),
                    &args[2],
                    &args[3],
                    &args[4],
                    args[5].parse().unwrap(),
                    args[6].parse().unwrap(),
                )
                .await
            }
            _ => eprintln!("usage: see the module doc"),
        }
    });
}

/// A keep-alive origin answering every request with a small body; it also holds idle
/// connections (tunnels end here).
async fn origin(listen: SocketAddr) {
    let listener = TcpListener::bind(listen).await.unwrap();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(|_request| async {
                Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                    Bytes::from_static(b"hello from the origin\n"),
                )))
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

pub(crate) fn basic(credentials: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(credentials)
    )
}

/// Keep-alive absolute-form GETs through `proxy` on `connections` connections.
async fn http_load(
    proxy: SocketAddr,
    credentials: &str,
    url: &str,
    connections: usize,
    seconds: u64,
) {
    let auth = basic(credentials);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut workers = tokio::task::JoinSet::new();
    let urls: Vec<String> = url.split(',').map(str::to_owned).collect();
    let agent = std::env::var("LOADGEN_USER_AGENT").ok();
    for worker in 0..connections {
        let auth = auth.clone();
        let urls = urls.clone();
        let agent = agent.clone();
        let mut turn = worker;
        workers.spawn(async move {
            let mut latencies: Vec<u32> = Vec::with_capacity(1 << 16);
            let mut errors = 0u64;
            let mut sender = None;
            while Instant::now() < deadline {
                let started = Instant::now();
                if sender.as_ref().is_none_or(
                    |s: &hyper::client::conn::http1::SendRequest<Empty<Bytes>>| s.is_closed(),
                ) {
                    let Some(stream) = connect_proxy(proxy).await else {
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
                turn += 1;
                let url = &urls[turn % urls.len()];
                let mut request = hyper::Request::get(url.as_str())
                    .header("proxy-authorization", auth.as_str())
                    .header("host", host_of(url));
                if let Some(agent) = &agent {
                    request = request.header("user-agent", agent.as_str());
                }
                let request = request.body(Empty::<Bytes>::new()).unwrap();
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

/// The TLS client for the proxy's TLS listener, when `LOADGEN_PROXY_CA` names its CA.
fn proxy_tls() -> Option<&'static ClientTls> {
    static TLS: OnceLock<Option<ClientTls>> = OnceLock::new();
    TLS.get_or_init(|| {
        let ca = std::env::var_os("LOADGEN_PROXY_CA")?;
        let files = ClientTlsFiles {
            ca: Some(ca.into()),
            ..ClientTlsFiles::default()
        };
        Some(ClientTls::load(&files).expect("LOADGEN_PROXY_CA: a CA bundle"))
    })
    .as_ref()
}

/// A connection to the proxy: plain TCP, or TLS to its listener (see the module doc).
async fn connect_proxy(proxy: SocketAddr) -> Option<Conn> {
    let stream = TcpStream::connect(proxy).await.ok()?;
    let _ = stream.set_nodelay(true);
    match proxy_tls() {
        Some(tls) => tls.handshake(&proxy.ip().to_string(), stream).await.ok(),
        None => Some(Conn::Plain(stream)),
    }
}

fn host_of(url: &str) -> String {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned()
}

pub(crate) async fn report(mut workers: tokio::task::JoinSet<(Vec<u32>, u64)>, seconds: u64) {
    let mut all = Vec::new();
    let mut errors = 0;
    while let Some(result) = workers.join_next().await {
        let (latencies, errs) = result.unwrap();
        all.extend(latencies);
        errors += errs;
    }
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |us| f64::from(*us) / 1000.0)
    };
    println!(
        "ok={} errors={} rps={:.0} p50_ms={:.3} p99_ms={:.3}",
        all.len(),
        errors,
        all.len() as f64 / seconds as f64,
        pct(0.50),
        pct(0.99)
    );
}

/// Opens a CONNECT tunnel and returns the stream once the proxy said 200.
async fn open_tunnel(proxy: SocketAddr, auth: &str, target: &str) -> Option<Conn> {
    let mut stream = connect_proxy(proxy).await?;
    let agent = std::env::var("LOADGEN_USER_AGENT")
        .map(|agent| format!("User-Agent: {agent}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: {auth}\r\n{agent}\r\n"
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut head = Vec::with_capacity(128);
    let mut buf = [0u8; 256];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    (head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200")).then_some(stream)
}

/// CONNECT setups per second: connect, CONNECT, read the 200, close.
async fn connect_load(
    proxy: SocketAddr,
    credentials: &str,
    target: &str,
    concurrency: usize,
    seconds: u64,
) {
    let auth = basic(credentials);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut workers = tokio::task::JoinSet::new();
    let targets: Vec<String> = target.split(',').map(str::to_owned).collect();
    for worker in 0..concurrency {
        let (auth, targets) = (auth.clone(), targets.clone());
        let mut turn = worker;
        workers.spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0;
            while Instant::now() < deadline {
                let started = Instant::now();
                turn += 1;
                let target = &targets[turn % targets.len()];
                match open_tunnel(proxy, &auth, target).await {
                    Some(stream) => {
                        latencies.push(started.elapsed().as_micros() as u32);
                        drop(stream);
                    }
                    None => errors += 1,
                }
            }
            (latencies, errors)
        });
    }
    report(workers, seconds).await;
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Opens `count` idle tunnels through `proxy` and reports `pid`'s memory per tunnel.
async fn hold(proxy: SocketAddr, credentials: &str, target: &str, count: usize, pid: u32) {
    let auth = basic(credentials);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    let mut open = Vec::with_capacity(count);
    let mut failed = 0;
    let started = Instant::now();
    while open.len() + failed < count {
        let batch = (count - open.len() - failed).min(200);
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..batch {
            let targets: Vec<&str> = target.split(',').collect();
            let (auth, target) = (
                auth.clone(),
                targets[(open.len() + i) % targets.len()].to_owned(),
            );
            tasks.spawn(async move { open_tunnel(proxy, &auth, &target).await });
        }
        while let Some(result) = tasks.join_next().await {
            match result.unwrap() {
                Some(stream) => open.push(stream),
                None => failed += 1,
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid);
    let per = if open.is_empty() {
        0.0
    } else {
        (after.saturating_sub(before) as f64 * 1024.0) / open.len() as f64
    };
    println!(
        "tunnels={} failed={} open_secs={:.1} rss_before_kib={before} rss_after_kib={after} bytes_per_tunnel={per:.0}",
        open.len(),
        failed,
        started.elapsed().as_secs_f64()
    );
}

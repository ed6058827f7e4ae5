//! Upstream proxies and origins for the tests, each on loopback.
//!
//! Most tests use proxypool-sim's upstream proxies (each leaving from its own `127.0.0.x`
//! exit) and its origin (which echoes the exit it saw). One interop test also runs
//! third-party proxies from Debian (tinyproxy for HTTP with Basic auth, microsocks for
//! SOCKS5 with username/password) with a plain echo origin. HTTPS origins are
//! `openssl s_server` with a certificate made for the test.

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use proxypool_sim::{ProxyKind, UpstreamProxy, UpstreamProxyConfig};
use proxypool_testkit::eventually_async;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

pub const UPSTREAM_USER: &str = "vendor";
pub const UPSTREAM_PASS: &str = "vendor-pass";

/// Installs tinyproxy, microsocks, openssl and curl when missing (tests run as root in
/// CI). Once per test process: parallel tests must not race for the dpkg lock.
pub fn ensure_tools() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(install_missing_tools);
}

fn install_missing_tools() {
    let missing: Vec<&str> = ["tinyproxy", "microsocks", "openssl", "curl"]
        .into_iter()
        .filter(|tool| {
            !std::process::Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    // Like scripts/test.sh: keep the packages' own services (tinyproxy on :8888) from
    // starting, via a policy-rc.d that says "not allowed" while apt runs.
    let script = format!(
        "set -e; policy=/usr/sbin/policy-rc.d; made=no; \
         if [ ! -e $policy ]; then printf '#!/bin/sh\\nexit 101\\n' > $policy; chmod +x $policy; made=yes; fi; \
         (apt-get install -y {0} || (apt-get update && apt-get install -y {0})) >/dev/null 2>&1 || status=$?; \
         if [ $made = yes ]; then rm -f $policy; fi; exit ${{status:-0}}",
        missing.join(" ")
    );
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "these tests need {missing:?} (apt-get install -y {})",
        missing.join(" ")
    );
}

/// A simulated upstream proxy of `kind` with the test credentials, leaving from `exit`.
pub async fn sim_upstream(kind: ProxyKind, exit: Ipv4Addr) -> UpstreamProxy {
    UpstreamProxy::start(UpstreamProxyConfig {
        kind,
        exit_ip: exit,
        credentials: Some((UPSTREAM_USER.into(), UPSTREAM_PASS.into())),
        ..UpstreamProxyConfig::default()
    })
    .await
    .expect("sim upstream starts")
}

/// The exit address in a sim origin's JSON answer (or the raw text of a plain echo).
pub fn exit_of(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("exit").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| body.trim().to_owned())
}

/// A free loopback port (released again; the caller's program binds it), never one
/// this process handed out before.
pub fn free_port() -> u16 {
    proxypool_testkit::free_port()
}

/// An address nothing listens on (for dead upstreams).
pub fn dead_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// Up to 10 s for a program to listen: a third-party daemon starting on a loaded 2-core
/// machine can be slow.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits for `addr` to accept, giving up early (false) when `child` exits.
async fn listening_while_alive(addr: SocketAddr, child: &mut Child) -> bool {
    let what = format!("{addr} to accept");
    eventually_async(&what, START_TIMEOUT, async || {
        if TcpStream::connect(addr).await.is_ok() {
            return Some(true);
        }
        matches!(child.try_wait(), Ok(Some(_))).then_some(false)
    })
    .await
}

async fn wait_listening(addr: SocketAddr) {
    let what = format!("{addr} to start listening");
    eventually_async(&what, START_TIMEOUT, async || {
        TcpStream::connect(addr).await.is_ok().then_some(())
    })
    .await;
}

fn scratch_dir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "gw-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running third-party proxy; killed on drop.
#[derive(Debug)]
pub struct Upstream {
    pub addr: SocketAddr,
    child: Child,
    dir: Option<PathBuf>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Upstream {
    /// tinyproxy with Basic auth, leaving from `exit`.
    pub async fn http(exit: Ipv4Addr) -> Self {
        ensure_tools();
        let port = free_port();
        let dir = scratch_dir("tinyproxy");
        let conf = dir.join("tinyproxy.conf");
        std::fs::write(
            &conf,
            format!(
                "Port {port}\nListen 127.0.0.1\nBind {exit}\nTimeout 30\nMaxClients 2000\n\
                 BasicAuth {UPSTREAM_USER} {UPSTREAM_PASS}\nAllow 127.0.0.1\nLogLevel Critical\n\
                 DisableViaHeader Yes\nPidFile \"{}\"\n",
                dir.join("pid").display()
            ),
        )
        .unwrap();
        let child = Command::new("tinyproxy")
            .args(["-d", "-c"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("tinyproxy starts");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        wait_listening(addr).await;
        Self {
            addr,
            child,
            dir: Some(dir),
        }
    }

    /// microsocks with username/password, leaving from `exit`.
    pub async fn socks5(exit: Ipv4Addr) -> Self {
        ensure_tools();
        let port = free_port();
        let child = Command::new("microsocks")
            .args(["-i", "127.0.0.1", "-p", &port.to_string()])
            .args([
                "-u",
                UPSTREAM_USER,
                "-P",
                UPSTREAM_PASS,
                "-b",
                &exit.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("microsocks starts");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        wait_listening(addr).await;
        Self {
            addr,
            child,
            dir: None,
        }
    }
}

/// An origin that answers every request with the address it saw the request come from,
/// or with the status its ban list gives that address (a site banning some exits).
#[derive(Debug)]
pub struct EchoOrigin {
    pub addr: SocketAddr,
    /// Exit address → the status it is answered (403, 429, ...) instead of the echo.
    pub bans: Arc<Mutex<HashMap<IpAddr, u16>>>,
    /// Requests seen per exit address, banned or not.
    pub hits: Arc<Mutex<HashMap<IpAddr, u32>>>,
    task: tokio::task::JoinHandle<()>,
}

impl EchoOrigin {
    pub async fn start() -> Self {
        Self::start_on(Ipv4Addr::LOCALHOST).await
    }

    /// An echo origin on `ip` (any `127.0.0.0/8` address: another host name for the
    /// gateway, as each IP literal is a domain of its own).
    pub async fn start_on(ip: Ipv4Addr) -> Self {
        let listener = TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let bans: Arc<Mutex<HashMap<IpAddr, u16>>> = Arc::default();
        let hits: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
        let (bans_in, hits_in) = (Arc::clone(&bans), Arc::clone(&hits));
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                let (bans, hits) = (Arc::clone(&bans_in), Arc::clone(&hits_in));
                tokio::spawn(async move {
                    let service = service_fn(move |_request| {
                        *hits.lock().unwrap().entry(peer.ip()).or_default() += 1;
                        let banned = bans.lock().unwrap().get(&peer.ip()).copied();
                        async move {
                            let mut response =
                                hyper::Response::new(Full::new(Bytes::from(peer.ip().to_string())));
                            if let Some(status) = banned {
                                *response.status_mut() =
                                    hyper::StatusCode::from_u16(status).unwrap();
                            }
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            bans,
            hits,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Answers requests from `exit` with `status` from now on.
    pub fn ban(&self, exit: Ipv4Addr, status: u16) {
        self.bans.lock().unwrap().insert(IpAddr::V4(exit), status);
    }

    /// Requests seen from `exit` so far.
    pub fn hits_from(&self, exit: Ipv4Addr) -> u32 {
        self.hits
            .lock()
            .unwrap()
            .get(&IpAddr::V4(exit))
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for EchoOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `openssl s_server` with a self-signed certificate made for the test.
#[derive(Debug)]
pub struct TlsOrigin {
    pub addr: SocketAddr,
    child: Child,
    dir: PathBuf,
}

impl TlsOrigin {
    pub async fn start() -> Self {
        ensure_tools();
        let dir = scratch_dir("tls");
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let made = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl runs");
        assert!(made.success(), "self-signed certificate");
        // A port picked free can be taken by a parallel test before s_server binds it, and
        // then s_server exits: start it again on another port.
        for _ in 0..3 {
            let port = free_port();
            let mut child = Command::new("openssl")
                .args([
                    "s_server",
                    "-quiet",
                    "-www",
                    "-accept",
                    &port.to_string(),
                    "-cert",
                ])
                .arg(&cert)
                .arg("-key")
                .arg(&key)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("openssl s_server starts");
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            if listening_while_alive(addr, &mut child).await {
                return Self { addr, child, dir };
            }
            let _ = child.kill().await;
        }
        panic!("openssl s_server never started listening");
    }
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TCP server that echoes every byte, on as many connections as come, and closes a
/// connection when its client does (so a closed tunnel ends both ways).
pub async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = stream.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    addr
}

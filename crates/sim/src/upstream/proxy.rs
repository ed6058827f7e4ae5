//! [`UpstreamProxy`]: starting one simulated upstream proxy, and its handle (identity,
//! stats and the live fault knobs).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;

use super::backconnect::{Backconnect, BackconnectConfig};
use super::kind::ProxyKind;
use super::shared::Shared;
use super::stats::{Counters, UpstreamStats};
use super::{http, socks};
use crate::faults::FaultDice;
use crate::shutdown::{Shutdown, spawn_until};

/// How to start an [`UpstreamProxy`].
#[derive(Clone, Debug)]
pub struct UpstreamProxyConfig {
    /// Protocol spoken to clients.
    pub kind: ProxyKind,
    /// Address to listen on (port chosen by the OS).
    pub listen_ip: Ipv4Addr,
    /// Source address of outgoing connections: what the origin sees.
    pub exit_ip: Ipv4Addr,
    /// Required `(username, password)`; `None` = open proxy.
    pub credentials: Option<(String, String)>,
    /// Added before each handshake answer / forwarded request.
    pub latency: Duration,
    /// Probability (0.0..=1.0, clamped) that a request fails, rolled from `seed`.
    pub failure_rate: f64,
    /// Seed of the failure dice.
    pub seed: u64,
    /// Start dead (accepts and closes every connection).
    pub dead: bool,
    /// Label only: what the vendor lists as region.
    pub region: Option<String>,
    /// Label only: what the vendor lists as carrier.
    pub carrier: Option<String>,
    /// `Http` only: speak TLS first with this configuration (an HTTPS proxy).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Be a backconnect gateway (the username picks the exit; `credentials` and
    /// `exit_ip` are then unused).
    pub backconnect: Option<BackconnectConfig>,
}

impl Default for UpstreamProxyConfig {
    fn default() -> Self {
        Self {
            kind: ProxyKind::Http,
            listen_ip: Ipv4Addr::LOCALHOST,
            exit_ip: Ipv4Addr::LOCALHOST,
            credentials: None,
            latency: Duration::ZERO,
            failure_rate: 0.0,
            seed: 0,
            dead: false,
            region: None,
            carrier: None,
            tls: None,
            backconnect: None,
        }
    }
}

/// A running upstream proxy. Dropping it (or [`UpstreamProxy::shutdown`]) closes the
/// listener and every connection and tunnel it carries.
#[derive(Debug)]
pub struct UpstreamProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Shutdown,
}

impl UpstreamProxy {
    /// Binds `listen_ip:0` and starts serving. Fails if the address cannot be bound.
    pub async fn start(config: UpstreamProxyConfig) -> io::Result<Self> {
        let listener = TcpListener::bind((config.listen_ip, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            kind: config.kind,
            tls: config.tls.is_some(),
            exit_ip: config.exit_ip,
            credentials: config.credentials,
            region: config.region,
            carrier: config.carrier,
            dead: AtomicBool::new(config.dead),
            latency_us: AtomicU64::new(duration_us(config.latency)),
            dice: FaultDice::new(config.seed, config.failure_rate),
            counters: Counters::default(),
            backconnect: config.backconnect.clone().map(Backconnect::new),
        });
        let shutdown = Shutdown::new();
        let signal = shutdown.signal();
        let serving = Arc::clone(&shared);
        match config.kind {
            ProxyKind::Http => spawn_until(
                &signal,
                http::serve(listener, signal.clone(), serving, config.tls.clone()),
            ),
            ProxyKind::Socks5 => {
                spawn_until(&signal, socks::serve(listener, signal.clone(), serving))
            }
        }
        Ok(Self {
            addr,
            shared,
            shutdown,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The protocol it speaks.
    pub fn kind(&self) -> ProxyKind {
        self.shared.kind
    }

    /// The source address of its outgoing connections.
    pub fn exit_ip(&self) -> Ipv4Addr {
        self.shared.exit_ip
    }

    /// The credentials it requires, if any.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.shared
            .credentials
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// Its region label.
    pub fn region(&self) -> Option<&str> {
        self.shared.region.as_deref()
    }

    /// Its carrier label.
    pub fn carrier(&self) -> Option<&str> {
        self.shared.carrier.as_deref()
    }

    /// A proxy URL for curl's `-x` / `--proxy`, credentials included:
    /// `http://user:pass@127.0.0.1:port`, `https://...` or `socks5h://...`.
    pub fn url(&self) -> String {
        let scheme = match self.shared.kind {
            ProxyKind::Http if self.shared.tls => "https",
            ProxyKind::Http => "http",
            ProxyKind::Socks5 => "socks5h",
        };
        match self.credentials() {
            Some((user, pass)) => format!("{scheme}://{user}:{pass}@{}", self.addr),
            None => format!("{scheme}://{}", self.addr),
        }
    }

    /// A backconnect gateway's sessions alive now (0 for a plain proxy).
    pub fn live_sessions(&self) -> usize {
        self.shared
            .backconnect
            .as_ref()
            .map_or(0, Backconnect::live_sessions)
    }

    /// How many connections of a backconnect gateway named each country.
    pub fn countries(&self) -> std::collections::HashMap<String, u64> {
        self.shared
            .backconnect
            .as_ref()
            .map(Backconnect::countries)
            .unwrap_or_default()
    }

    /// How many connections of a backconnect gateway named each state, city or ASN, as
    /// `key-value` written in the username (`city-new+york`).
    pub fn places(&self) -> std::collections::HashMap<String, u64> {
        self.shared
            .backconnect
            .as_ref()
            .map(Backconnect::places)
            .unwrap_or_default()
    }

    /// Counters so far.
    pub fn stats(&self) -> UpstreamStats {
        self.shared.counters.snapshot()
    }

    /// Fault injection: a dead proxy accepts TCP connections and closes them at once.
    /// Tunnels already open stay open.
    pub fn set_dead(&self, dead: bool) {
        self.shared.dead.store(dead, Ordering::Relaxed);
    }

    /// Whether it is dead.
    pub fn is_dead(&self) -> bool {
        self.shared.dead.load(Ordering::Relaxed)
    }

    /// Changes the latency added before each answer.
    pub fn set_latency(&self, latency: Duration) {
        self.shared
            .latency_us
            .store(duration_us(latency), Ordering::Relaxed);
    }

    /// The latency added before each answer.
    pub fn latency(&self) -> Duration {
        self.shared.latency()
    }

    /// The failure probability.
    pub fn failure_rate(&self) -> f64 {
        self.shared.dice.rate()
    }

    /// Changes the failure probability (clamped to 0.0..=1.0).
    pub fn set_failure_rate(&self, rate: f64) {
        self.shared.dice.set_rate(rate);
    }

    /// Stops listening and ends every connection now (also done on drop).
    pub fn shutdown(&self) {
        self.shutdown.trigger();
    }
}

fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

//! [`Shared`]: the state an upstream proxy's handle shares with its connection tasks
//! (identity, credentials or a backconnect gateway's sessions, and the live fault knobs), and what both accept loops do with
//! a connection (`admit`, then `relay` once the tunnel is up).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::TcpStream;

use super::backconnect::Backconnect;
use super::kind::ProxyKind;
use super::stats::Counters;
use crate::faults::FaultDice;

/// State shared by the handle and the connection tasks.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) kind: ProxyKind,
    /// Speaks TLS first (an HTTPS proxy).
    pub(super) tls: bool,
    pub(super) exit_ip: Ipv4Addr,
    pub(super) credentials: Option<(String, String)>,
    pub(super) region: Option<String>,
    pub(super) carrier: Option<String>,
    pub(super) dead: AtomicBool,
    pub(super) latency_us: AtomicU64,
    pub(super) dice: FaultDice,
    pub(super) counters: Counters,
    /// A backconnect gateway: the username picks the exit.
    pub(super) backconnect: Option<Backconnect>,
}

impl Shared {
    /// Whether a client must authenticate.
    pub(super) fn requires_auth(&self) -> bool {
        self.credentials.is_some() || self.backconnect.is_some()
    }

    /// The exit for a client with these credentials (`None`: refused): a backconnect
    /// gateway's pick, else the proxy's own exit when the credentials match (or none are
    /// required).
    pub(super) fn exit_for(&self, credentials: Option<(&str, &str)>) -> Option<Ipv4Addr> {
        if let Some(backconnect) = &self.backconnect {
            let (user, pass) = credentials?;
            return backconnect.exit_for(user, pass);
        }
        let allowed = match (&self.credentials, credentials) {
            (None, _) => true,
            (Some((u, p)), Some((user, pass))) => u == user && p == pass,
            (Some(_), None) => false,
        };
        allowed.then_some(self.exit_ip)
    }

    pub(super) fn latency(&self) -> Duration {
        Duration::from_micros(self.latency_us.load(Ordering::Relaxed))
    }

    /// Waits the configured latency (if any): the "slow proxy" knob.
    pub(super) async fn delay(&self) {
        let latency = self.latency();
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
    }
}

/// Counts an accepted connection and, when dead, drops it: the first filter of both
/// accept loops.
pub(super) fn admit(shared: &Shared, stream: TcpStream) -> Option<TcpStream> {
    shared.counters.accepted.fetch_add(1, Ordering::Relaxed);
    if shared.dead.load(Ordering::Relaxed) {
        shared.counters.dead_drops.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    let _ = stream.set_nodelay(true);
    Some(stream)
}

/// Copies both ways until either side closes; errors just end the tunnel.
pub(super) async fn relay<A, B>(mut a: A, mut b: B)
where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
}

//! [`Shared`]: the state an upstream proxy's handle shares with its connection tasks
//! (identity, credentials and the live fault knobs), and what both accept loops do with
//! a connection (`admit`, then `relay` once the tunnel is up).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::TcpStream;

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
}

impl Shared {
    pub(super) fn credentials_ok(&self, user: &str, pass: &str) -> bool {
        self.credentials
            .as_ref()
            .is_none_or(|(u, p)| u == user && p == pass)
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

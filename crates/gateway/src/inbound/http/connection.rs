//! [`ConnectionState`]: what the requests of one HTTP connection share — the peer, the
//! shield it was admitted by and the verdict charged at accept, the last credentials
//! verified on it, its requests in flight, the per-IP and global slots a `CONNECT`
//! tunnel takes along, on the TLS listener the client certificate's names, and on the
//! fleet listener the member that relays its requests.

use crate::inbound::accept::ShieldAtAccept;
use crate::inbound::client_cert::ClientCertificate;
use crate::policy::limits::Shield;
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use http::HeaderValue;
use proxypool_core::{LockExt, WorkerId};
use proxypool_edge::Admitted;
use proxypool_edge::ConnectionMark;
use proxypool_throttle::ConnectionScopes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Per-connection state shared by the connection's requests.
#[derive(Debug)]
pub(super) struct ConnectionState {
    pub(super) peer: SocketAddr,
    /// The shield this connection was admitted by, and its scopes in it.
    pub(super) shield: Option<(Arc<Shield>, Mutex<ConnectionScopes>)>,
    /// The shield's verdict charged at accept, for the connection's first request.
    pub(super) prepaid: Mutex<Option<Result<(), Refusal>>>,
    /// The last credentials verified on this connection, for the view they were checked in.
    pub(super) auth: Mutex<Option<CachedAuth>>,
    pub(super) in_flight: AtomicUsize,
    /// What the connection tells the global cap: busy from its first byte (the connection's
    /// IO marks every read, so a next head being read counts), while a request is in
    /// flight or a tunnel holds its slots; idle between requests.
    pub(super) mark: Arc<ConnectionMark>,
    /// The connection's per-IP and global slots; a CONNECT tunnel takes them along.
    pub(super) permit: Mutex<Option<Admitted>>,
    /// The certificate the client presented to the TLS listener (mutual TLS), if any.
    pub(super) certificate: Option<ClientCertificate>,
    /// The fleet member whose hop this is (the fleet listener, after the pin check): its
    /// requests name their client in `Proxypool-Fleet-*` headers.
    pub(super) fleet_peer: Option<WorkerId>,
}

impl ConnectionState {
    pub(super) fn new(
        peer: SocketAddr,
        permit: Admitted,
        shield: ShieldAtAccept,
        certificate: Option<ClientCertificate>,
        fleet_peer: Option<WorkerId>,
    ) -> Self {
        Self {
            peer,
            shield: shield
                .shield
                .map(|(shield, scopes)| (shield, Mutex::new(scopes))),
            prepaid: Mutex::new(Some(shield.verdict)),
            auth: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            mark: Arc::clone(permit.mark()),
            permit: Mutex::new(Some(permit)),
            certificate,
            fleet_peer,
        }
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// A request started: the connection is busy until its last request ends.
    pub(super) fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.mark.busy();
    }

    /// A request ended; the last one leaves the connection idle, unless a tunnel took its
    /// slots (a tunnel stays busy for its life).
    pub(super) fn request_ended(&self) {
        if self.in_flight.fetch_sub(1, Ordering::Relaxed) == 1
            && self.permit.lock_or_recover().is_some()
        {
            self.mark.idle();
        }
    }

    /// The connection's slots, for a tunnel that outlives the connection's task.
    pub(super) fn take_permit(&self) -> Option<Admitted> {
        let permit = self.permit.lock_or_recover().take();
        self.mark.busy();
        permit
    }
}

#[derive(Debug)]
pub(super) struct CachedAuth {
    pub(super) generation: u64,
    pub(super) header: HeaderValue,
    pub(super) auth: Authenticated,
}

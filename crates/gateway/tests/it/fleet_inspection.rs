//! Inspected tunnels in a fleet: three gateways ([`crate::common::fleet`]) with TLS
//! inspection on, all minting their leaves from the same CA, in front of an https sim
//! origin. A keyed `CONNECT` is relayed to its owner before anything looks at inspection,
//! so the owner ends the tunnel with its own leaf and routes the requests inside with its
//! sessions: a session keeps one proxy and exit, and is served one leaf (the owner's),
//! through every gateway. A tunnel without a key is ended and served where it lands.

use crate::common::fleet::Fleet;
use crate::common::inspection::{GatewayCa, InnerResponse, ORIGIN_HOSTS, tls_origin, tunnel};
use crate::common::upstreams::exit_of;
use crate::common::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use proxypool_core::control::{GatewayClient, Inspection};
use proxypool_testkit::tls::TestCa;
use rustls::pki_types::CertificateDer;

/// The host every tunnel goes to (the origin's certificate names it).
const HOST: &str = ORIGIN_HOSTS[0];

/// A fleet whose members inspect every tunnel of `alice` with the one CA [`Self::ca`].
struct Setup {
    fleet: Fleet,
    ca: GatewayCa,
    _origin_ca: TestCa,
}

/// What one fresh inspected tunnel showed: the leaf it was ended with, and the answer
/// to one `GET` inside it.
struct Inspected {
    leaf: CertificateDer<'static>,
    response: InnerResponse,
}

impl Inspected {
    fn exit(&self) -> String {
        exit_of(&self.response.body)
    }

    fn proxy(&self) -> &str {
        self.response
            .header("x-proxypool-proxy")
            .unwrap_or_else(|| panic!("no proxy named: {:?}", self.response))
    }
}

impl Setup {
    /// Three inspecting gateways whose exits start at 127.0.0.`first_exit`.
    async fn start(first_exit: u8) -> Self {
        let origin_ca = TestCa::new("origin-ca").unwrap();
        let origin = tls_origin(&origin_ca).await;
        let ca = GatewayCa::new("fleet inspection CA");
        let inspection = ca.config(origin_ca.ca_path(), &[], 64);
        let alice = GatewayClient {
            inspection: Inspection::On,
            ..client("alice")
        };
        let fleet = Fleet::start_with(first_exit, origin, vec![alice], |config| {
            config.inspection = Some(inspection.clone());
        })
        .await;
        Setup {
            fleet,
            ca,
            _origin_ca: origin_ca,
        }
    }

    /// A fresh tunnel as `user` through member `at` to [`HOST`], TLS inside trusting the
    /// fleet's CA only (so the leaf must be valid for the host), and one `GET /` in it.
    async fn get(&self, at: usize, user: &str) -> Inspected {
        let gateway = self.fleet.members[at].gateway().http;
        let authority = format!("{HOST}:{}", self.fleet.origin.addr().port());
        let tls = tunnel(gateway, user, &authority, &self.ca.der)
            .await
            .unwrap_or_else(|e| panic!("{user} at {at}: {e}"));
        let leaf = tls.get_ref().1.peer_certificates().unwrap()[0]
            .clone()
            .into_owned();
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(connection);
        let request = http::Request::get("/")
            .header(http::header::HOST, &authority)
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let response = InnerResponse {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        };
        assert_eq!(response.status, 200, "{user} at {at}: {response:?}");
        Inspected { leaf, response }
    }

    /// Member `at`'s own leaf for [`HOST`]: the one a keyless tunnel there is served.
    async fn own_leaf(&self, at: usize) -> CertificateDer<'static> {
        self.get(at, "alice").await.leaf
    }

    async fn shutdown(self) {
        self.fleet.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspected_session_is_ended_by_its_owner_and_keeps_its_exit_through_every_gateway() {
    let s = Setup::start(140).await;
    let user = "alice-session-s1";
    let first = s.get(0, user).await;
    assert_eq!(
        first.response.header("x-proxypool-session"),
        Some("new"),
        "{:?}",
        first.response
    );
    let exit = first.exit();
    let owner = s.fleet.owner_of_exit(&exit);
    for round in 0..3 {
        for at in 0..3 {
            let got = s.get(at, user).await;
            assert_eq!(got.exit(), exit, "round {round} at {at}");
            assert_eq!(got.proxy(), first.proxy(), "round {round} at {at}");
            assert_eq!(
                got.response.header("x-proxypool-session"),
                Some("pinned"),
                "round {round} at {at}: {:?}",
                got.response
            );
            // Ended by the owner wherever it landed: the owner's cached leaf.
            assert!(
                got.leaf == first.leaf,
                "round {round} at {at}: another leaf"
            );
        }
    }
    // That leaf is the owner's own, and another member's differs (each mints its own).
    assert!(
        s.own_leaf(owner).await == first.leaf,
        "not the owner's leaf"
    );
    let other = (owner + 1) % 3;
    assert!(
        s.own_leaf(other).await != first.leaf,
        "member {other} serves the owner's leaf"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_inspected_sessions_of_different_owners_each_keep_their_own_exit() {
    let s = Setup::start(150).await;
    // Two sessions whose owners differ, found by the exits their first tunnels got.
    let mut sessions: Vec<(String, Inspected, usize)> = Vec::new();
    for n in 0..64 {
        let user = format!("alice-session-p{n}");
        let first = s.get(0, &user).await;
        let owner = s.fleet.owner_of_exit(&first.exit());
        if sessions.iter().all(|(_, _, other)| *other != owner) {
            sessions.push((user, first, owner));
        }
        if sessions.len() == 2 {
            break;
        }
    }
    assert_eq!(sessions.len(), 2, "two sessions of different owners");
    assert_ne!(sessions[0].1.exit(), sessions[1].1.exit());
    for round in 0..2 {
        for at in 0..3 {
            for (user, first, owner) in &sessions {
                let got = s.get(at, user).await;
                assert_eq!(
                    got.exit(),
                    first.exit(),
                    "{user} (owner {owner}) round {round} at {at}"
                );
                assert_eq!(got.proxy(), first.proxy(), "{user} round {round} at {at}");
                assert!(got.leaf == first.leaf, "{user} round {round} at {at}");
            }
        }
    }
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspected_tunnel_without_a_session_is_served_where_it_lands() {
    let s = Setup::start(160).await;
    let mut leaves: Vec<CertificateDer<'static>> = Vec::new();
    for at in 0..3 {
        for n in 0..3 {
            let got = s.get(at, "alice").await;
            let exit = got.exit();
            assert!(
                s.fleet.members[at].exits.contains(&exit),
                "{exit} is not gateway {at}'s own (tunnel {n})"
            );
            match leaves.get(at) {
                Some(leaf) => assert!(got.leaf == *leaf, "gateway {at} changed its leaf"),
                None => leaves.push(got.leaf),
            }
        }
    }
    // Each gateway ended its own tunnels, with its own leaf.
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        assert!(leaves[a] != leaves[b], "gateways {a} and {b} share a leaf");
    }
    s.shutdown().await;
}

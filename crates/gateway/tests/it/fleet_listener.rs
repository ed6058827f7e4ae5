//! The fleet listener (`[gateway.fleet]`): the owner's side of the hop. A member (this
//! test, with a certificate of its own whose pin it lists as a member's) connects over TLS
//! pinned both ways and sends absolute-form requests and `CONNECT`s naming their client in
//! `Proxypool-Fleet-*` headers, served as that client's without charging its rate limit;
//! a certificate that is no member's, or none, is closed at the handshake; a client the
//! owner does not know is refused; and on the ordinary listener those headers stand for
//! nothing.

use crate::common::control::TestController;
use crate::common::upstreams::{EchoOrigin, UPSTREAM_PASS, UPSTREAM_USER, free_port, sim_upstream};
use crate::common::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use proxypool_core::fleet::{FleetEndpoint, FleetMember};
use proxypool_core::{Protocol, WorkerId, now_millis};
use proxypool_gateway::{FleetConfig, PROXY_HEADER, SESSION_HEADER};
use proxypool_sim::{ProxyKind, UpstreamProxy};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

const EXIT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 71);

/// The member this test speaks as.
const PEER: &str = "gw-peer";

const UNKNOWN_PEERS: &str = "proxypool_gateway_fleet_hop_refusals_total{reason=\"unknown_peer\"}";
const HANDSHAKES: &str = "proxypool_gateway_fleet_hop_refusals_total{reason=\"handshake\"}";

/// A certificate and key of the test's own, and its pin.
struct Identity {
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
    pin: String,
}

impl Identity {
    fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let cert = cert.der().clone();
        let pin = pin_of(&cert);
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Identity { cert, key, pin }
    }
}

/// Lowercase hex SHA-256 of a certificate's SubjectPublicKeyInfo, computed here
/// independently of the gateway (x509-parser for the SPKI, ring's SHA-256 through rustls).
fn pin_of(cert: &CertificateDer<'_>) -> String {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).unwrap();
    let rustls::SupportedCipherSuite::Tls13(suite) =
        rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
    else {
        unreachable!()
    };
    let digest = suite
        .common
        .hash_provider
        .hash(parsed.tbs_certificate.subject_pki.raw);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Accepts exactly the server certificate of pin `expected`.
#[derive(Debug)]
struct Pinned {
    expected: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if pin_of(end_entity) == self.expected {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::CertificateError::ApplicationVerificationFailure.into())
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.3 only".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The hop's TLS toward the gateway of pin `gateway_pin`, showing `identity` (or no
/// certificate).
fn hop_tls(gateway_pin: &str, identity: Option<&Identity>) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            expected: gateway_pin.to_owned(),
            provider,
        }));
    let mut config = match identity {
        Some(identity) => builder
            .with_client_auth_cert(vec![identity.cert.clone()], identity.key.clone_key())
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"proxypool-fleet/1".to_vec()];
    Arc::new(config)
}

/// A gateway with a fleet listener, the test's member identity listed beside it, an echo
/// origin and an upstream proxy.
struct Fleet {
    running: Running,
    controller: Arc<TestController>,
    fleet: SocketAddr,
    endpoint: FleetEndpoint,
    member: Identity,
    origin: EchoOrigin,
    _upstream: UpstreamProxy,
}

impl Fleet {
    async fn start() -> Self {
        let origin = EchoOrigin::start().await;
        let upstream = sim_upstream(ProxyKind::Http, EXIT).await;
        let controller = TestController::start(WORKER, 3_600_000).await;
        controller.state.lock().unwrap().report_interval_ms = 200;
        controller.publish(
            vec![proxy(
                1,
                Protocol::Http,
                upstream.addr(),
                Some((UPSTREAM_USER, UPSTREAM_PASS)),
                "vendor",
                "us",
            )],
            vec![client("alice"), limited_client("slow", 1.0, 1.0, 60_000)],
        );
        let fleet = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut config = config(&controller);
        config.fleet = Some(FleetConfig::new(fleet));
        with_operator_token(&mut config);
        let running = Running::start(config).await;
        acked(&controller, 1).await;
        let endpoint = {
            let controller = Arc::clone(&controller);
            eventually_async(
                "a report naming the fleet endpoint",
                Duration::from_secs(10),
                async || controller.last_fleet_endpoint(),
            )
            .await
        };
        assert_eq!(endpoint.address, fleet.to_string(), "advertise = listen");
        let member = Identity::new("proxypool-fleet-gw-peer");
        let since_ms = now_millis();
        controller.set_fleet(vec![
            FleetMember {
                worker: WorkerId::new(PEER).unwrap(),
                address: "127.0.0.1:9".into(),
                spki_sha256: member.pin.clone(),
                since_ms,
            },
            FleetMember {
                worker: WorkerId::new(WORKER).unwrap(),
                address: endpoint.address.clone(),
                spki_sha256: endpoint.spki_sha256.clone(),
                since_ms,
            },
        ]);
        Fleet {
            running,
            controller,
            fleet,
            endpoint,
            member,
            origin,
            _upstream: upstream,
        }
    }

    /// A TLS connection to the fleet listener showing `identity`.
    async fn dial(&self, identity: Option<&Identity>) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(self.fleet).await?;
        let name = ServerName::try_from("fleet.invalid").unwrap();
        TlsConnector::from(hop_tls(&self.endpoint.spki_sha256, identity))
            .connect(name, tcp)
            .await
    }

    /// An HTTP/1.1 client over a hop as the member.
    async fn hop(&self) -> SendRequest<Empty<Bytes>> {
        let tls = self
            .dial(Some(&self.member))
            .await
            .expect("the member's hop connects");
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(connection);
        sender
    }

    async fn metric(&self, series: &str) -> f64 {
        metric(&self.running, series).await.unwrap_or(0.0)
    }

    /// The requests the gateway's reports count for `client` so far.
    fn reported_requests(&self, client: &str) -> u64 {
        let state = self.controller.state.lock().unwrap();
        state
            .reports
            .iter()
            .rev()
            .find_map(|report| report.usage.as_ref())
            .map_or(0, |usage| {
                usage
                    .entries
                    .iter()
                    .filter(|entry| entry.client.as_str() == client)
                    .map(|entry| entry.counters.requests)
                    .sum()
            })
    }
}

/// An absolute-form GET of `url` with the fleet headers for `username`.
fn hop_get(url: &str, client: &str, username: &str) -> hyper::Request<Empty<Bytes>> {
    hyper::Request::get(url)
        .header("proxypool-fleet-client", client)
        .header("proxypool-fleet-username", username)
        .header("proxypool-fleet-peer", "203.0.113.9:4711")
        .body(Empty::new())
        .unwrap()
}

/// Sends `request` and reads the whole answer: status, headers, body.
async fn exchange(
    sender: &mut SendRequest<Empty<Bytes>>,
    request: hyper::Request<Empty<Bytes>>,
) -> (u16, hyper::HeaderMap, String) {
    sender.ready().await.unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
        .await
        .expect("an answer within 10 s")
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// Whether the server closes `tls` (EOF or an error) within 5 s without serving it.
async fn closed(mut tls: TlsStream<TcpStream>) -> bool {
    let _ = tls
        .write_all(b"GET http://127.0.0.1/ HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await;
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_hop_is_served_as_the_named_client() {
    let fleet = Fleet::start().await;
    let mut hop = fleet.hop().await;
    let (status, headers, body) =
        exchange(&mut hop, hop_get(&fleet.origin.url(), "alice", "alice")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, EXIT.to_string(), "through the upstream proxy");
    assert!(
        headers.contains_key(PROXY_HEADER),
        "the answer names the proxy"
    );
    eventually(
        Duration::from_secs(10),
        "one request reported for alice",
        || fleet.reported_requests("alice") == 1,
    )
    .await;

    // A session: new on the first use, and reassigned when the key moved here.
    let session = |id: &str, moved: bool| {
        let mut request = hop_get(&fleet.origin.url(), "alice", &format!("alice-session-{id}"));
        if moved {
            request
                .headers_mut()
                .insert("proxypool-fleet-moved", "1".parse().unwrap());
        }
        request
    };
    let (status, headers, _) = exchange(&mut hop, session("s1", false)).await;
    assert_eq!(status, 200);
    assert_eq!(headers[SESSION_HEADER], "new");
    let (_, headers, _) = exchange(&mut hop, session("s1", false)).await;
    assert_eq!(headers[SESSION_HEADER], "pinned");
    let (_, headers, _) = exchange(&mut hop, session("s2", true)).await;
    assert_eq!(
        headers[SESSION_HEADER], "reassigned",
        "a moved key had a proxy elsewhere"
    );

    // A CONNECT on a hop of its own: the tunnel reaches the origin through the proxy.
    let mut tunnel = fleet.dial(Some(&fleet.member)).await.unwrap();
    let head = format!(
        "CONNECT {0} HTTP/1.1\r\nhost: {0}\r\nproxypool-fleet-client: alice\r\n\
         proxypool-fleet-username: alice\r\nproxypool-fleet-peer: 203.0.113.9:4711\r\n\r\n",
        fleet.origin.addr
    );
    tunnel.write_all(head.as_bytes()).await.unwrap();
    let answer = read_head(&mut tunnel).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains(PROXY_HEADER),
        "{answer}"
    );
    tunnel
        .write_all(b"GET / HTTP/1.1\r\nhost: origin\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut inside = String::new();
    tokio::time::timeout(Duration::from_secs(10), tunnel.read_to_string(&mut inside))
        .await
        .expect("the origin answers inside the tunnel")
        .ok();
    assert!(inside.ends_with(&EXIT.to_string()), "{inside}");
    eventually(Duration::from_secs(10), "the tunnel reported too", || {
        fleet.reported_requests("alice") == 5
    })
    .await;
    fleet.running.shutdown().await;
}

/// The head of an answer, read byte by byte up to its blank line.
async fn read_head(stream: &mut TlsStream<TcpStream>) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            other => panic!("no answer head: {other:?}, so far {head:?}"),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_of_no_member_or_none_is_closed() {
    // Reads the process-wide metrics.
    let _alone = alone().await;
    let fleet = Fleet::start().await;
    let before = fleet.metric(UNKNOWN_PEERS).await;
    let stranger = Identity::new("proxypool-fleet-stranger");
    // TLS 1.3 finishes the client's side first; the owner closes once it has found the pin
    // in no list (after one refresh).
    let tls = fleet.dial(Some(&stranger)).await;
    assert!(
        tls.is_err() || closed(tls.unwrap()).await,
        "a stranger is not served"
    );
    let fleet_ref = &fleet;
    eventually_async(
        "the unknown peer counted",
        Duration::from_secs(10),
        async || (fleet_ref.metric(UNKNOWN_PEERS).await > before).then_some(()),
    )
    .await;

    let before = fleet.metric(HANDSHAKES).await;
    let tls = fleet.dial(None).await;
    assert!(
        tls.is_err() || closed(tls.unwrap()).await,
        "no certificate, no hop"
    );
    eventually_async(
        "the bare handshake counted",
        Duration::from_secs(10),
        async || (fleet_ref.metric(HANDSHAKES).await > before).then_some(()),
    )
    .await;

    // The member itself still gets in.
    let mut hop = fleet.hop().await;
    let (status, _, _) = exchange(&mut hop, hop_get(&fleet.origin.url(), "alice", "alice")).await;
    assert_eq!(status, 200);
    fleet.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_headers_mean_nothing_on_the_client_listener_and_an_unknown_client_is_refused() {
    let fleet = Fleet::start().await;
    // A client cannot speak as another through the fleet headers.
    let answer = curl(&[
        "-x",
        &format!("http://{}", fleet.running.http),
        "-H",
        "Proxypool-Fleet-Client: alice",
        "-H",
        "Proxypool-Fleet-Username: alice",
        &fleet.origin.url(),
    ])
    .await;
    assert_eq!(answer.status, 407, "{answer:?}");
    assert_eq!(fleet.origin.hits_from(EXIT), 0);

    let mut hop = fleet.hop().await;
    let (status, headers, _) =
        exchange(&mut hop, hop_get(&fleet.origin.url(), "mallory", "mallory")).await;
    assert_eq!(status, 407);
    assert_eq!(headers["x-proxypool-error"], "auth_required");
    // A username of another client than the header names, or none: a bad request (which
    // closes its connection, as on the client listener).
    let (status, _, _) = exchange(&mut hop, hop_get(&fleet.origin.url(), "alice", "slow")).await;
    assert_eq!(status, 400);
    let mut request = hop_get(&fleet.origin.url(), "alice", "alice");
    request.headers_mut().remove("proxypool-fleet-username");
    let (status, _, _) = exchange(&mut fleet.hop().await, request).await;
    assert_eq!(status, 400);
    // Selectors are parsed as on the client listener.
    let (status, headers, _) = exchange(
        &mut fleet.hop().await,
        hop_get(&fleet.origin.url(), "alice", "alice-nonsense-1"),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(headers["x-proxypool-error"], "bad_selector");
    assert_eq!(
        fleet.origin.hits_from(EXIT),
        0,
        "nothing refused went upstream"
    );
    fleet.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_does_not_charge_the_clients_rate_limit_again() {
    let fleet = Fleet::start().await;
    // One request per second, a burst of one: the entry charged these; the owner must not.
    let mut hop = fleet.hop().await;
    for n in 0..5 {
        let (status, headers, body) =
            exchange(&mut hop, hop_get(&fleet.origin.url(), "slow", "slow")).await;
        assert_eq!(status, 200, "hop request {n}: {headers:?} {body}");
    }
    // The same client on the client listener is limited at once.
    let url = http_proxy_url("slow", fleet.running.http);
    let statuses = [
        curl(&["-x", &url, &fleet.origin.url()]).await.status,
        curl(&["-x", &url, &fleet.origin.url()]).await.status,
    ];
    assert!(statuses.contains(&429), "{statuses:?}");
    fleet.running.shutdown().await;
}

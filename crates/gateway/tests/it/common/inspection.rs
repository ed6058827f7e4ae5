//! For the TLS inspection tests: the gateway's CA (certificate and key files, as an
//! operator makes them), an https origin (the sim's, with a certificate of a test CA for
//! the `.test` hosts), and a client that opens an inspected tunnel itself (CONNECT, then
//! TLS trusting the gateway's CA) to read the leaf it was served or send requests on one
//! tunnel.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use proxypool_config::Millis;
use proxypool_config::gateway::InspectionConfig;
use proxypool_sim::Origin;
use proxypool_testkit::tls::TestCa;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpStream;

/// The hosts the origin's certificate names (the sim upstreams resolve `.test` to
/// loopback, so each is the one origin).
pub const ORIGIN_HOSTS: [&str; 4] = ["shop-a.test", "shop-b.test", "bank.test", "fresh.test"];

/// The gateway's CA as files.
#[derive(Debug)]
pub struct GatewayCa {
    pub dir: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub der: CertificateDer<'static>,
}

impl GatewayCa {
    pub fn new(name: &str) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "gw-inspection-ca-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        let ca = GatewayCa {
            cert: dir.join("ca.pem"),
            key: dir.join("ca-key.pem"),
            der: cert.der().clone(),
            dir,
        };
        std::fs::write(&ca.cert, cert.pem()).unwrap();
        std::fs::write(&ca.key, key.serialize_pem()).unwrap();
        ca
    }

    /// `[gateway.inspection]` with this CA, origins verified against `origin_ca`.
    pub fn config(&self, origin_ca: &Path, bypass: &[&str], leaf_cache: usize) -> InspectionConfig {
        InspectionConfig {
            ca_cert: self.cert.clone(),
            ca_key: self.key.clone(),
            origin_ca: Some(origin_ca.to_owned()),
            bypass: bypass.iter().map(|s| (*s).to_owned()).collect(),
            leaf_cache,
            leaf_validity: Millis::from_secs(24 * 3600),
        }
    }

    pub fn cert_path(&self) -> &str {
        self.cert.to_str().unwrap()
    }
}

impl Drop for GatewayCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// An https sim origin whose certificate (issued by `ca`) names [`ORIGIN_HOSTS`].
pub async fn tls_origin(ca: &TestCa) -> Origin {
    let files = ca.server_for("origin", &ORIGIN_HOSTS).unwrap();
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(&files.key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    Origin::start_tls(Arc::new(config)).await.unwrap()
}

/// A WebSocket origin over TLS (a certificate of `ca` for [`ORIGIN_HOSTS`]) that accepts
/// each handshake and then reads until its client goes: where it listens.
pub fn websocket_origin(ca: &TestCa) -> SocketAddr {
    let files = ca.server_for("ws-origin", &ORIGIN_HOSTS).unwrap();
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(&files.key).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let connection = rustls::ServerConnection::new(config).unwrap();
                let tls = rustls::StreamOwned::new(connection, stream);
                if let Ok(mut socket) = tungstenite::accept(tls) {
                    while socket.read().is_ok() {}
                }
            });
        }
    });
    addr
}

/// A TLS client that trusts only `root`.
fn client_config(root: &CertificateDer<'static>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// A tunnel through the gateway at `gateway` as `user` to `authority` (`host:port`), TLS
/// inside trusting `root` only.
pub async fn tunnel(
    gateway: SocketAddr,
    user: &str,
    authority: &str,
    root: &CertificateDer<'static>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let mut stream = TcpStream::connect(gateway)
        .await
        .map_err(|e| e.to_string())?;
    proxypool_proto::http_connect::connect(&mut stream, authority, Some((user, super::PASSWORD)))
        .await
        .map_err(|e| format!("CONNECT: {e}"))?;
    let host = authority.rsplit_once(':').unwrap().0.to_owned();
    let name = ServerName::try_from(host).map_err(|e| e.to_string())?;
    tokio_rustls::TlsConnector::from(client_config(root))
        .connect(name, stream)
        .await
        .map_err(|e| format!("TLS: {e}"))
}

/// The leaf the gateway serves `authority`'s inspected tunnel with.
pub async fn served_leaf(
    gateway: SocketAddr,
    user: &str,
    authority: &str,
    ca: &GatewayCa,
) -> Result<CertificateDer<'static>, String> {
    let tls = tunnel(gateway, user, authority, &ca.der).await?;
    let (_, session) = tls.get_ref();
    Ok(session.peer_certificates().unwrap()[0].clone().into_owned())
}

/// An HTTP/1.1 client on one inspected tunnel: every request rides the same CONNECT.
pub struct InnerClient {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
}

/// What an inner request got back.
#[derive(Debug)]
pub struct InnerResponse {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl InnerResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl InnerClient {
    pub async fn open(
        gateway: SocketAddr,
        user: &str,
        authority: &str,
        ca: &GatewayCa,
    ) -> Result<Self, String> {
        let tls = tunnel(gateway, user, authority, &ca.der).await?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(connection.with_upgrades());
        Ok(Self { sender })
    }

    /// A WebSocket handshake for `path`: the upgraded stream once the origin said `101`.
    pub async fn websocket(
        &mut self,
        host: &str,
        path: &str,
    ) -> Result<hyper::upgrade::Upgraded, String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let request = http::Request::get(path)
            .header(http::header::HOST, host)
            .header(http::header::CONNECTION, "Upgrade")
            .header(http::header::UPGRADE, "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        if response.status() != http::StatusCode::SWITCHING_PROTOCOLS {
            return Err(format!("no upgrade: {}", response.status()));
        }
        hyper::upgrade::on(response)
            .await
            .map_err(|e| e.to_string())
    }

    /// `GET path` with `Host: host`.
    pub async fn get(&mut self, host: &str, path: &str) -> Result<InnerResponse, String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let request = http::Request::get(path)
            .header(http::header::HOST, host)
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(InnerResponse {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

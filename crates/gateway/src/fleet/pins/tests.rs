//! The hop's pinned TLS over loopback sockets: the right pin on both sides connects, a
//! wrong server pin or a missing client certificate does not.

use super::*;
use proxypool_core::WorkerId;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

fn identity(worker: &str) -> FleetIdentity {
    FleetIdentity::generate(&WorkerId::new(worker).unwrap()).unwrap()
}

/// What the server saw of one connection: the client's pin and ALPN, or its error.
type Seen = Result<(Option<Pin>, Option<Vec<u8>>), String>;

/// A fleet listener of `server` on loopback that accepts one connection, answers one byte
/// and reports what it saw.
async fn serve_one(
    server: &FleetIdentity,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = TlsAcceptor::from(server_config(server).unwrap());
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut tls = acceptor.accept(tcp).await.map_err(|e| e.to_string())?;
        let (_, conn) = tls.get_ref();
        let seen = (peer_pin(conn), conn.alpn_protocol().map(<[u8]>::to_vec));
        let mut byte = [0u8; 1];
        tls.read_exact(&mut byte).await.map_err(|e| e.to_string())?;
        tls.write_all(&byte).await.map_err(|e| e.to_string())?;
        tls.shutdown().await.map_err(|e| e.to_string())?;
        Ok(seen)
    });
    (addr, task)
}

/// Connects with `config` and echoes one byte; the error when TLS refuses.
async fn hop(addr: std::net::SocketAddr, config: Arc<ClientConfig>) -> Result<u8, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    // Any name: the pin decides.
    let name = ServerName::try_from("fleet.invalid").unwrap();
    let mut tls = TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    tls.write_all(b"x").await.map_err(|e| e.to_string())?;
    let mut byte = [0u8; 1];
    tls.read_exact(&mut byte).await.map_err(|e| e.to_string())?;
    Ok(byte[0])
}

async fn within<T>(task: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the hop finishes within 10 s")
}

#[tokio::test]
async fn the_right_pin_connects_and_each_side_learns_the_others_pin() {
    let (owner, entry) = (identity("owner"), identity("entry"));
    let (addr, served) = serve_one(&owner).await;
    let config = client_config(&entry, owner.pin_hex()).unwrap();
    assert_eq!(within(hop(addr, config)).await, Ok(b'x'));
    let (pin, alpn) = within(served).await.unwrap().unwrap();
    assert_eq!(pin, Some(entry.pin()), "the owner sees the entry's pin");
    assert_eq!(alpn.as_deref(), Some(ALPN));
}

#[tokio::test]
async fn a_wrong_server_pin_is_refused() {
    let (owner, entry, other) = (identity("owner"), identity("entry"), identity("other"));
    let (addr, served) = serve_one(&owner).await;
    let config = client_config(&entry, &other.pin()).unwrap();
    let error = within(hop(addr, config)).await.unwrap_err();
    assert!(error.contains("certificate"), "{error}");
    assert!(within(served).await.unwrap().is_err());
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused() {
    let owner = identity("owner");
    let (addr, served) = serve_one(&owner).await;
    let provider = Arc::clone(owner.provider());
    let mut config = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedServer {
            expected: owner.pin(),
            provider,
        }))
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN.to_vec()];
    // TLS 1.3 finishes the client's side before the server has judged its certificate:
    // the refusal shows on the first read, or as the server's error.
    let outcome = within(hop(addr, Arc::new(config))).await;
    assert!(outcome.is_err(), "{outcome:?}");
    let seen = within(served).await.unwrap();
    let error = seen.unwrap_err();
    assert!(error.contains("certificate"), "{error}");
}

use super::*;
use proxypool_edge::{ServerTls, ServerTlsFiles};
use proxypool_testkit::tls::{CertFiles, TestCa};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TLS server on loopback with `files`, offering ALPN `http/1.1`, that answers one
/// byte to every connection it accepts; where it listens.
async fn origin(files: &CertFiles) -> SocketAddr {
    let tls = ServerTls::load(ServerTlsFiles {
        cert: files.cert.clone(),
        key: files.key.clone(),
        client_ca: None,
    })
    .unwrap();
    let mut config = ServerConfigOf::clone(&tls.current());
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(b"!").await;
                    let _ = tls.flush().await;
                }
            });
        }
    });
    addr
}

type ServerConfigOf = rustls::ServerConfig;

/// The id of exit `n` (a proxy id is 32 hex digits).
fn exit(n: u8) -> ProxyId {
    ProxyId::new(format!("{n:032x}")).unwrap()
}

async fn handshake(
    tls: &OriginTls,
    exit_id: u8,
    target: TargetAddr,
    addr: SocketAddr,
) -> io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tls.connect(&exit(exit_id), &target, tcp).await
}

#[tokio::test]
async fn verifies_the_origin_against_the_bundle_by_name_or_address() {
    let ca = TestCa::new("origin ca").unwrap();
    let files = ca
        .server_for("shop", &["shop-a.test", "127.0.0.1"])
        .unwrap();
    let addr = origin(&files).await;
    let tls = OriginTls::load(Some(ca.ca_path())).unwrap();
    assert_eq!(tls.origin_ca(), Some(ca.ca_path()));

    let by_name = TargetAddr::domain("shop-a.test", addr.port()).unwrap();
    let mut stream = handshake(&tls, 1, by_name, addr).await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte).await.unwrap();
    assert_eq!(&byte, b"!");

    // A numeric target is verified as an address (an IP SAN), without SNI.
    let by_address = TargetAddr::from(addr);
    handshake(&tls, 1, by_address, addr).await.unwrap();

    // Another name on the same certificate is refused, and said so.
    let other = TargetAddr::domain("shop-b.test", addr.port()).unwrap();
    let error = handshake(&tls, 1, other, addr).await.unwrap_err();
    assert_eq!(certificate_problem(&error), Some("not valid for the name"));
}

#[tokio::test]
async fn an_origin_of_another_ca_is_refused_as_an_unknown_issuer() {
    let trusted = TestCa::new("trusted").unwrap();
    let other = TestCa::new("someone else").unwrap();
    let addr = origin(&other.server_for("shop", &["shop-a.test"]).unwrap()).await;
    let target = TargetAddr::domain("shop-a.test", addr.port()).unwrap();
    let tls = OriginTls::load(Some(trusted.ca_path())).unwrap();
    let error = handshake(&tls, 1, target.clone(), addr).await.unwrap_err();
    assert_eq!(certificate_problem(&error), Some("unknown issuer"));
    // The public roots do not vouch for a private CA either.
    let public = OriginTls::load(None).unwrap();
    assert_eq!(public.origin_ca(), None);
    let error = handshake(&public, 1, target, addr).await.unwrap_err();
    assert_eq!(certificate_problem(&error), Some("unknown issuer"));
}

#[tokio::test]
async fn failures_other_than_the_certificate_are_not_called_a_certificate_problem() {
    // A peer that closes at once: no certificate was ever judged.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            drop(tcp);
        }
    });
    let tls = OriginTls::load(None).unwrap();
    let target = TargetAddr::domain("shop-a.test", addr.port()).unwrap();
    let error = handshake(&tls, 1, target, addr).await.unwrap_err();
    assert_eq!(certificate_problem(&error), None, "{error}");
    let plain = io::Error::other("not a TLS error");
    assert_eq!(certificate_problem(&plain), None);
}

#[test]
fn a_bundle_that_cannot_be_used_is_an_error_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("origin-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.pem");
    let error = OriginTls::load(Some(&missing)).unwrap_err();
    assert!(
        error.contains("origin_ca") && error.contains("missing.pem"),
        "{error}"
    );
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let error = OriginTls::load(Some(&empty)).unwrap_err();
    assert!(error.contains("empty.pem"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn each_exit_resumes_only_its_own_sessions() {
    let ca = TestCa::new("origin ca").unwrap();
    let addr = origin(&ca.server_for("shop", &["shop-a.test"]).unwrap()).await;
    let target = TargetAddr::domain("shop-a.test", addr.port()).unwrap();
    let tls = OriginTls::load(Some(ca.ca_path())).unwrap();
    let resumed = async |exit_id: u8| {
        let mut stream = handshake(&tls, exit_id, target.clone(), addr)
            .await
            .unwrap();
        // The session ticket comes after the handshake: read the byte to take it in.
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.unwrap();
        stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    };
    assert!(!resumed(1).await, "a first handshake is full");
    assert!(resumed(1).await, "the same exit resumes");
    assert!(!resumed(2).await, "another exit never shows p1's ticket");
    assert_eq!(tls.exits(), 2);
}

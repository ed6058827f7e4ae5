//! The scaffold with TLS: a plain-HTTP client gets a readable refusal, a certificate
//! replaced on disk reaches new connections while an open one keeps working, mutual TLS
//! refuses clients without a certificate from the configured CA, and a stalled handshake
//! is cut at the header-read timeout, freeing its slot.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use proxypool_edge::{ClientTls, ClientTlsFiles, ServeLimits, ServerTls, ServerTlsFiles, serve};
use proxypool_testkit::eventually_async;
use proxypool_testkit::{CertFiles, TestCa};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone)]
struct Ok200;

impl hyper::service::Service<Request<Incoming>> for Ok200 {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn call(&self, _: Request<Incoming>) -> Self::Future {
        std::future::ready(Ok(Response::new(Full::new(Bytes::from_static(b"ok")))))
    }
}

async fn start(tls: ServerTls, limits: ServeLimits) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = ServeLimits {
        tls: Some(tls),
        ..limits
    };
    tokio::spawn(serve(listener, Ok200, limits, std::future::pending()));
    addr
}

fn server_tls(files: &CertFiles, client_ca: Option<&std::path::Path>) -> ServerTls {
    ServerTls::load_polling(
        ServerTlsFiles {
            cert: files.cert.clone(),
            key: files.key.clone(),
            client_ca: client_ca.map(Into::into),
        },
        Duration::from_millis(50),
    )
    .unwrap()
}

fn client(ca: &TestCa, identity: Option<&CertFiles>) -> ClientTls {
    ClientTls::load(&ClientTlsFiles {
        ca: Some(ca.ca_path().to_owned()),
        cert: identity.map(|f| f.cert.clone()),
        key: identity.map(|f| f.key.clone()),
    })
    .unwrap()
}

/// An HTTPS connection to `addr`, or why it could not be made.
async fn connect(addr: SocketAddr, tls: &ClientTls) -> Result<SendRequest<Empty<Bytes>>, String> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let conn = tls
        .handshake("127.0.0.1", tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(conn))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn get(sender: &mut SendRequest<Empty<Bytes>>) -> Result<String, String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let request = Request::get("/")
        .header("host", "127.0.0.1")
        .body(Empty::new())
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("{e:?}"))?;
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_a_tls_listener_gets_a_readable_refusal() {
    let ca = TestCa::new("edge test ca").unwrap();
    let addr = start(
        server_tls(&ca.server("srv").unwrap(), None),
        ServeLimits::default(),
    )
    .await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("the listener neither answered nor closed")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("\"tls_required\""), "{answer}");
    // And TLS itself works on the same listener.
    let mut sender = connect(addr, &client(&ca, None)).await.unwrap();
    assert_eq!(get(&mut sender).await.unwrap(), "ok");
}

/// Replaces a file the way a certificate manager does: write aside, rename over.
fn replace(from: &std::path::Path, to: &std::path::Path) {
    let aside = to.with_extension("new");
    std::fs::copy(from, &aside).unwrap();
    std::fs::rename(&aside, to).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_certificate_reaches_new_connections_and_open_ones_keep_working() {
    let old_ca = TestCa::new("old ca").unwrap();
    let new_ca = TestCa::new("new ca").unwrap();
    let served = old_ca.server("srv").unwrap();
    let addr = start(server_tls(&served, None), ServeLimits::default()).await;
    let (trusts_old, trusts_new) = (client(&old_ca, None), client(&new_ca, None));

    let mut open = connect(addr, &trusts_old).await.unwrap();
    assert_eq!(get(&mut open).await.unwrap(), "ok");
    let refused = connect(addr, &trusts_new).await.err();
    assert!(refused.is_some(), "the new CA is not in use yet");

    let rotated = new_ca.server("srv").unwrap();
    replace(&rotated.key, &served.key);
    replace(&rotated.cert, &served.cert);
    let mut fresh = eventually_async(
        "the new certificate to serve",
        Duration::from_secs(10),
        async || connect(addr, &trusts_new).await.ok(),
    )
    .await;
    assert_eq!(get(&mut fresh).await.unwrap(), "ok");
    let error = connect(addr, &trusts_old)
        .await
        .expect_err("old CA no longer vouches");
    assert!(error.contains("certificate"), "{error}");
    assert_eq!(
        get(&mut open).await.unwrap(),
        "ok",
        "the open connection keeps working"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_replacement_keeps_the_running_certificate() {
    let ca = TestCa::new("ca").unwrap();
    let served = ca.server("srv").unwrap();
    let tls = server_tls(&served, None);
    std::fs::write(&served.key, "not a key").unwrap();
    let error = tls.reload().unwrap_err();
    assert!(error.to_string().contains("srv.key"), "{error}");
    let addr = start(tls, ServeLimits::default()).await;
    let mut sender = connect(addr, &client(&ca, None)).await.unwrap();
    assert_eq!(get(&mut sender).await.unwrap(), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_refuses_clients_without_a_certificate_from_the_ca() {
    let ca = TestCa::new("ca").unwrap();
    let stranger = TestCa::new("stranger").unwrap();
    let addr = start(
        server_tls(&ca.server("srv").unwrap(), Some(ca.ca_path())),
        ServeLimits::default(),
    )
    .await;
    // TLS 1.3: the client finishes its side before the server checks, so the refusal
    // shows at the first request at the latest.
    let anonymous = match connect(addr, &client(&ca, None)).await {
        Ok(mut sender) => get(&mut sender).await.err(),
        Err(error) => Some(error),
    };
    assert!(anonymous.is_some(), "served a client without a certificate");

    let foreign_identity = stranger.client("gw", "gw-1").unwrap();
    let foreign = match connect(addr, &client(&ca, Some(&foreign_identity))).await {
        Ok(mut sender) => get(&mut sender).await.err(),
        Err(error) => Some(error),
    };
    assert!(foreign.is_some(), "served a certificate of another CA");

    let identity = ca.client("gw", "gw-1").unwrap();
    let mut sender = connect(addr, &client(&ca, Some(&identity))).await.unwrap();
    assert_eq!(get(&mut sender).await.unwrap(), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_handshake_is_cut_at_the_header_timeout_and_frees_its_slot() {
    let ca = TestCa::new("ca").unwrap();
    let limits = ServeLimits {
        max_connections: 1,
        max_connections_per_ip: 1,
        header_read_timeout: Duration::from_millis(300),
        ..ServeLimits::default()
    };
    let addr = start(server_tls(&ca.server("srv").unwrap(), None), limits).await;
    // The first byte of a handshake record, then nothing.
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    stalled.write_all(&[0x16]).await.unwrap();
    let started = Instant::now();
    let mut scratch = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), stalled.read(&mut scratch)).await;
    assert!(read.is_ok(), "the stalled handshake was never cut");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "cut before the timeout"
    );
    // Its slot is free again: a real client is served.
    eventually_async("the slot to be freed", Duration::from_secs(5), async || {
        let mut sender = connect(addr, &client(&ca, None)).await.ok()?;
        (get(&mut sender).await.as_deref() == Ok("ok")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_re_reads_the_files_without_waiting_for_the_poll() {
    let (old_ca, new_ca) = (TestCa::new("old").unwrap(), TestCa::new("new").unwrap());
    let served = old_ca.server("srv").unwrap();
    let tls = ServerTls::load_polling(
        ServerTlsFiles {
            cert: served.cert.clone(),
            key: served.key.clone(),
            client_ca: None,
        },
        Duration::from_secs(3600),
    )
    .unwrap();
    let addr = start(tls.clone(), ServeLimits::default()).await;
    let rotated = new_ca.server("srv").unwrap();
    replace(&rotated.key, &served.key);
    replace(&rotated.cert, &served.cert);
    assert!(
        connect(addr, &client(&new_ca, None)).await.is_err(),
        "swapped before the reload"
    );
    tls.reload_or_keep();
    let mut sender = connect(addr, &client(&new_ca, None)).await.unwrap();
    assert_eq!(get(&mut sender).await.unwrap(), "ok");
}

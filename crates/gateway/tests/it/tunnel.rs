//! Tunnels end to end: a client → the gateway (CONNECT or SOCKS5) → a proxypool-sim
//! upstream proxy → a raw TCP server of the test's own, with both sides streaming at
//! once, a server that stops reading, and the SOCKS5 reply's bound address.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, sim_upstream};
use crate::common::*;
use proxypool_core::Protocol;
use proxypool_core::control::{GatewayClient, SnapshotProxy};
use proxypool_sim::ProxyKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// Bytes each side streams: more than the sockets on the way (three hops, each with
/// buffers that grow to megabytes on loopback) can hold, so a relay that stops reading one
/// way while a write the other way waits cannot get through.
const SIZE: usize = 32 * 1024 * 1024;

async fn setup(
    proxies: Vec<SnapshotProxy>,
    clients: Vec<GatewayClient>,
    tunnel_idle: Millis,
) -> (Arc<TestController>, Running) {
    let controller = TestController::start(WORKER, 60_000).await;
    controller.publish(proxies, clients);
    let mut config = config(&controller);
    config.limits.tunnel_idle = tunnel_idle;
    let gateway = Running::start(config).await;
    acked(&controller, 1).await;
    (controller, gateway)
}

/// The byte at `position` of the stream seeded `seed`.
fn byte_at(position: usize, seed: u8) -> u8 {
    ((position % 251) as u8).wrapping_add(seed)
}

/// Writes `SIZE` bytes of the stream seeded `seed`, in chunks.
async fn write_stream<W: AsyncWriteExt + Unpin>(to: &mut W, seed: u8) {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut position = 0;
    while position < SIZE {
        let len = chunk.len().min(SIZE - position);
        for (i, byte) in chunk[..len].iter_mut().enumerate() {
            *byte = byte_at(position + i, seed);
        }
        to.write_all(&chunk[..len]).await.unwrap();
        position += len;
    }
}

/// Reads the stream seeded `seed` from `position` up to `until`, checking every byte.
async fn read_stream<R: AsyncReadExt + Unpin>(
    from: &mut R,
    seed: u8,
    mut position: usize,
    until: usize,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    while position < until {
        let len = buffer.len().min(until - position);
        let n = from.read(&mut buffer[..len]).await.unwrap();
        assert!(n > 0, "stream ended after {position} bytes");
        for (i, byte) in buffer[..n].iter().enumerate() {
            assert_eq!(*byte, byte_at(position + i, seed), "byte {}", position + i);
        }
        position += n;
    }
}

/// Bytes of the client's stream the server reads before it starts talking.
const FIRST: usize = 1024 * 1024;

/// A server that, once the client's stream is flowing, writes all of its own stream and
/// only then reads the rest of the client's (direct, this works: the client reads while
/// it writes). Its receive buffer is small and fixed, so the client's bytes back up into
/// the relay soon.
async fn streaming_server() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.set_send_buffer_size(64 * 1024).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        read_stream(&mut stream, 1, 0, FIRST).await;
        write_stream(&mut stream, 2).await;
        read_stream(&mut stream, 1, FIRST, SIZE).await;
    });
    (addr, task)
}

/// A connection to the gateway with small, fixed socket buffers.
async fn dial(gateway: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.set_send_buffer_size(64 * 1024).unwrap();
    socket.connect(gateway).await.unwrap()
}

async fn connect_tunnel(gateway: &Running, target: SocketAddr) -> TcpStream {
    connect_as_alice(dial(gateway.http).await, target).await
}

async fn socks_tunnel(gateway: &Running, target: SocketAddr) -> TcpStream {
    socks_as_alice(dial(gateway.socks5).await, target).await
}

/// The client streams its bytes while it reads the server's; both must arrive whole.
async fn exchange(mut tunnel: TcpStream, server: tokio::task::JoinHandle<()>) {
    let both = async {
        let (mut read, mut write) = tunnel.split();
        tokio::join!(
            write_stream(&mut write, 1),
            read_stream(&mut read, 2, 0, SIZE)
        );
        server.await.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(60), both)
        .await
        .expect("both directions stream at once through the gateway");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_tunnel_streams_both_ways_at_once() {
    let up = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 91)).await;
    let proxies = vec![proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us")];
    let (_controller, gateway) = setup(proxies, vec![client("alice")], Millis(30_000)).await;
    let (target, server) = streaming_server().await;
    let tunnel = connect_tunnel(&gateway, target).await;
    exchange(tunnel, server).await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socks5_tunnel_streams_both_ways_at_once() {
    let up = sim_upstream(ProxyKind::Socks5, Ipv4Addr::new(127, 0, 0, 92)).await;
    let proxies = vec![proxy(1, Protocol::Socks5, up.addr(), CREDS, "acme", "us")];
    let (_controller, gateway) = setup(proxies, vec![client("alice")], Millis(30_000)).await;
    let (target, server) = streaming_server().await;
    let tunnel = socks_tunnel(&gateway, target).await;
    exchange(tunnel, server).await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_reading_ends_the_tunnel_after_the_write_deadline() {
    let up = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 93)).await;
    let proxies = vec![proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us")];
    let (_controller, gateway) = setup(proxies, vec![client("alice")], Millis(500)).await;
    // The server never reads but keeps talking, so the tunnel is never idle.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        while stream.write_all(b"tick").await.is_ok() {
            // The pace of the trickle: a tick every 20 ms keeps the tunnel from going idle.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut tunnel = connect_tunnel(&gateway, target).await;
    let (mut read, mut write) = tunnel.split();
    let flood = async {
        let chunk = vec![7u8; 64 * 1024];
        while write.write_all(&chunk).await.is_ok() {}
    };
    // The client keeps reading until the gateway closes its side of the tunnel.
    let closed = async {
        let mut buffer = vec![0u8; 4096];
        let mut ticks = 0usize;
        while let Ok(n @ 1..) = read.read(&mut buffer).await {
            ticks += n;
        }
        ticks
    };
    let ((), ticks) = tokio::time::timeout(Duration::from_secs(15), async {
        tokio::join!(flood, closed)
    })
    .await
    .expect("the gateway ends a tunnel whose server stopped reading");
    assert!(ticks > 0, "the server's bytes reached the client meanwhile");
    server.abort();
    gateway.shutdown().await;
}

/// The success reply's bound address is `0.0.0.0:0` (ATYP IPv4), read byte by byte: the
/// gateway's upstream-facing local address and port are not the client's to see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socks5_success_reply_carries_no_internal_address() {
    let up = sim_upstream(ProxyKind::Socks5, Ipv4Addr::new(127, 0, 0, 94)).await;
    let proxies = vec![proxy(1, Protocol::Socks5, up.addr(), CREDS, "acme", "us")];
    let (_controller, gateway) = setup(proxies, vec![client("alice")], Millis(30_000)).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let SocketAddr::V4(target) = listener.local_addr().unwrap() else {
        unreachable!("bound on IPv4")
    };
    let server = tokio::spawn(async move { listener.accept().await.map(|(stream, _)| stream) });

    let mut stream = TcpStream::connect(gateway.socks5).await.unwrap();
    stream.write_all(&[5, 1, 2]).await.unwrap();
    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice).await.unwrap();
    assert_eq!(choice, [5, 2], "username/password chosen");
    let mut auth = vec![1, 5];
    auth.extend_from_slice(b"alice");
    auth.push(PASSWORD.len() as u8);
    auth.extend_from_slice(PASSWORD.as_bytes());
    stream.write_all(&auth).await.unwrap();
    let mut verdict = [0u8; 2];
    stream.read_exact(&mut verdict).await.unwrap();
    assert_eq!(verdict, [1, 0], "credentials accepted");
    let mut request = vec![5, 1, 0, 1];
    request.extend_from_slice(&target.ip().octets());
    request.extend_from_slice(&target.port().to_be_bytes());
    stream.write_all(&request).await.unwrap();
    let mut reply = [0u8; 10];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut reply))
        .await
        .expect("a reply within 10 s")
        .unwrap();
    assert_eq!(reply[..4], [5, 0, 0, 1], "succeeded, ATYP IPv4: {reply:?}");
    assert_eq!(reply[4..], [0; 6], "bound address 0.0.0.0:0: {reply:?}");
    server
        .await
        .unwrap()
        .expect("the tunnel reached the target");
    gateway.shutdown().await;
}

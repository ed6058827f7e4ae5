//! Relaying a tunnel between the client and the upstream socket.
//!
//! Both directions are pumped at once, by two futures joined in the tunnel's one task (no
//! task per direction): a peer that is slow to read holds up only the direction towards
//! it, never the other one, so protocols where both sides stream at once (WebSocket,
//! gRPC, SSH) work as they do directly.
//!
//! An idle tunnel should cost sockets, not buffers: at 10,000 open tunnels, two 8 KiB
//! buffers each (what `copy_bidirectional` keeps) would be 160 MiB doing nothing. So each
//! direction waits for readiness with no buffer, and allocates one only while bytes move;
//! a quiet tunnel holds just the task (a few hundred bytes of state) and the two sockets.
//!
//! Ends:
//! - half-close is passed on: EOF one way shuts the other side's write half, and the
//!   other direction keeps relaying; the tunnel ends when both directions ended;
//! - a tunnel with no traffic either way for `idle` closes (bytes moving in one direction
//!   are enough to keep it open);
//! - a write that makes no progress for `idle` (a peer that stopped reading) ends the
//!   tunnel, even while the other direction is busy;
//! - an error on either side ends both directions.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::time::Instant;

const CHUNK: usize = 16 * 1024;

/// Bytes moved by a finished relay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Relayed {
    /// Client to upstream.
    pub up: u64,
    /// Upstream to client.
    pub down: u64,
}

/// Relays until both directions ended, an error, `idle` without traffic either way, or a
/// write that made no progress for `idle`.
pub(crate) async fn relay(
    mut client: TcpStream,
    mut upstream: TcpStream,
    idle: Duration,
) -> Relayed {
    let activity = Activity::new();
    let (mut up, mut down) = (0u64, 0u64);
    {
        let (client_read, mut client_write) = client.split();
        let (upstream_read, mut upstream_write) = upstream.split();
        let upward = pump(&client_read, &mut upstream_write, &mut up, &activity, idle);
        let downward = pump(
            &upstream_read,
            &mut client_write,
            &mut down,
            &activity,
            idle,
        );
        tokio::select! {
            _ = async { tokio::try_join!(upward, downward) } => {}
            () = activity.idle_for(idle) => {}
        }
    }
    Relayed { up, down }
}

/// When bytes last moved, shared by both directions of one tunnel (milliseconds since
/// the tunnel started; an atomic so the relay future stays `Send`).
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Completes once nothing moved either way for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// One direction: waits (bufferless) until `from` is readable, moves what it has into
/// `to`, and on EOF shuts `to`'s write half. Returns on EOF; an error ends the tunnel.
async fn pump(
    from: &ReadHalf<'_>,
    to: &mut WriteHalf<'_>,
    moved: &mut u64,
    activity: &Activity,
    write_timeout: Duration,
) -> io::Result<()> {
    loop {
        from.readable().await?;
        // The buffer lives only while this burst lasts.
        let mut buffer: Vec<u8> = Vec::with_capacity(CHUNK);
        loop {
            buffer.clear();
            match from.try_read_buf(&mut buffer) {
                Ok(0) => {
                    // Pass the half-close on; the other direction keeps relaying.
                    let _ = to.shutdown().await;
                    return Ok(());
                }
                Ok(n) => {
                    activity.touch();
                    write_all(to, &buffer[..n], write_timeout, moved, activity).await?;
                    if n < CHUNK {
                        // Drained for now; go back to waiting without the buffer.
                        break;
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) => return Err(error),
            }
        }
    }
}

/// Writes all of `data`, failing when the peer accepts nothing for `timeout`. Counts each
/// byte as it is written, so a relay cut short still reports what it moved.
async fn write_all(
    to: &WriteHalf<'_>,
    mut data: &[u8],
    timeout: Duration,
    moved: &mut u64,
    activity: &Activity,
) -> io::Result<()> {
    while !data.is_empty() {
        match to.try_write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                data = &data[n..];
                *moved += n as u64;
                activity.touch();
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                // The timer is armed only while the peer is not taking bytes.
                match tokio::time::timeout(timeout, to.writable()).await {
                    Ok(ready) => ready?,
                    Err(_) => return Err(io::ErrorKind::TimedOut.into()),
                }
            }
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A connected pair of loopback sockets: (one end, the other end).
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (connected, accepted) = tokio::join!(
            TcpStream::connect(listener.local_addr().unwrap()),
            listener.accept()
        );
        (connected.unwrap(), accepted.unwrap().0)
    }

    /// A relay between two pairs: returns (client end, server end, the running relay).
    async fn tunnel(idle: Duration) -> (TcpStream, TcpStream, tokio::task::JoinHandle<Relayed>) {
        let (client, gateway_client) = pair().await;
        let (gateway_upstream, server) = pair().await;
        let relay = tokio::spawn(relay(gateway_client, gateway_upstream, idle));
        (client, server, relay)
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// The server speaks first: it writes all of `data` and only then reads `expect`
    /// bytes. Direct, this works because the client reads while it writes; a relay that
    /// stops reading one way while its write the other way waits deadlocks.
    async fn server_side(stream: &mut TcpStream, data: &[u8], expect: usize) -> Vec<u8> {
        stream.write_all(data).await.unwrap();
        let mut received = vec![0u8; expect];
        stream.read_exact(&mut received).await.unwrap();
        received
    }

    /// The client streams `data` while it reads `expect` bytes.
    async fn client_side(stream: &mut TcpStream, data: &[u8], expect: usize) -> Vec<u8> {
        let (mut read, mut write) = stream.split();
        let mut received = vec![0u8; expect];
        let (written, read) = tokio::join!(write.write_all(data), read.read_exact(&mut received));
        written.unwrap();
        read.unwrap();
        received
    }

    #[tokio::test]
    async fn both_directions_stream_at_once_and_are_counted() {
        const SIZE: usize = 16 * 1024 * 1024;
        let (mut client, mut server, relay) = tunnel(Duration::from_secs(30)).await;
        let (to_server, to_client) = (pattern(SIZE, 1), pattern(SIZE, 2));
        let exchange = async {
            tokio::join!(
                client_side(&mut client, &to_server, SIZE),
                server_side(&mut server, &to_client, SIZE),
            )
        };
        let (at_client, at_server) = tokio::time::timeout(Duration::from_secs(20), exchange)
            .await
            .expect("no deadlock while both sides stream");
        assert!(at_client == to_client && at_server == to_server);
        drop((client, server));
        let relayed = tokio::time::timeout(Duration::from_secs(5), relay)
            .await
            .expect("the relay ends with its sockets")
            .unwrap();
        assert_eq!(
            relayed,
            Relayed {
                up: SIZE as u64,
                down: SIZE as u64
            }
        );
    }

    #[tokio::test]
    async fn a_peer_that_stops_reading_ends_the_tunnel_after_the_write_deadline() {
        let idle = Duration::from_millis(300);
        let (mut client, mut server, relay) = tunnel(idle).await;
        // The server never reads, but keeps talking, so the tunnel is never idle: only
        // the stalled write towards it can end the tunnel.
        let talker = tokio::spawn(async move {
            while server.write_all(b"tick").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        // The client floods and reads whatever comes, until its sockets close.
        let client_task = tokio::spawn(async move {
            let (mut read, mut write) = client.split();
            let flood = async {
                let chunk = vec![7u8; 64 * 1024];
                while write.write_all(&chunk).await.is_ok() {}
            };
            let drain = async {
                let mut buffer = vec![0u8; 4096];
                while matches!(read.read(&mut buffer).await, Ok(n) if n > 0) {}
            };
            tokio::join!(flood, drain);
        });
        let started = Instant::now();
        let relayed = tokio::time::timeout(Duration::from_secs(10), relay)
            .await
            .expect("the stalled write ends the tunnel")
            .unwrap();
        let took = started.elapsed();
        assert!(took >= idle, "not before the deadline: {took:?}");
        assert!(relayed.up > 0 && relayed.down > 0, "{relayed:?}");
        talker.abort();
        client_task.abort();
    }

    #[tokio::test]
    async fn one_way_traffic_longer_than_idle_keeps_the_tunnel_open() {
        let idle = Duration::from_millis(200);
        let (mut client, mut server, relay) = tunnel(idle).await;
        // Only the server talks, for five idle periods; the client only listens.
        let talker = async {
            for _ in 0..50 {
                server.write_all(b"0123456789").await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            server.write_all(b"end").await.unwrap();
            server
        };
        let listener = async {
            let mut received = vec![0u8; 503];
            client.read_exact(&mut received).await.unwrap();
            received
        };
        let (mut server, received) = tokio::join!(talker, listener);
        assert!(received.ends_with(b"end"));
        assert!(!relay.is_finished(), "one-way traffic is traffic");
        // Still open both ways.
        client.write_all(b"ping").await.unwrap();
        let mut ping = [0u8; 4];
        server.read_exact(&mut ping).await.unwrap();
        assert_eq!(&ping, b"ping");
        // Then quiet: it closes after `idle`.
        let relayed = tokio::time::timeout(Duration::from_secs(5), relay)
            .await
            .expect("an idle tunnel closes")
            .unwrap();
        assert_eq!(relayed, Relayed { up: 4, down: 503 });
    }

    #[tokio::test]
    async fn half_close_is_passed_on_and_the_other_direction_keeps_relaying() {
        let (mut client, mut server, relay) = tunnel(Duration::from_secs(30)).await;
        client.write_all(b"request").await.unwrap();
        client.shutdown().await.unwrap();
        let mut request = Vec::new();
        server.read_to_end(&mut request).await.unwrap();
        assert_eq!(request, b"request", "the server saw the client's EOF");
        server.write_all(b"response after EOF").await.unwrap();
        server.shutdown().await.unwrap();
        let mut response = Vec::new();
        client.read_to_end(&mut response).await.unwrap();
        assert_eq!(response, b"response after EOF");
        let relayed = tokio::time::timeout(Duration::from_secs(5), relay)
            .await
            .expect("both directions ended")
            .unwrap();
        assert_eq!(relayed, Relayed { up: 7, down: 18 });
    }
}

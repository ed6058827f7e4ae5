//! Relaying a tunnel between the client and the upstream socket.
//!
//! Both directions are pumped at once, by one state machine in the tunnel's one task (no
//! task per direction): a peer that is slow to read holds up only the direction towards
//! it, never the other one, so protocols where both sides stream at once (WebSocket,
//! gRPC, SSH) work as they do directly.
//!
//! An idle tunnel should cost sockets, not buffers: at 10,000 open tunnels, two 8 KiB
//! buffers each (what `copy_bidirectional` keeps) would be 160 MiB doing nothing. So each
//! direction waits for readiness with no buffer, and allocates one only while bytes move;
//! a quiet tunnel holds just the task (under 512 bytes of relay state, checked by a test)
//! and the two sockets.
//!
//! Ends:
//! - half-close is passed on: EOF one way shuts the other side's write half, and the
//!   other direction keeps relaying; the tunnel ends when both directions ended;
//! - a tunnel with no traffic either way for `idle` closes (bytes moving in one direction
//!   are enough to keep it open);
//! - a write that makes no progress for `idle` (a peer that stopped reading) ends the
//!   tunnel, even while the other direction is busy;
//! - an error on either side ends both directions;
//! - the caller's `stop` future completing ends it at once (shutdown, a removed client, the
//!   proxy's lease gone), with the bytes moved so far still counted.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::AsyncWrite;
use tokio::net::TcpStream;
use tokio::time::Instant;

const CHUNK: usize = 16 * 1024;

/// Chunks one direction moves in one poll before it lets the other direction (and the
/// runtime) have a turn.
const CHUNKS_PER_TURN: usize = 16;

/// Bytes moved by a finished relay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Relayed {
    /// Client to upstream.
    pub up: u64,
    /// Upstream to client.
    pub down: u64,
}

/// Relays until both directions ended, an error, `idle` without traffic either way, a
/// write that made no progress for `idle`, or `stop` completing (its output is returned
/// then).
///
/// One hand-written state machine rather than two joined `async` pumps: its state is a
/// few words per direction and one timer (a few hundred bytes per tunnel), where nested
/// readiness and timeout futures would take several times that in every idle tunnel.
pub(crate) async fn relay<S: Future>(
    mut client: TcpStream,
    mut upstream: TcpStream,
    idle: Duration,
    stop: S,
) -> (Relayed, Option<S::Output>) {
    let started = Instant::now();
    let mut up = Direction::new(started);
    let mut down = Direction::new(started);
    // One timer for the idle limit and both write deadlines.
    let timer = tokio::time::sleep_until(started + idle);
    tokio::pin!(timer);
    tokio::pin!(stop);
    let stopped = poll_fn(|cx| {
        if let Poll::Ready(output) = stop.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        let up_state = up.poll(&client, &mut upstream, cx);
        let down_state = down.poll(&upstream, &mut client, cx);
        if matches!(up_state, State::Failed) || matches!(down_state, State::Failed) {
            return Poll::Ready(None);
        }
        if up.finished && down.finished {
            return Poll::Ready(None);
        }
        if matches!(up_state, State::Yielded) || matches!(down_state, State::Yielded) {
            cx.waker().wake_by_ref();
        }
        // A direction with bytes it cannot write is held to its own last progress;
        // otherwise the tunnel is idle once neither direction moved for `idle`.
        let since = match (up.stalled(), down.stalled()) {
            (true, true) => up.progress_at.min(down.progress_at),
            (true, false) => up.progress_at,
            (false, true) => down.progress_at,
            (false, false) => up.progress_at.max(down.progress_at),
        };
        let deadline = since + idle;
        if deadline <= Instant::now() {
            return Poll::Ready(None);
        }
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        // Registers the wake-up; a timer that fired early is re-armed on the next poll.
        if timer.as_mut().poll(cx).is_ready() {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    })
    .await;
    let relayed = Relayed {
        up: up.moved,
        down: down.moved,
    };
    (relayed, stopped)
}

/// What one poll of a direction left it in.
enum State {
    /// Waiting for the socket (its waker is registered), or finished.
    Waiting,
    /// Moved its share for this turn; more may be ready.
    Yielded,
    /// An error: the tunnel ends.
    Failed,
}

/// One direction of the tunnel.
struct Direction {
    /// Bytes read and not yet written (`buffer[written..]`); no capacity while idle.
    buffer: Vec<u8>,
    written: usize,
    /// EOF was read and passed on.
    finished: bool,
    moved: u64,
    /// When this direction last read or wrote a byte.
    progress_at: Instant,
}

impl Direction {
    fn new(now: Instant) -> Self {
        Self {
            buffer: Vec::new(),
            written: 0,
            finished: false,
            moved: 0,
            progress_at: now,
        }
    }

    /// Holds bytes it has not been able to write.
    fn stalled(&self) -> bool {
        self.written < self.buffer.len()
    }

    fn poll(&mut self, from: &TcpStream, to: &mut TcpStream, cx: &mut Context<'_>) -> State {
        if self.finished {
            return State::Waiting;
        }
        match self.pump(from, to, cx) {
            Poll::Ready(Ok(true)) => State::Yielded,
            Poll::Ready(Ok(false)) => {
                // EOF: pass the half-close on; the other direction keeps relaying.
                self.finished = true;
                self.buffer = Vec::new();
                let _ = Pin::new(to).poll_shutdown(cx);
                State::Waiting
            }
            Poll::Ready(Err(_)) => State::Failed,
            Poll::Pending => State::Waiting,
        }
    }

    /// Moves bytes until a socket is not ready (`Pending`), EOF (`Ok(false)`) or the
    /// turn is over (`Ok(true)`).
    fn pump(
        &mut self,
        from: &TcpStream,
        to: &TcpStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<bool>> {
        for _ in 0..CHUNKS_PER_TURN {
            while self.stalled() {
                match to.try_write(&self.buffer[self.written..]) {
                    Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Ok(n) => {
                        self.written += n;
                        self.moved += n as u64;
                        self.progress_at = Instant::now();
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        ready!(to.poll_write_ready(cx))?;
                    }
                    Err(error) => return Poll::Ready(Err(error)),
                }
            }
            if from.poll_read_ready(cx)?.is_pending() {
                // Drained: wait for the next bytes without a buffer.
                self.buffer = Vec::new();
                return Poll::Pending;
            }
            if self.buffer.capacity() == 0 {
                self.buffer.reserve_exact(CHUNK);
            }
            self.buffer.clear();
            self.written = 0;
            match from.try_read_buf(&mut self.buffer) {
                Ok(0) => return Poll::Ready(Ok(false)),
                Ok(_) => self.progress_at = Instant::now(),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
        Poll::Ready(Ok(true))
    }
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
        let relay = tokio::spawn(async move {
            relay(
                gateway_client,
                gateway_upstream,
                idle,
                std::future::pending::<()>(),
            )
            .await
            .0
        });
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

    #[tokio::test]
    async fn stop_ends_the_tunnel_at_once_and_keeps_the_counts() {
        let (mut client, gateway_client) = pair().await;
        let (gateway_upstream, mut server) = pair().await;
        let (stop, stopped) = tokio::sync::oneshot::channel::<&str>();
        let relay = tokio::spawn(relay(
            gateway_client,
            gateway_upstream,
            Duration::from_secs(30),
            async move { stopped.await.unwrap() },
        ));
        client.write_all(b"hello").await.unwrap();
        let mut hello = [0u8; 5];
        server.read_exact(&mut hello).await.unwrap();
        stop.send("cut").unwrap();
        let (relayed, why) = tokio::time::timeout(Duration::from_secs(5), relay)
            .await
            .expect("stop ends the relay")
            .unwrap();
        assert_eq!((relayed, why), (Relayed { up: 5, down: 0 }, Some("cut")));
        // Both sockets were closed by the relay.
        let mut rest = Vec::new();
        assert_eq!(server.read_to_end(&mut rest).await.unwrap(), 0);
        assert_eq!(client.read_to_end(&mut rest).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn an_idle_tunnel_holds_no_buffer() {
        let (_client, gateway_client) = pair().await;
        let (gateway_upstream, _server) = pair().await;
        // The relay's whole state lives in its task: it must not carry a buffer inline
        // (a stack array would cost its size in every idle tunnel).
        let relay = relay(
            gateway_client,
            gateway_upstream,
            Duration::from_secs(1),
            std::future::pending::<()>(),
        );
        let size = std::mem::size_of_val(&relay);
        eprintln!("relay future: {size} bytes");
        assert!(size <= 512, "relay future is {size} bytes");
    }
}

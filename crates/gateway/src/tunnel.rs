//! Relaying a tunnel between the client and the upstream socket.
//!
//! An idle tunnel should cost sockets, not buffers: at 10,000 open tunnels, two 8 KiB
//! buffers each (what `copy_bidirectional` keeps) would be 160 MiB doing nothing. So the
//! relay waits for readiness with no buffer, and allocates one only while bytes move; a
//! quiet tunnel holds just the task and the two sockets. Half-close is passed on (EOF one
//! way shuts the other side's write half) and a tunnel quiet both ways for `idle` closes.

use std::io;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
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

enum Ready {
    Client,
    Upstream,
    Idle,
}

/// Relays until both directions ended, an error, or `idle` without traffic.
pub(crate) async fn relay(
    mut client: TcpStream,
    mut upstream: TcpStream,
    idle: Duration,
) -> Relayed {
    let mut moved = Relayed::default();
    let (mut client_open, mut upstream_open) = (true, true);
    let mut last = Instant::now();
    while client_open || upstream_open {
        let deadline = last + idle;
        let ready = tokio::select! {
            result = client.readable(), if client_open => match result {
                Ok(()) => Ready::Client,
                Err(_) => break,
            },
            result = upstream.readable(), if upstream_open => match result {
                Ok(()) => Ready::Upstream,
                Err(_) => break,
            },
            () = tokio::time::sleep_until(deadline) => Ready::Idle,
        };
        let outcome = match ready {
            Ready::Idle => {
                if last.elapsed() >= idle {
                    break;
                }
                continue;
            }
            Ready::Client => pump(&client, &mut upstream, &mut moved.up).await,
            Ready::Upstream => pump(&upstream, &mut client, &mut moved.down).await,
        };
        match outcome {
            Ok(Pumped::Moved) => last = Instant::now(),
            Ok(Pumped::Spurious) => {}
            Ok(Pumped::Eof) => {
                // Pass the half-close on; keep relaying the other direction.
                match ready {
                    Ready::Client => {
                        client_open = false;
                        let _ = upstream.shutdown().await;
                    }
                    _ => {
                        upstream_open = false;
                        let _ = client.shutdown().await;
                    }
                }
            }
            Err(_) => break,
        }
    }
    moved
}

enum Pumped {
    Moved,
    Spurious,
    Eof,
}

/// Moves whatever `from` has ready into `to`, with a buffer that lives only for this call.
async fn pump(from: &TcpStream, to: &mut TcpStream, counter: &mut u64) -> io::Result<Pumped> {
    let mut buffer: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut moved = false;
    loop {
        buffer.clear();
        match from.try_read_buf(&mut buffer) {
            Ok(0) => return Ok(if moved { Pumped::Moved } else { Pumped::Eof }),
            Ok(n) => {
                to.write_all(&buffer[..n]).await?;
                *counter += n as u64;
                moved = true;
                if n < CHUNK {
                    // Drained for now; go back to waiting without the buffer.
                    return Ok(Pumped::Moved);
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                return Ok(if moved {
                    Pumped::Moved
                } else {
                    Pumped::Spurious
                });
            }
            Err(error) => return Err(error),
        }
    }
}

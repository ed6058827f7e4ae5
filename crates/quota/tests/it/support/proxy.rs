//! A loopback TCP proxy that injects faults between the quota and PostgreSQL.
//!
//! - `Pass`: forwards both ways.
//! - `CutReplies`: forwards requests, but the first reply bytes the server sends are
//!   dropped and the client's connection is closed: the server has finished (and, for an
//!   autocommit statement, committed) but the client never learns the outcome.
//! - `Blackhole`: swallows everything both ways and keeps the connections open: a server
//!   that accepts but never answers. A connection that saw the blackhole stays in it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Mode {
    Pass = 0,
    CutReplies = 1,
    Blackhole = 2,
}

fn mode_of(value: u8) -> Mode {
    match value {
        1 => Mode::CutReplies,
        2 => Mode::Blackhole,
        _ => Mode::Pass,
    }
}

#[derive(Debug)]
pub(crate) struct FaultProxy {
    port: u16,
    mode: Arc<AtomicU8>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:upstream_port`.
    pub(crate) async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let mode = Arc::new(AtomicU8::new(Mode::Pass as u8));
        let shared = mode.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(
                    client_read,
                    server_write,
                    shared.clone(),
                    Direction::Request,
                ));
                tokio::spawn(pump(
                    server_read,
                    client_write,
                    shared.clone(),
                    Direction::Reply,
                ));
            }
        });
        FaultProxy { port, mode, accept }
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Reply,
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mode: Arc<AtomicU8>,
    direction: Direction,
) {
    let mut buffer = vec![0_u8; 16 * 1024];
    let mut blackholed = false;
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        let mode = mode_of(mode.load(Ordering::SeqCst));
        blackholed |= mode == Mode::Blackhole;
        if blackholed {
            continue;
        }
        if mode == Mode::CutReplies && direction == Direction::Reply {
            // Dropping our write half closes the client's side: the reply is lost.
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

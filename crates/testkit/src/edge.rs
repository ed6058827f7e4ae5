//! Real-socket clients for listener tests: a flood of idle connections from one loopback
//! address, a client bound to another loopback address (`127.0.0.2`: all of 127/8 is
//! loopback on Linux), a client that trickles its request a byte at a time, and a check
//! of which connections the server has closed. Async (tokio), unlike the rest of the kit.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The address the idle flood comes from.
pub const FLOOD_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
/// The address of the client that must still be served.
pub const OTHER_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// A TCP connection to `addr` from `source` (bound before connecting). An IPv6 source need
/// not be assigned to any interface, only routed here (it is bound with `IPV6_FREEBIND`):
/// how [`crate::flood`] connects from many addresses of one /64.
pub async fn connect_from(source: IpAddr, addr: SocketAddr) -> io::Result<TcpStream> {
    let domain = if source.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    if source.is_ipv6() {
        socket.set_freebind_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::new(source, 0).into())?;
    let socket = TcpSocket::from_std_stream(std::net::TcpStream::from(socket));
    socket.connect(addr).await
}

/// Opens `count` connections to `addr` (a 127.0.0.1 address, so they come from
/// [`FLOOD_SOURCE`]) that never send a byte, in batches
/// (each connect bounded to 2 s, so a server that stops accepting does not hang the test).
/// Returns the connections that were established.
pub async fn idle_flood(addr: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(count);
    let mut left = count;
    while left > 0 {
        // Small batches: a burst of a few hundred SYNs overflows loopback listen queues
        // on small machines, and each dropped SYN costs a 1 s retry.
        let batch = left.min(50);
        left -= batch;
        let mut tasks = Vec::with_capacity(batch);
        for _ in 0..batch {
            // Not bound first: a port picked at `bind` ignores the destination and soon
            // meets a 4-tuple the server still holds in TIME_WAIT (a 1 s SYN retry);
            // `connect` picks one that is free for this destination.
            tasks.push(tokio::spawn(tokio::time::timeout(
                Duration::from_secs(2),
                TcpStream::connect(addr),
            )));
        }
        for task in tasks {
            if let Ok(Ok(Ok(stream))) = task.await {
                streams.push(stream);
            }
        }
    }
    streams
}

/// How many of `streams` the server has not closed by `deadline` (a read that returns
/// end of file or an error means closed).
pub async fn still_open(streams: Vec<TcpStream>, within: Duration) -> usize {
    let deadline = tokio::time::Instant::now() + within;
    let mut tasks = Vec::with_capacity(streams.len());
    for mut stream in streams {
        tasks.push(tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            loop {
                match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
                    Err(_) => return true,
                    Ok(Ok(0) | Err(_)) => return false,
                    // An answer (say a 408) before the close: keep reading.
                    Ok(Ok(_)) => continue,
                }
            }
        }));
    }
    let mut open = 0;
    for task in tasks {
        if task.await.unwrap_or(true) {
            open += 1;
        }
    }
    open
}

/// Sends `request` from `source` and reads until the server closes or `within` passes;
/// returns what was read (empty when nothing came back in time).
pub async fn exchange_from(
    source: IpAddr,
    addr: SocketAddr,
    request: &[u8],
    within: Duration,
) -> io::Result<Vec<u8>> {
    let work = async {
        let mut stream = connect_from(source, addr).await?;
        stream.write_all(request).await?;
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
        Ok::<_, io::Error>(answer)
    };
    match tokio::time::timeout(within, work).await {
        Ok(answer) => answer,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")),
    }
}

/// Reads an HTTP answer's head from `source` for `request`, bounded by `within`: the
/// status line and headers as text, and whatever body bytes came with them.
pub async fn http_from(
    source: IpAddr,
    addr: SocketAddr,
    request: &str,
    within: Duration,
) -> io::Result<(String, Vec<u8>)> {
    let answer = exchange_from(source, addr, request.as_bytes(), within).await?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no complete head"))?;
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    Ok((head, answer[split + 4..].to_vec()))
}

/// The head of the answer to `request` from `source`, which must come within 1 s: how a
/// listener test shows that a client beside a flood is still served.
///
/// # Panics
/// When no complete answer comes in time.
pub async fn served_within_a_second(source: IpAddr, addr: SocketAddr, request: &str) -> String {
    let started = Instant::now();
    let (head, _) = http_from(source, addr, request, Duration::from_secs(1))
        .await
        .unwrap_or_else(|error| panic!("{source} is not served within 1 s: {error}"));
    eprintln!("{source} served in {:?}", started.elapsed());
    head
}

/// Writes `request` one byte every `every`, from [`OTHER_SOURCE`], until the server
/// closes the connection or the request is sent; returns how long the server let it go
/// on, and whether it was cut off before the last byte.
pub async fn trickle(
    addr: SocketAddr,
    request: &[u8],
    every: Duration,
) -> io::Result<(Duration, bool)> {
    let mut stream = connect_from(OTHER_SOURCE, addr).await?;
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    for byte in request {
        if stream.write_all(&[*byte]).await.is_err() {
            return Ok((started.elapsed(), true));
        }
        // Wait the interval, noticing a close meanwhile.
        match tokio::time::timeout(every, stream.read(&mut buf)).await {
            Err(_) => {}
            Ok(Ok(0) | Err(_)) => return Ok((started.elapsed(), true)),
            Ok(Ok(_)) => {}
        }
    }
    Ok((started.elapsed(), false))
}

/// Writes up to `total` bytes of filler after `head` and counts how many the server took
/// before it closed or answered (bounded by `within`); returns the count and what it
/// answered.
pub async fn upload(
    addr: SocketAddr,
    head: &str,
    total: usize,
    within: Duration,
) -> io::Result<(usize, Vec<u8>)> {
    let mut stream = connect_from(OTHER_SOURCE, addr).await?;
    stream.write_all(head.as_bytes()).await?;
    let (mut reader, mut writer) = stream.into_split();
    let deadline = tokio::time::Instant::now() + within;
    let writing = tokio::spawn(async move {
        let chunk = vec![b' '; 16 * 1024];
        let mut sent = 0usize;
        while sent < total {
            let n = chunk.len().min(total - sent);
            match tokio::time::timeout_at(deadline, writer.write_all(&chunk[..n])).await {
                Ok(Ok(())) => sent += n,
                _ => break,
            }
        }
        sent
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, reader.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
        }
    }
    let sent = writing.await.unwrap_or(total);
    Ok((sent, answer))
}

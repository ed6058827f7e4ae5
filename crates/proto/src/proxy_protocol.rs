//! The PROXY protocol (v1 text and v2 binary) that load balancers put in front of a
//! connection to say whom it is really from: [`read_header`].
//!
//! Only a listener that trusts the peer (a configured load balancer) may call it; from
//! anyone else a PROXY header is ordinary (and then malformed) application data, never a
//! claim about the client. The header is read exactly: never a byte of what follows it.
//! Parsing is `ppp`'s; this module frames the bytes off the stream and bounds them.

use crate::ProtoError;
use ppp::{HeaderResult, v1, v2};
use std::net::{IpAddr, SocketAddr};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The v2 signature.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// A v1 line is at most 107 bytes, CRLF included.
const V1_MAX: usize = 107;
/// The largest v2 header accepted (addresses plus a few TLVs); a longer one is refused.
pub const V2_MAX: usize = 536;

/// What a PROXY header said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxiedFrom {
    /// The original client (source address and port).
    Client(SocketAddr),
    /// `LOCAL` (v2) or `UNKNOWN` (v1): the balancer's own connection, e.g. a health
    /// check; the peer address stands.
    Local,
}

/// Reads one PROXY header (v1 or v2) from the start of `stream`.
///
/// Fails as malformed when the stream does not start with one, or it is over the size
/// caps; wrap it in [`crate::with_timeout`] (the caller's header-read timeout).
pub async fn read_header<S: AsyncRead + Unpin>(stream: &mut S) -> Result<ProxiedFrom, ProtoError> {
    // Eight bytes tell the versions apart ("PROXY TC"/"PROXY UN" vs the v2 signature's
    // start) and are shorter than the shortest header of either.
    let mut header = vec![0u8; 8];
    stream.read_exact(&mut header).await?;
    if header.starts_with(b"PROXY ") {
        read_v1_rest(stream, &mut header).await?;
    } else if header[..] == V2_SIGNATURE[..8] {
        read_v2_rest(stream, &mut header).await?;
    } else {
        return Err(malformed("no PROXY protocol header"));
    }
    match HeaderResult::parse(&header) {
        HeaderResult::V1(Ok(parsed)) => Ok(from_v1(parsed.addresses)),
        HeaderResult::V2(Ok(parsed)) => Ok(from_v2(&parsed)),
        HeaderResult::V1(Err(error)) => Err(malformed(format!("v1: {error}"))),
        HeaderResult::V2(Err(error)) => Err(malformed(format!("v2: {error}"))),
    }
}

/// A v1 header ends with CRLF: read byte by byte (only trusted balancers send these, and
/// never a byte past the line).
async fn read_v1_rest<S: AsyncRead + Unpin>(
    stream: &mut S,
    header: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    while !header.ends_with(b"\r\n") {
        if header.len() >= V1_MAX {
            return Err(malformed("v1 header longer than 107 bytes"));
        }
        header.push(stream.read_u8().await?);
    }
    Ok(())
}

/// A v2 header: the rest of the 16-byte fixed part, then as many bytes as it announces.
async fn read_v2_rest<S: AsyncRead + Unpin>(
    stream: &mut S,
    header: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    header.resize(16, 0);
    stream.read_exact(&mut header[8..16]).await?;
    if header[..12] != V2_SIGNATURE[..] {
        return Err(malformed("bad v2 signature"));
    }
    let length = usize::from(u16::from_be_bytes([header[14], header[15]]));
    if 16 + length > V2_MAX {
        return Err(malformed(format!("v2 header of {} bytes", 16 + length)));
    }
    header.resize(16 + length, 0);
    stream.read_exact(&mut header[16..]).await?;
    Ok(())
}

fn from_v1(addresses: v1::Addresses) -> ProxiedFrom {
    match addresses {
        v1::Addresses::Tcp4(a) => {
            ProxiedFrom::Client(SocketAddr::new(IpAddr::V4(a.source_address), a.source_port))
        }
        v1::Addresses::Tcp6(a) => {
            ProxiedFrom::Client(SocketAddr::new(IpAddr::V6(a.source_address), a.source_port))
        }
        v1::Addresses::Unknown => ProxiedFrom::Local,
    }
}

fn from_v2(header: &v2::Header<'_>) -> ProxiedFrom {
    if header.command == v2::Command::Local {
        return ProxiedFrom::Local;
    }
    match header.addresses {
        v2::Addresses::IPv4(a) => {
            ProxiedFrom::Client(SocketAddr::new(IpAddr::V4(a.source_address), a.source_port))
        }
        v2::Addresses::IPv6(a) => {
            ProxiedFrom::Client(SocketAddr::new(IpAddr::V6(a.source_address), a.source_port))
        }
        v2::Addresses::Unspecified | v2::Addresses::Unix(_) => ProxiedFrom::Local,
    }
}

fn malformed(reason: impl Into<String>) -> ProtoError {
    ProtoError::malformed("proxy", reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8]) -> (Result<ProxiedFrom, ProtoError>, Vec<u8>) {
        let mut stream = bytes;
        let result = read_header(&mut stream).await;
        (result, stream.to_vec())
    }

    fn v2_header(command: v2::Command, from: &str, to: &str) -> Vec<u8> {
        let addresses: v2::Addresses = (
            from.parse::<SocketAddr>().unwrap(),
            to.parse::<SocketAddr>().unwrap(),
        )
            .into();
        v2::Builder::with_addresses(v2::Version::Two | command, v2::Protocol::Stream, addresses)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn v1_gives_the_client_and_leaves_what_follows() {
        let (from, rest) =
            read(b"PROXY TCP4 203.0.113.7 10.0.0.1 51000 443\r\nGET / HTTP/1.1\r\n").await;
        assert_eq!(
            from.unwrap(),
            ProxiedFrom::Client("203.0.113.7:51000".parse().unwrap())
        );
        assert_eq!(rest, b"GET / HTTP/1.1\r\n");
        let (from, _) = read(b"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n").await;
        assert_eq!(
            from.unwrap(),
            ProxiedFrom::Client("[2001:db8::1]:1".parse().unwrap())
        );
        let (from, rest) = read(b"PROXY UNKNOWN\r\nx").await;
        assert_eq!(from.unwrap(), ProxiedFrom::Local);
        assert_eq!(rest, b"x");
    }

    #[tokio::test]
    async fn v2_gives_the_client_and_leaves_what_follows() {
        let mut bytes = v2_header(v2::Command::Proxy, "198.51.100.9:4000", "10.0.0.1:443");
        bytes.extend_from_slice(b"\x05\x01\x00");
        let (from, rest) = read(&bytes).await;
        assert_eq!(
            from.unwrap(),
            ProxiedFrom::Client("198.51.100.9:4000".parse().unwrap())
        );
        assert_eq!(rest, b"\x05\x01\x00");
        let local = v2_header(v2::Command::Local, "198.51.100.9:4000", "10.0.0.1:443");
        assert_eq!(read(&local).await.0.unwrap(), ProxiedFrom::Local);
    }

    #[tokio::test]
    async fn anything_else_is_refused_and_caps_hold() {
        assert!(read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.0.is_err());
        let long = format!("PROXY TCP4 {}\r\n", "1".repeat(200));
        assert!(read(long.as_bytes()).await.0.is_err());
        let mut huge = V2_SIGNATURE.to_vec();
        huge.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        huge.extend(std::iter::repeat_n(0u8, 100));
        assert!(
            read(&huge).await.0.is_err(),
            "a 64 KiB v2 header is refused unread"
        );
        assert!(read(b"PROXY TCP4 1.2.3.4").await.0.is_err(), "cut short");
    }
}

//! The byte layout shared by both sides: constants and the `ATYP | ADDR | PORT` triple.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::{ProtoError, TargetAddr};

pub(super) const VERSION: u8 = 0x05;
pub(super) const AUTH_VERSION: u8 = 0x01;
pub(super) const METHOD_NONE: u8 = 0x00;
pub(super) const METHOD_USER_PASS: u8 = 0x02;
pub(super) const METHOD_NO_ACCEPTABLE: u8 = 0xFF;
pub(super) const CMD_CONNECT: u8 = 0x01;
pub(super) const ATYP_V4: u8 = 0x01;
pub(super) const ATYP_DOMAIN: u8 = 0x03;
pub(super) const ATYP_V6: u8 = 0x04;

pub(super) fn malformed(reason: impl Into<String>) -> ProtoError {
    ProtoError::malformed("socks5", reason)
}

/// Appends `ATYP | ADDR | PORT` for `target`.
pub(super) fn encode_addr(buf: &mut Vec<u8>, target: &TargetAddr) -> Result<(), ProtoError> {
    match target {
        TargetAddr::Ip(SocketAddr::V4(v4)) => {
            buf.push(ATYP_V4);
            buf.extend_from_slice(&v4.ip().octets());
        }
        TargetAddr::Ip(SocketAddr::V6(v6)) => {
            buf.push(ATYP_V6);
            buf.extend_from_slice(&v6.ip().octets());
        }
        TargetAddr::Domain(host, _) => {
            let len = u8::try_from(host.len())
                .ok()
                .filter(|len| *len > 0)
                .ok_or_else(|| malformed("domain must be 1 to 255 bytes"))?;
            buf.push(ATYP_DOMAIN);
            buf.push(len);
            buf.extend_from_slice(host.as_bytes());
        }
    }
    buf.extend_from_slice(&target.port().to_be_bytes());
    Ok(())
}

/// Reads `ADDR | PORT` for an already-read `atyp`. `None` for an unknown address type,
/// so the server can answer `AddressTypeNotSupported` before giving up.
pub(super) async fn read_addr<S>(stream: &mut S, atyp: u8) -> Result<Option<TargetAddr>, ProtoError>
where
    S: AsyncRead + Unpin,
{
    let target = match atyp {
        ATYP_V4 => {
            let mut raw = [0u8; 4 + 2];
            stream.read_exact(&mut raw).await?;
            let ip = Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]);
            TargetAddr::Ip(SocketAddr::new(
                ip.into(),
                u16::from_be_bytes([raw[4], raw[5]]),
            ))
        }
        ATYP_V6 => {
            let mut raw = [0u8; 16 + 2];
            stream.read_exact(&mut raw).await?;
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&raw[..16]);
            let port = u16::from_be_bytes([raw[16], raw[17]]);
            TargetAddr::Ip(SocketAddr::new(Ipv6Addr::from(octets).into(), port))
        }
        ATYP_DOMAIN => {
            let len = usize::from(stream.read_u8().await?);
            if len == 0 {
                return Err(malformed("empty domain name"));
            }
            // 255 + 2 bytes at most: the length byte bounds this read.
            let mut raw = vec![0u8; len + 2];
            stream.read_exact(&mut raw).await?;
            let port = u16::from_be_bytes([raw[len], raw[len + 1]]);
            raw.truncate(len);
            let host = String::from_utf8(raw).map_err(|_| malformed("domain name is not UTF-8"))?;
            TargetAddr::domain(host, port)
                .map_err(|_| malformed("domain name has forbidden characters"))?
        }
        _ => return Ok(None),
    };
    Ok(Some(target))
}

//! Client side: tunnel through a SOCKS5 proxy (RFC 1928 `CONNECT`, RFC 1929 auth).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Reply;
use super::wire::{
    AUTH_VERSION, CMD_CONNECT, METHOD_NO_ACCEPTABLE, METHOD_NONE, METHOD_USER_PASS, VERSION,
    encode_addr, malformed, read_addr,
};
use crate::{ProtoError, TargetAddr};

/// Asks the SOCKS5 server on `stream` to `CONNECT` to `target`, authenticating with
/// `auth = Some((username, password))` when the server asks for it.
///
/// Returns the server's bound address (often `0.0.0.0:0`, sometimes a domain). On success
/// the stream is positioned at the first tunnel byte: nothing past the reply is read.
///
/// Errors: [`ProtoError::AuthRejected`] when the server refuses the credentials or wants
/// a method we cannot offer; [`ProtoError::SocksRejected`] for a non-success reply;
/// [`ProtoError::Malformed`] for a broken server or a username/password/domain too long to
/// encode; [`ProtoError::Io`] otherwise. No timeout: see [`crate::with_timeout`].
pub async fn connect<S>(
    stream: &mut S,
    target: &TargetAddr,
    auth: Option<(&str, &str)>,
) -> Result<TargetAddr, ProtoError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    // Validate everything we will send before the first byte, so a caller bug never
    // leaves a half-spoken handshake on a pooled connection.
    let mut request = Vec::with_capacity(4 + 1 + 255 + 2);
    request.extend_from_slice(&[VERSION, CMD_CONNECT, 0x00]);
    encode_addr(&mut request, target)?;
    let auth_message = auth
        .map(|(user, pass)| encode_auth(user, pass))
        .transpose()?;

    // Offer "no auth" too when we have credentials: a proxy that does not need them
    // should not fail us for having them.
    let greeting: &[u8] = if auth_message.is_some() {
        &[VERSION, 2, METHOD_NONE, METHOD_USER_PASS]
    } else {
        &[VERSION, 1, METHOD_NONE]
    };
    stream.write_all(greeting).await?;
    stream.flush().await?;

    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice).await?;
    if choice[0] != VERSION {
        return Err(malformed(format!(
            "server speaks version {:#04x}",
            choice[0]
        )));
    }
    match (choice[1], auth_message) {
        (METHOD_NONE, _) => {}
        (METHOD_USER_PASS, Some(message)) => {
            stream.write_all(&message).await?;
            stream.flush().await?;
            let mut verdict = [0u8; 2];
            stream.read_exact(&mut verdict).await?;
            // Some servers answer the sub-negotiation with version 5; the status byte is
            // what matters.
            if verdict[0] != AUTH_VERSION && verdict[0] != VERSION {
                return Err(malformed("bad auth sub-negotiation version"));
            }
            if verdict[1] != 0x00 {
                return Err(ProtoError::AuthRejected);
            }
        }
        (METHOD_NO_ACCEPTABLE, _) | (METHOD_USER_PASS, None) => {
            return Err(ProtoError::AuthRejected);
        }
        (other, _) => {
            return Err(malformed(format!(
                "server chose unoffered method {other:#04x}"
            )));
        }
    }

    stream.write_all(&request).await?;
    stream.flush().await?;

    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await?;
    if head[0] != VERSION {
        return Err(malformed(format!("reply has version {:#04x}", head[0])));
    }
    let reply = Reply::from_code(head[1]);
    // Read the bound address even on failure? No: servers commonly close right after a
    // failure reply, and the code alone is what the caller needs.
    if reply != Reply::Succeeded {
        return Err(ProtoError::SocksRejected { reply });
    }
    read_addr(stream, head[3])
        .await?
        .ok_or_else(|| malformed(format!("reply has unknown address type {:#04x}", head[3])))
}

/// The RFC 1929 request: `VER | ULEN | UNAME | PLEN | PASSWD`.
fn encode_auth(user: &str, pass: &str) -> Result<Vec<u8>, ProtoError> {
    let ulen = u8::try_from(user.len())
        .ok()
        .filter(|len| *len > 0)
        .ok_or_else(|| malformed("username must be 1 to 255 bytes"))?;
    let plen = u8::try_from(pass.len()).map_err(|_| malformed("password longer than 255 bytes"))?;
    let mut message = Vec::with_capacity(3 + user.len() + pass.len());
    message.push(AUTH_VERSION);
    message.push(ulen);
    message.extend_from_slice(user.as_bytes());
    message.push(plen);
    message.extend_from_slice(pass.as_bytes());
    Ok(message)
}

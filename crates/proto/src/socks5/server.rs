//! Server side: method negotiation, RFC 1929 credentials, the request and the reply, as
//! separate steps so the caller decides on credentials itself.

use std::fmt;
use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Reply;
use super::wire::{
    AUTH_VERSION, CMD_CONNECT, METHOD_NO_ACCEPTABLE, METHOD_NONE, METHOD_USER_PASS, VERSION,
    encode_addr, malformed, read_addr,
};
use crate::{ProtoError, TargetAddr};

/// Username and password a client sent (RFC 1929). `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The username (for the gateway: the client id plus selectors).
    pub username: String,
    /// The password.
    pub password: String,
}

impl Credentials {
    /// Builds credentials from anything string-like.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            password: password.into(),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// What [`accept`] learned from a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerRequest {
    /// The credentials the client authenticated with, if it used RFC 1929.
    pub credentials: Option<Credentials>,
    /// Where the client wants to go.
    pub target: TargetAddr,
}

/// Reads the client's greeting and picks a method.
///
/// With `auth_required`, only username/password is acceptable. Without it, "no auth" is
/// picked when offered, else username/password (the credentials are then still returned,
/// and the caller still answers with [`send_auth_result`]).
///
/// Returns `Some(credentials)` when the client sent RFC 1929 credentials: the caller must
/// then call [`send_auth_result`] before [`read_request`]. Returns `None` when no
/// authentication happened. When no offered method is acceptable, answers `0xFF` and
/// returns [`ProtoError::AuthRejected`].
pub async fn negotiate<S>(
    stream: &mut S,
    auth_required: bool,
) -> Result<Option<Credentials>, ProtoError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).await?;
    if head[0] != VERSION {
        return Err(malformed(format!("client speaks version {:#04x}", head[0])));
    }
    if head[1] == 0 {
        return Err(malformed("client offers no methods"));
    }
    let mut methods = [0u8; 255];
    let methods = &mut methods[..usize::from(head[1])];
    stream.read_exact(methods).await?;

    let chosen = if !auth_required && methods.contains(&METHOD_NONE) {
        METHOD_NONE
    } else if methods.contains(&METHOD_USER_PASS) {
        METHOD_USER_PASS
    } else {
        METHOD_NO_ACCEPTABLE
    };
    stream.write_all(&[VERSION, chosen]).await?;
    stream.flush().await?;
    match chosen {
        METHOD_NONE => Ok(None),
        METHOD_USER_PASS => read_credentials(stream).await.map(Some),
        _ => Err(ProtoError::AuthRejected),
    }
}

/// Reads `VER | ULEN | UNAME | PLEN | PASSWD`. Empty usernames and passwords are passed
/// on (the caller's verifier refuses them), non-UTF-8 ones are malformed.
async fn read_credentials<S>(stream: &mut S) -> Result<Credentials, ProtoError>
where
    S: AsyncRead + Unpin,
{
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).await?;
    if head[0] != AUTH_VERSION {
        return Err(malformed(format!(
            "auth sub-negotiation version {:#04x}",
            head[0]
        )));
    }
    let username = read_short_string(stream, usize::from(head[1]), "username").await?;
    let plen = usize::from(stream.read_u8().await?);
    let password = read_short_string(stream, plen, "password").await?;
    Ok(Credentials { username, password })
}

async fn read_short_string<S>(stream: &mut S, len: usize, what: &str) -> Result<String, ProtoError>
where
    S: AsyncRead + Unpin,
{
    let mut raw = [0u8; 255];
    let raw = &mut raw[..len];
    stream.read_exact(raw).await?;
    String::from_utf8(raw.to_vec()).map_err(|_| malformed(format!("{what} is not UTF-8")))
}

/// Answers the RFC 1929 sub-negotiation: status 0 when `ok`, 1 otherwise. After a
/// failure the caller closes the connection (RFC 1929 §2 requires it).
pub async fn send_auth_result<S>(stream: &mut S, ok: bool) -> Result<(), ProtoError>
where
    S: AsyncWrite + Unpin,
{
    stream
        .write_all(&[AUTH_VERSION, if ok { 0x00 } else { 0x01 }])
        .await?;
    stream.flush().await?;
    Ok(())
}

/// Reads the client's request. Only `CONNECT` is supported: other commands and unknown
/// address types are answered with the fitting reply here, then reported as
/// [`ProtoError::Malformed`], and the caller closes the connection.
pub async fn read_request<S>(stream: &mut S) -> Result<TargetAddr, ProtoError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await?;
    if head[0] != VERSION {
        return Err(malformed(format!("request has version {:#04x}", head[0])));
    }
    let [_, command, _reserved, atyp] = head;
    if command != CMD_CONNECT {
        send_reply(stream, Reply::CommandNotSupported, unspecified()).await?;
        return Err(malformed(format!("unsupported command {command:#04x}")));
    }
    match read_addr(stream, atyp).await {
        Ok(Some(target)) => Ok(target),
        Ok(None) => {
            send_reply(stream, Reply::AddressTypeNotSupported, unspecified()).await?;
            Err(malformed(format!("unknown address type {atyp:#04x}")))
        }
        Err(err @ ProtoError::Malformed { .. }) => {
            send_reply(stream, Reply::GeneralFailure, unspecified()).await?;
            Err(err)
        }
        Err(err) => Err(err),
    }
}

/// Sends `VER | REP | RSV | ATYP | BND.ADDR | BND.PORT`. After a non-success reply the
/// caller closes the connection; after `Succeeded` the stream carries the tunnel.
pub async fn send_reply<S>(
    stream: &mut S,
    reply: Reply,
    bound: SocketAddr,
) -> Result<(), ProtoError>
where
    S: AsyncWrite + Unpin,
{
    let mut message = Vec::with_capacity(4 + 16 + 2);
    message.extend_from_slice(&[VERSION, reply.code(), 0x00]);
    encode_addr(&mut message, &TargetAddr::Ip(bound))?;
    stream.write_all(&message).await?;
    stream.flush().await?;
    Ok(())
}

/// The whole server handshake up to the request, with a synchronous `verify` for
/// credentials. On refused credentials, answers the failure and returns
/// [`ProtoError::AuthRejected`]. The caller dials `target` and then calls [`send_reply`].
pub async fn accept<S, F>(
    stream: &mut S,
    auth_required: bool,
    verify: F,
) -> Result<ServerRequest, ProtoError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(&Credentials) -> bool,
{
    let credentials = negotiate(stream, auth_required).await?;
    if let Some(creds) = &credentials {
        let ok = verify(creds);
        send_auth_result(stream, ok).await?;
        if !ok {
            return Err(ProtoError::AuthRejected);
        }
    }
    let target = read_request(stream).await?;
    Ok(ServerRequest {
        credentials,
        target,
    })
}

fn unspecified() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}

//! The SOCKS5 listener's relay: the client's `CONNECT` goes to the owner as an HTTP
//! `CONNECT` over a hop connection of its own. On the owner's `200` the client gets
//! "succeeded" and the bytes are spliced both ways; a refusal becomes the SOCKS5 reply the
//! gateway gives for that refusal (its `X-Proxypool-Error` code:
//! [`Refusal::socks_reply_of`]).

use super::{Target, TunnelAsk, splice, tunnel};
use crate::access::Exchange;
use crate::fleet::hop_client::TunnelAnswer;
use crate::fleet::metrics::RelayKind;
use crate::inbound::admission;
use crate::policy::limits::ConnectionPermit;
use crate::refusal::{ERROR_HEADER, Refusal};
use crate::routing::request::Authenticated;
use crate::state::Shared;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use proxypool_proto::TargetAddr;
use proxypool_proto::socks5::{self, Reply};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use tokio::net::TcpStream;

/// The bound address of every reply (`0.0.0.0:0`, ATYP IPv4), as the listener sends.
const UNSPECIFIED: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// What the owner answered.
#[derive(Debug)]
pub(crate) enum Relayed {
    /// The tunnel is open: the stream through the owner, and the client's place held
    /// for the tunnel's life.
    Open {
        stream: TokioIo<Upgraded>,
        permit: ConnectionPermit,
    },
    /// Refused: the SOCKS5 reply for the owner's refusal.
    Refused(u8),
}

/// Relays a SOCKS5 `CONNECT` to `destination` to `target`'s member; `Ok(None)`: route it
/// here after all (this gateway is the next owner).
pub(crate) async fn relay(
    shared: &Shared,
    target: Target,
    auth: &mut Authenticated,
    username: &str,
    destination: &TargetAddr,
    peer: SocketAddr,
    exchange: &mut Exchange,
) -> Result<Option<Relayed>, Refusal> {
    admission::admit(shared, &auth.client, destination)?;
    let permit =
        ConnectionPermit::try_acquire(&auth.client.connections, auth.client.max_connections)?;
    let authority = destination.to_string();
    let ask = TunnelAsk {
        authority: &authority,
        username,
        peer,
    };
    let answer = tunnel(shared, target, RelayKind::Socks5, auth, ask, exchange).await?;
    Ok(answer.map(|answer| match answer {
        TunnelAnswer::Open { stream, .. } => Relayed::Open { stream, permit },
        TunnelAnswer::Refused(response) => {
            let code = response
                .headers()
                .get(ERROR_HEADER)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default();
            Relayed::Refused(Refusal::socks_reply_of(code, response.status().as_u16()))
        }
    }))
}

/// Answers the client with the owner's outcome and, for an open tunnel, splices it.
pub(crate) async fn finish(shared: &Shared, mut client: TcpStream, relayed: Relayed) {
    match relayed {
        Relayed::Open { stream, permit } => {
            if socks5::send_reply(&mut client, Reply::Succeeded, UNSPECIFIED)
                .await
                .is_ok()
            {
                splice(shared, client, stream).await;
            }
            drop(permit);
        }
        Relayed::Refused(reply) => {
            let _ = socks5::send_reply(&mut client, Reply::from_code(reply), UNSPECIFIED).await;
        }
    }
}

//! The SOCKS5 kind: RFC 1928 `CONNECT` with RFC 1929 username/password.

use std::sync::Arc;

use proxypool_proto::ProtoError;
use proxypool_proto::socks5::{self, Reply};
use tokio::net::{TcpListener, TcpStream};

use super::shared::{Shared, admit, relay};
use super::stats::Counters;
use crate::exit::connect_from;
use crate::http::accept_next;
use crate::shutdown::{ShutdownSignal, spawn_until};

pub(super) async fn serve(listener: TcpListener, mut signal: ShutdownSignal, shared: Arc<Shared>) {
    while let Some((stream, _peer)) = accept_next(&listener, &mut signal).await {
        let Some(stream) = admit(&shared, stream) else {
            continue;
        };
        let shared = Arc::clone(&shared);
        spawn_until(&signal, async move {
            let _ = session(&shared, stream).await;
        });
    }
}

async fn session(shared: &Shared, mut stream: TcpStream) -> Result<(), ProtoError> {
    let offered = socks5::negotiate(&mut stream, shared.requires_auth()).await;
    let credentials = match offered {
        Ok(credentials) => credentials,
        Err(err) => {
            if matches!(err, ProtoError::AuthRejected) {
                // The client offered no username/password although we require one.
                Counters::bump(&shared.counters.auth_failures);
            }
            return Err(err);
        }
    };
    let exit = shared.exit_for(
        credentials
            .as_ref()
            .map(|c| (c.username.as_str(), c.password.as_str())),
    );
    if credentials.is_some() {
        let ok = exit.is_some();
        if !ok {
            Counters::bump(&shared.counters.auth_failures);
        }
        socks5::send_auth_result(&mut stream, ok).await?;
    }
    let Some(exit) = exit else {
        return Err(ProtoError::AuthRejected);
    };
    let target = socks5::read_request(&mut stream).await?;
    if shared.dice.roll() {
        Counters::bump(&shared.counters.injected_failures);
        return socks5::send_reply(&mut stream, Reply::GeneralFailure, unspecified()).await;
    }
    shared.delay().await;
    let outbound = match connect_from(exit, &target).await {
        Ok(outbound) => outbound,
        Err(err) => {
            Counters::bump(&shared.counters.connect_failures);
            return socks5::send_reply(&mut stream, Reply::from_io_error(&err), unspecified())
                .await;
        }
    };
    Counters::bump(&shared.counters.tunnels);
    let bound = outbound.local_addr().unwrap_or_else(|_| unspecified());
    socks5::send_reply(&mut stream, Reply::Succeeded, bound).await?;
    relay(stream, outbound).await;
    Ok(())
}

fn unspecified() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([0, 0, 0, 0], 0))
}

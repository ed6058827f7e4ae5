//! Both sides against each other and against hand-written bytes, over in-memory pipes.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

use super::*;
use crate::{ProtoError, TargetAddr};

fn pipe() -> (DuplexStream, DuplexStream) {
    duplex(4096)
}

fn bound() -> SocketAddr {
    "10.1.2.3:4567".parse().unwrap()
}

fn alice(c: &Credentials) -> bool {
    c.username == "alice" && c.password == "secret"
}

#[tokio::test]
async fn connect_with_auth_round_trip_and_no_overread() {
    let (mut client, mut server) = pipe();
    let target: TargetAddr = "example.com:443".parse().unwrap();
    let server_side = async {
        let request = accept(&mut server, true, alice).await.unwrap();
        send_reply(&mut server, Reply::Succeeded, bound())
            .await
            .unwrap();
        // Tunnel data right behind the reply, in the same write burst.
        server.write_all(b"banner").await.unwrap();
        request
    };
    let client_side = async {
        let bound = connect(&mut client, &target, Some(("alice", "secret")))
            .await
            .unwrap();
        let mut banner = [0u8; 6];
        client.read_exact(&mut banner).await.unwrap();
        (bound, banner)
    };
    let (request, (got_bound, banner)) = tokio::join!(server_side, client_side);
    assert_eq!(request.target, target);
    assert_eq!(
        request.credentials,
        Some(Credentials::new("alice", "secret"))
    );
    assert_eq!(got_bound, TargetAddr::Ip(bound()));
    assert_eq!(&banner, b"banner");
}

#[tokio::test]
async fn connect_without_auth_ipv4_and_ipv6() {
    for text in ["192.0.2.1:80", "[2001:db8::1]:8443"] {
        let (mut client, mut server) = pipe();
        let target: TargetAddr = text.parse().unwrap();
        let server_side = async {
            let request = accept(&mut server, false, |_| unreachable!())
                .await
                .unwrap();
            send_reply(&mut server, Reply::Succeeded, "[::1]:9".parse().unwrap())
                .await
                .unwrap();
            request
        };
        let (request, got) = tokio::join!(server_side, connect(&mut client, &target, None));
        assert_eq!(request.target, target);
        assert_eq!(request.credentials, None);
        assert_eq!(got.unwrap(), TargetAddr::Ip("[::1]:9".parse().unwrap()));
    }
}

#[tokio::test]
async fn client_with_credentials_to_server_without_auth_skips_auth() {
    let (mut client, mut server) = pipe();
    let target: TargetAddr = "example.org:80".parse().unwrap();
    let server_side = async {
        let creds = negotiate(&mut server, false).await.unwrap();
        let target = read_request(&mut server).await.unwrap();
        send_reply(&mut server, Reply::Succeeded, bound())
            .await
            .unwrap();
        (creds, target)
    };
    let (got, result) = tokio::join!(server_side, connect(&mut client, &target, Some(("u", "p"))));
    assert_eq!(got, (None, target));
    result.unwrap();
}

#[tokio::test]
async fn wrong_credentials_are_rejected_on_both_sides() {
    let (mut client, mut server) = pipe();
    let target: TargetAddr = "example.com:443".parse().unwrap();
    let (server_result, client_result) = tokio::join!(
        accept(&mut server, true, alice),
        connect(&mut client, &target, Some(("alice", "wrong")))
    );
    assert!(matches!(server_result, Err(ProtoError::AuthRejected)));
    let err = client_result.unwrap_err();
    assert!(matches!(err, ProtoError::AuthRejected), "{err}");
    assert!(err.is_auth_rejected());
}

#[tokio::test]
async fn auth_required_but_client_has_no_credentials() {
    let (mut client, mut server) = pipe();
    let target: TargetAddr = "example.com:443".parse().unwrap();
    let (server_result, client_result) = tokio::join!(
        accept(&mut server, true, alice),
        connect(&mut client, &target, None)
    );
    assert!(matches!(server_result, Err(ProtoError::AuthRejected)));
    assert!(matches!(client_result, Err(ProtoError::AuthRejected)));
}

#[tokio::test]
async fn failure_reply_becomes_socks_rejected() {
    let (mut client, mut server) = pipe();
    let target: TargetAddr = "192.0.2.1:80".parse().unwrap();
    let server_side = async {
        accept(&mut server, false, |_| true).await.unwrap();
        send_reply(&mut server, Reply::ConnectionRefused, bound())
            .await
            .unwrap();
    };
    let (_, result) = tokio::join!(server_side, connect(&mut client, &target, None));
    assert!(matches!(
        result,
        Err(ProtoError::SocksRejected {
            reply: Reply::ConnectionRefused
        })
    ));
}

/// The exact RFC bytes a client sends, checked against a hand-written server.
#[tokio::test]
async fn client_sends_rfc_bytes() {
    let (mut client, mut server) = pipe();
    let target: TargetAddr = "ab.c:258".parse().unwrap();
    let server_side = async {
        let mut greeting = [0u8; 4];
        server.read_exact(&mut greeting).await.unwrap();
        assert_eq!(greeting, [5, 2, 0, 2]);
        server.write_all(&[5, 2]).await.unwrap();
        let mut auth = [0u8; 6];
        server.read_exact(&mut auth).await.unwrap();
        assert_eq!(auth, [1, 1, b'u', 2, b'p', b'w']);
        server.write_all(&[1, 0]).await.unwrap();
        let mut request = [0u8; 11];
        server.read_exact(&mut request).await.unwrap();
        assert_eq!(request, [5, 1, 0, 3, 4, b'a', b'b', b'.', b'c', 1, 2]);
        // Bound address as a domain, which clients must accept too.
        server
            .write_all(&[5, 0, 0, 3, 1, b'x', 0, 80])
            .await
            .unwrap();
    };
    let (_, result) = tokio::join!(
        server_side,
        connect(&mut client, &target, Some(("u", "pw")))
    );
    assert_eq!(result.unwrap(), TargetAddr::Domain("x".into(), 80));
}

/// Feeds `bytes` to a server, then closes; returns what `accept` said and what it wrote.
async fn server_on(
    bytes: &[u8],
    auth_required: bool,
) -> (Result<ServerRequest, ProtoError>, Vec<u8>) {
    let (mut client, mut server) = pipe();
    client.write_all(bytes).await.unwrap();
    client.shutdown().await.unwrap();
    let result = accept(&mut server, auth_required, alice).await;
    drop(server);
    let mut written = Vec::new();
    client.read_to_end(&mut written).await.unwrap();
    (result, written)
}

#[tokio::test]
async fn server_rejects_malformed_greetings() {
    let (result, written) = server_on(&[4, 1, 0], false).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );
    assert!(written.is_empty());

    let (result, _) = server_on(&[5, 0], false).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    // Truncated: says 3 methods, sends 1.
    let (result, _) = server_on(&[5, 3, 0], false).await;
    assert!(matches!(result, Err(ProtoError::Io(_))), "{result:?}");

    // Only GSSAPI offered.
    let (result, written) = server_on(&[5, 1, 1], false).await;
    assert!(
        matches!(result, Err(ProtoError::AuthRejected)),
        "{result:?}"
    );
    assert_eq!(written, [5, 0xFF]);
}

#[tokio::test]
async fn server_rejects_malformed_auth() {
    let (result, _) = server_on(&[5, 1, 2, 9, 1, b'a', 1, b'b'], true).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    let (result, _) = server_on(&[5, 1, 2, 1, 2, 0xC3, 0x28, 1, b'b'], true).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    // Password length says 9, stream ends.
    let (result, _) = server_on(&[5, 1, 2, 1, 1, b'a', 9, b'b'], true).await;
    assert!(matches!(result, Err(ProtoError::Io(_))), "{result:?}");

    // Wrong password: the client is told 0x01.
    let mut bytes = vec![5, 1, 2, 1, 5];
    bytes.extend_from_slice(b"alice");
    bytes.push(3);
    bytes.extend_from_slice(b"bad");
    let (result, written) = server_on(&bytes, true).await;
    assert!(
        matches!(result, Err(ProtoError::AuthRejected)),
        "{result:?}"
    );
    assert_eq!(written, [5, 2, 1, 1]);
}

#[tokio::test]
async fn server_rejects_malformed_requests_with_fitting_replies() {
    let reply_for = |code: u8| vec![5, 0, 5, code, 0, 1, 0, 0, 0, 0, 0, 0];

    // BIND is not supported.
    let (result, written) = server_on(&[5, 1, 0, 5, 2, 0, 1, 1, 2, 3, 4, 0, 80], false).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );
    assert_eq!(written, reply_for(7));

    // Unknown address type.
    let (result, written) = server_on(&[5, 1, 0, 5, 1, 0, 9, 1, 2], false).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );
    assert_eq!(written, reply_for(8));

    // Empty domain.
    let (result, written) = server_on(&[5, 1, 0, 5, 1, 0, 3, 0, 0, 80], false).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );
    assert_eq!(written, reply_for(1));

    // A domain that would inject a header line.
    let (result, _) = server_on(
        &[5, 1, 0, 5, 1, 0, 3, 4, b'a', b'\r', b'\n', b'b', 0, 80],
        false,
    )
    .await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    // Wrong version in the request.
    let (result, _) = server_on(&[5, 1, 0, 4, 1, 0, 1, 1, 2, 3, 4, 0, 80], false).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    // Truncated IPv6 address.
    let (result, _) = server_on(&[5, 1, 0, 5, 1, 0, 4, 1, 2, 3], false).await;
    assert!(matches!(result, Err(ProtoError::Io(_))), "{result:?}");
}

/// Feeds `bytes` as the server's side of the conversation to a client.
async fn client_on(bytes: &[u8], auth: Option<(&str, &str)>) -> Result<TargetAddr, ProtoError> {
    let (mut client, mut server) = pipe();
    server.write_all(bytes).await.unwrap();
    server.shutdown().await.unwrap();
    let target: TargetAddr = "192.0.2.1:80".parse().unwrap();
    connect(&mut client, &target, auth).await
}

#[tokio::test]
async fn client_rejects_malformed_servers() {
    let result = client_on(&[4, 0], None).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    // Chose GSSAPI, which we never offered.
    let result = client_on(&[5, 1], None).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    // Wants user/pass, we have none.
    let result = client_on(&[5, 2], None).await;
    assert!(
        matches!(result, Err(ProtoError::AuthRejected)),
        "{result:?}"
    );

    let result = client_on(&[5, 2, 7, 0], Some(("u", "p"))).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    let result = client_on(&[5, 0, 4, 0, 0, 1, 0, 0, 0, 0, 0, 0], None).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    let result = client_on(&[5, 0, 5, 0, 0, 7, 0, 0], None).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );

    // Server hangs up after the method choice.
    let result = client_on(&[5, 0], None).await;
    assert!(matches!(result, Err(ProtoError::Io(_))), "{result:?}");
}

#[tokio::test]
async fn client_refuses_unencodable_arguments_before_sending() {
    let (mut client, server) = pipe();
    let long = "u".repeat(256);
    let target: TargetAddr = "192.0.2.1:80".parse().unwrap();
    let result = connect(&mut client, &target, Some((&long, "p"))).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );
    let result = connect(&mut client, &target, Some(("", "p"))).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );
    let domain = TargetAddr::Domain("x".repeat(256), 80);
    let result = connect(&mut client, &domain, None).await;
    assert!(
        matches!(result, Err(ProtoError::Malformed { .. })),
        "{result:?}"
    );
    // Nothing was written.
    drop(client);
    let mut server = server;
    let mut written = Vec::new();
    server.read_to_end(&mut written).await.unwrap();
    assert!(written.is_empty());
}

#[test]
fn credentials_debug_hides_the_password() {
    let text = format!("{:?}", Credentials::new("alice", "hunter2"));
    assert!(text.contains("alice"));
    assert!(!text.contains("hunter2"));
}

#[tokio::test]
async fn server_reads_a_numeric_domain_as_the_address_it_denotes() {
    // No auth, CONNECT, ATYP domain "2130706434" (127.0.0.2), port 80.
    let mut bytes = vec![5, 1, 0, 5, 1, 0, 3, 10];
    bytes.extend_from_slice(b"2130706434");
    bytes.extend_from_slice(&[0, 80]);
    let (result, _) = server_on(&bytes, false).await;
    assert_eq!(
        result.unwrap().target,
        TargetAddr::Ip("127.0.0.2:80".parse().unwrap())
    );
}

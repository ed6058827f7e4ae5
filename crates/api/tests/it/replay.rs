//! A replay after a dropped connection: the client sends an extraction with an
//! `Idempotency-Key`, loses the connection (before or after the server answered), and
//! retries with the same key. It gets the identical body and the quota is charged once.
//! Raw TCP, so the client really goes away mid-request.

use crate::common::*;
use proxypool_quota::Operation;
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

on_memory_and_sqlite!(
    dropped_before_the_answer_then_replayed,
    answer_lost_after_sending_then_replayed,
);

fn raw_request(key: &str, body: &str) -> String {
    format!(
        "POST /v1/extractions HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {ALICE}\r\n\
         Content-Type: application/json\r\nIdempotency-Key: {key}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn dropped_before_the_answer_then_replayed(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    server.seed("acme", 0, 10).await;
    let body = json!({"count": 3}).to_string();

    // Send the whole request and hang up without reading a byte of the answer.
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    socket
        .write_all(raw_request("lost-1", &body).as_bytes())
        .await
        .unwrap();
    drop(socket);

    // The retry may arrive while the first attempt is still running or after it finished
    // (or, had the server dropped it before admission, as the first attempt): either way
    // one extraction, one charge, and every replay answers the same bytes. A first attempt
    // still running when the retry arrives has finished before the retry is charged; one
    // that starts later replays what the retry left, so the counts are final at once.
    let first = server
        .extract(ALICE, Some("lost-1"), &json!({"count": 3}))
        .await;
    assert_eq!(first.status, 200, "{}", first.text());
    let second = server
        .extract(ALICE, Some("lost-1"), &json!({"count": 3}))
        .await;
    assert_eq!(second.body, first.body);
    assert_eq!(second.header("idempotent-replayed"), Some("true"));
    let id = first.json()["id"].as_str().unwrap().to_owned();
    let read = server
        .get(&format!("/v1/extractions/{id}"), Some(ALICE))
        .await;
    assert_eq!(read.body, first.body);

    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        1
    );
    assert_eq!(
        server.unextracted("acme").await,
        7,
        "exactly one extraction happened"
    );
}

async fn answer_lost_after_sending_then_replayed(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    server.seed("acme", 0, 10).await;
    let body = json!({"count": 2, "mode": "all_or_nothing"}).to_string();

    // The server answers; the bytes reach the socket, then the connection dies before the
    // application uses them. Keep what was on the wire to compare.
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    socket
        .write_all(raw_request("lost-2", &body).as_bytes())
        .await
        .unwrap();
    let mut wire = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut wire))
        .await
        .unwrap()
        .unwrap();
    drop(socket);
    let text = String::from_utf8(wire).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let lost_body = text.split("\r\n\r\n").nth(1).unwrap().as_bytes().to_vec();

    let replay = server
        .extract(
            ALICE,
            Some("lost-2"),
            &json!({"count": 2, "mode": "all_or_nothing"}),
        )
        .await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        replay.body, lost_body,
        "the replay is the lost answer, byte for byte"
    );
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        1
    );
    assert_eq!(server.unextracted("acme").await, 8);
}

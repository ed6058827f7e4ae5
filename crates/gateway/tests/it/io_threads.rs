//! The client listeners served on I/O threads (`io_threads`): the threads start with the
//! gateway, serve its connections, and end when it stops, gracefully, twice in one
//! process, so none is leaked, and with a gateway dropped without running; `io_threads = 0`
//! serves on the caller's runtime instead.

use crate::common::control::TestController;
use crate::common::{Running, WORKER, alone, config, eventually, holds_connections};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The gateway's I/O threads alive in this process, by name.
fn io_threads_alive() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("gateway-io-"))
        .count()
}

/// The first line of the gateway's answer to a plain request (there is no snapshot, so
/// it refuses; any HTTP answer proves the connection was served).
async fn status_line(http: SocketAddr) -> String {
    let mut stream = TcpStream::connect(http).await.unwrap();
    stream
        .write_all(b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
        .await
        .unwrap();
    let mut head = vec![0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut head))
        .await
        .expect("answered in time")
        .unwrap();
    let head = String::from_utf8_lossy(&head[..read]).into_owned();
    head.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn io_threads_serve_and_end_with_the_gateway_every_time() {
    // It counts the process's gateway threads: no other test's gateway may run meanwhile.
    let _alone = alone().await;
    let controller = TestController::start(WORKER, 3_600_000).await;
    assert_eq!(io_threads_alive(), 0);
    for (round, threads) in [(1, 3), (2, 3), (3, 0)] {
        let mut config = config(&controller);
        config.io_threads = threads;
        config.shutdown_grace = Duration::from_millis(300);
        let running = Running::start(config).await;
        assert_eq!(
            io_threads_alive(),
            threads,
            "round {round}: one per setting"
        );
        let http = running.http;
        // Several connections, so more than one thread takes some.
        for _ in 0..6 {
            let line = status_line(http).await;
            assert!(line.starts_with("HTTP/1.1 "), "round {round}: {line}");
        }
        // A connection that never sends a byte stays open past the grace: the stop must
        // still end it, and the threads with it.
        let mut silent = TcpStream::connect(http).await.unwrap();
        holds_connections(&running, 1).await;
        running.shutdown().await;
        assert_eq!(io_threads_alive(), 0, "round {round}: every thread ended");
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(2), silent.read_to_end(&mut rest))
            .await
            .expect("the open connection is closed by the stop");
        assert!(closed.is_err() || rest.is_empty(), "round {round}");
        assert!(
            TcpStream::connect(http).await.is_err(),
            "round {round}: nothing accepts after the stop"
        );
    }
    // Bound and dropped without ever running: its threads end too.
    let mut config = config(&controller);
    config.io_threads = 2;
    let gateway = proxypool_gateway::Gateway::bind(config).await.unwrap();
    assert_eq!(gateway.io_threads(), 2);
    assert_eq!(io_threads_alive(), 2);
    drop(gateway);
    eventually(
        Duration::from_secs(5),
        "the threads of a gateway never run to end when it is dropped",
        || io_threads_alive() == 0,
    )
    .await;
}

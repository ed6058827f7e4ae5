//! The access log under a refusal flood: refusal lines have a budget of their own, so a
//! flood of refused requests neither fills the writer's queue (every served line is still
//! written, even while the disk does not keep up) nor reaches the disk beyond its rate;
//! the refusal lines beyond the budget are counted as dropped.
//!
//! The log's file is a named pipe whose reader waits until the test says: a disk that does
//! not keep up, made exact (the writer blocks once the pipe and its buffer are full, and
//! the queue is all that is left).

use crate::access_log::Scratch;
use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, sim_upstream};
use crate::common::*;
use proxypool_core::Protocol;
use proxypool_sim::{Origin, ProxyKind};
use serde_json::Value;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Refused requests sent before the served ones: their lines are several times what the
/// writer's buffer, the pipe and the queue hold together.
const REFUSED: usize = 3_000;
const SERVED: usize = 30;
const QUEUE: usize = 64;
const REFUSALS_PER_SECOND: u32 = 10;
const DROPPED: &str = "proxypool_gateway_access_log_dropped_total{kind=\"refusal\"}";

/// Sends `count` requests without credentials over one kept-alive connection, pipelined in
/// batches, and reads every refusal.
async fn refusal_flood(gateway: SocketAddr, target: &str, count: usize) {
    const STATUS: &[u8] = b"HTTP/1.1 4";
    let mut stream = TcpStream::connect(gateway).await.unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: origin\r\n\r\n");
    let mut answered = 0;
    // What was read last, less than a status line's start, and what came after it.
    let mut seen: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while answered < count {
        let batch = (count - answered).min(100);
        stream
            .write_all(request.repeat(batch).as_bytes())
            .await
            .unwrap();
        let goal = answered + batch;
        while answered < goal {
            let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
                .await
                .expect("the refusals come back")
                .unwrap();
            assert!(n > 0, "the gateway closed after {answered} refusals");
            seen.extend_from_slice(&buf[..n]);
            answered += seen.windows(STATUS.len()).filter(|w| *w == STATUS).count();
            // Too short to hold a whole status start, so nothing is counted twice.
            seen.drain(..seen.len().saturating_sub(STATUS.len() - 1));
        }
    }
}

/// `series` in the process's metrics (the test runs alone, so they are its gateway's).
fn metric_now(series: &str) -> f64 {
    let text = proxypool_metrics::install().unwrap().render();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_flood_does_not_crowd_out_served_lines() {
    let _alone = alone().await;
    let scratch = Scratch::new("refusal-flood");
    let pipe = scratch.0.join("access.pipe");
    let made = std::process::Command::new("mkfifo").arg(&pipe).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    // The reader opens the pipe (which waits for the gateway's writer), then reads nothing
    // until told: a disk that stopped.
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let reader = {
        let pipe = pipe.clone();
        std::thread::spawn(move || {
            let mut file = std::fs::File::open(pipe).unwrap();
            let _ = wait.recv();
            let mut text = String::new();
            file.read_to_string(&mut text).unwrap();
            text
        })
    };
    let origin = Origin::start().await.unwrap();
    let upstream = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 2)).await;
    let controller = TestController::start(WORKER, 60_000).await;
    let credentials = Some((UPSTREAM_USER, UPSTREAM_PASS));
    controller.publish(
        vec![proxy(
            1,
            Protocol::Http,
            upstream.addr(),
            credentials,
            "acme",
            "us",
        )],
        vec![client("alice")],
    );
    let mut config = config(&controller);
    config.access_log.enabled = true;
    config.access_log.file = Some(pipe);
    config.access_log.queue = QUEUE;
    config.access_log.refusals_per_second = REFUSALS_PER_SECOND;
    // The flood is refused for its missing credentials, not turned away by the shield.
    config.shield = None;
    let started = Instant::now();
    let gateway = Running::start(config).await;
    acked(&controller, 1).await;
    let dropped_before = metric_now(DROPPED);

    refusal_flood(gateway.http, &origin.url("/"), REFUSED).await;
    let via = http_proxy_url("alice", gateway.http);
    for _ in 0..SERVED {
        assert_eq!(curl(&["-x", &via, &origin.url("/")]).await.status, 200);
    }
    let elapsed = started.elapsed();
    go.send(()).unwrap();
    gateway.shutdown().await;
    let dropped = metric_now(DROPPED) - dropped_before;
    let text = reader.join().unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let served = lines.iter().filter(|line| line["code"].is_null()).count();
    let refusals = lines.len() - served;
    assert_eq!(served, SERVED, "every served request has its line");
    // One second's worth at once, then the rate (and a line of slack for the clock).
    let budget = REFUSALS_PER_SECOND as f64 * (1.0 + elapsed.as_secs_f64()) + 1.0;
    assert!(
        (refusals as f64) <= budget,
        "{refusals} refusal lines in {elapsed:?}, over the budget of {budget}"
    );
    assert_eq!(
        dropped as usize,
        REFUSED - refusals,
        "every refusal line beyond the budget is counted as dropped"
    );
    drop(scratch);
}

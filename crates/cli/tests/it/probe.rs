//! `proxypool probe URL`, the container image's health check: exit 0 and the body on a 2xx
//! answer, 1 on another status or no server, 2 on a URL it cannot use; against a one-shot
//! HTTP server on loopback that answers what the test tells it.

use crate::common::run;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;

/// Answers one connection with `status` and `body`; returns the request line it read.
fn serve_once(status: &str, body: &'static str) -> (String, JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let status = status.to_owned();
    let thread = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).unwrap() == 0 {
                break;
            }
            head.push(byte[0]);
        }
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(answer.as_bytes()).unwrap();
        String::from_utf8_lossy(&head)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    });
    (address, thread)
}

#[test]
fn a_2xx_answer_exits_0_with_the_body() {
    let (address, server) = serve_once("200 OK", "ok\n");
    let (code, stdout, stderr) = run(&["probe", &format!("http://{address}/healthz")], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "ok\n");
    assert_eq!(server.join().unwrap(), "GET /healthz HTTP/1.1");
}

#[test]
fn a_bare_url_asks_for_the_root() {
    let (address, server) = serve_once("204 No Content", "");
    let (code, _, stderr) = run(&["probe", &format!("http://{address}")], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(server.join().unwrap(), "GET / HTTP/1.1");
}

#[test]
fn another_status_or_no_server_exits_1_and_a_bad_url_2() {
    let (address, server) = serve_once("503 Service Unavailable", "{\"ready\":false}");
    let (code, stdout, stderr) = run(&["probe", &format!("http://{address}/readyz")], &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stderr.contains("answered 503"), "{stderr}");
    server.join().unwrap();

    // Nothing listens there any more.
    let (code, _, stderr) = run(&["probe", &format!("http://{address}/healthz")], &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");

    let (code, _, stderr) = run(&["probe", "ftp://127.0.0.1/"], &[]);
    assert_eq!(code, 2, "{stderr}");
}

/// Its help says what it takes (https too, verified against the public roots), and an
/// https:// URL is dialed, not refused as a URL it cannot use.
#[test]
fn https_urls_are_taken_and_the_help_says_so() {
    let (code, help, _) = run(&["probe", "--help"], &[]);
    assert_eq!(code, 0);
    assert!(!help.contains("plain http"), "{help}");
    assert!(help.contains("https://"), "{help}");
    let port = crate::common::free_port();
    let (code, _, stderr) = run(
        &[
            "probe",
            "--timeout",
            "2",
            &format!("https://127.0.0.1:{port}/healthz"),
        ],
        &[],
    );
    assert_eq!(code, 1, "dialed and found nothing: {stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");
}

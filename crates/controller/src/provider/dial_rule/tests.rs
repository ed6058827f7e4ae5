//! Tests of the parent module, in a file of their own so that what they borrow from
//! elsewhere in the crate is no import of the module itself.

use super::*;
use crate::provider::{HostRule, VendorAuth, VendorClient};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The one address these tests treat as public: every real public address is out of
/// reach here, so a redirect's first hop must be a loopback address the rule lets by.
const PUBLIC: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn all_but_public_is_internal(ip: IpAddr) -> bool {
    ip != PUBLIC
}

fn test_rule() -> DialRule {
    DialRule {
        refuse_internal: true,
        internal: all_but_public_is_internal,
    }
}

#[test]
fn literals_are_judged_as_the_address_dialed() {
    let rule = DialRule::new(false);
    for (url, shown) in [
        ("http://127.0.0.1:8080/list", "127.0.0.1"),
        ("http://2130706433/list", "127.0.0.1"),
        ("http://[::ffff:169.254.169.254]/x", "169.254.169.254"),
        ("http://[::1]/x", "::1"),
        ("https://10.0.0.1/x", "10.0.0.1"),
    ] {
        assert_eq!(
            rule.check_literal(&Url::parse(url).unwrap()),
            Err(FetchError::PrivateHost(shown.to_owned())),
            "{url}"
        );
    }
    for url in ["https://203.0.113.9/x", "https://vendor.example/x"] {
        assert_eq!(
            rule.check_literal(&Url::parse(url).unwrap()),
            Ok(()),
            "{url}"
        );
    }
    let open = DialRule::new(true);
    assert_eq!(
        open.check_literal(&Url::parse("http://127.0.0.1/").unwrap()),
        Ok(())
    );
}

/// A server on `ip` answering every request with `answer`; it records each request
/// head, and each connection it accepts.
async fn server(ip: IpAddr, answer: String) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            log.lock().unwrap().push("connection".to_owned());
            let (answer, log) = (answer.clone(), log.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into());
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (port, seen)
}

fn redirect_to(location: &str) -> String {
    format!(
        "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
}

/// From a host the rule lets by, a redirect to an internal address literal, and one to
/// a name that resolves inside (`localhost`), both on hosts `redirect_hosts` allows:
/// neither is followed, the internal listener sees no connection, and the first hop
/// did get the authentication (so it is the address rule that held it back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_from_an_allowed_host_to_an_internal_one_is_not_followed() {
    let (inside, reached) = server(
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
    )
    .await;
    let auth = VendorAuth::authorization(Some(&proxypool_core::Secret::new(
        "Bearer vendor-key".to_owned(),
    )))
    .unwrap();
    let client = VendorClient::new().with_rule(test_rule());
    for (target, shown) in [
        (
            format!("http://127.0.0.1:{inside}/list"),
            "127.0.0.1".to_owned(),
        ),
        (
            format!("http://localhost:{inside}/list"),
            "localhost (".to_owned(),
        ),
    ] {
        let (first, seen) = server(PUBLIC, redirect_to(&target)).await;
        let list = Url::parse(&format!("http://{PUBLIC}:{first}/list")).unwrap();
        let allowed = [format!("127.0.0.1:{inside}"), format!("localhost:{inside}")];
        let hosts = HostRule::new(&list, &allowed);
        let fetched = client
            .page(list, &auth, &hosts, Duration::from_secs(5), 1024)
            .await;
        match fetched {
            Err(FetchError::PrivateHost(named)) => {
                assert!(named.starts_with(&shown), "{target}: {named}");
            }
            other => panic!("{target}: {other:?}"),
        }
        let first_hop = seen.lock().unwrap().join("\n");
        assert!(first_hop.contains("Bearer vendor-key"), "{first_hop}");
    }
    assert!(
        reached.lock().unwrap().is_empty(),
        "the internal listener saw nothing"
    );
}

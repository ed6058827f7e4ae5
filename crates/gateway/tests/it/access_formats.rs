//! The access log's text formats read back by parsers that know only the format, not our
//! code: squid's native lines by a parser written from squid's documented field order,
//! combined lines by the NCSA combined regex (Python's `re`, the way log tools match it),
//! for a plain HTTP request, one whose URL carries a quote, a backslash and a byte outside
//! ASCII, a `CONNECT` tunnel, a SOCKS5 tunnel and refusals on both listeners. A reload
//! switches the format from the next request on.

use crate::access_log::{Scratch, echo_through};
use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, echo_server, sim_upstream};
use crate::common::*;
use base64::Engine;
use proxypool_core::{PortSet, Protocol};
use proxypool_gateway::{AccessLogFormat, DestinationPolicy, Destinations, GatewayConfig};
use proxypool_proto::TargetAddr;
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A port the destination policy refuses (only the origin's and the echo server's are
/// allowed), so a SOCKS5 request to a name on it is refused before anything is dialed.
const DENIED_PORT: u16 = 9;

/// A name a SOCKS5 client may send (no whitespace, control character, `:` or `/`) that
/// carries a quote and a backslash into the log.
const ODD_NAME: &str = "we\"ird\\name.test";

/// A path with a quote, a backslash, an escaped newline and a letter outside ASCII.
const ODD_PATH: &str = "/q\"uote\\back%0A\u{e9}";

struct Setup {
    controller: Arc<TestController>,
    gateway: Running,
    origin: Origin,
    echo: SocketAddr,
    upstream: UpstreamProxy,
    log: PathBuf,
    _scratch: Scratch,
}

impl Setup {
    async fn start(tag: &str, format: AccessLogFormat) -> Setup {
        let scratch = Scratch::new(tag);
        let log = scratch.0.join("access.log");
        let origin = Origin::start().await.unwrap();
        let echo = echo_server().await;
        let upstream = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 2)).await;
        let controller = TestController::start(WORKER, 60_000).await;
        controller.publish(
            vec![proxy(
                1,
                Protocol::Http,
                upstream.addr(),
                Some((UPSTREAM_USER, UPSTREAM_PASS)),
                "acme",
                "us",
            )],
            vec![client("alice")],
        );
        let ports = [origin.addr().port(), echo.port()];
        let gateway = Running::start(gateway_config(&controller, ports, &log, format)).await;
        acked(&controller, 1).await;
        Setup {
            controller,
            gateway,
            origin,
            echo,
            upstream,
            log,
            _scratch: scratch,
        }
    }

    fn config(&self, format: AccessLogFormat) -> GatewayConfig {
        let ports = [self.origin.addr().port(), self.echo.port()];
        gateway_config(&self.controller, ports, &self.log, format)
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn origin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.origin.addr())
    }

    async fn refused_with_a_wrong_password(&self) {
        let wrong = format!("http://alice:wrong@{}", self.gateway.http);
        let refused = curl(&["-x", &wrong, &self.origin_url("/")]).await;
        assert_eq!(refused.status, 407);
    }

    /// The requests every format is checked on; the body length of the first.
    async fn traffic(&self) -> usize {
        let via = http_proxy_url("alice", self.gateway.http);
        let get = curl(&[
            "-x",
            &via,
            "-A",
            "agent \"007\"",
            "-e",
            "http://ref.test/from",
            &self.origin_url("/page?token=secret"),
        ])
        .await;
        assert_eq!(get.status, 200, "{get:?}");
        assert_eq!(odd_request(&self.gateway, self.origin.addr()).await, 200);
        let stream = TcpStream::connect(self.gateway.http).await.unwrap();
        echo_through(connect_as_alice(stream, self.echo).await, b"0123456789").await;
        let stream = TcpStream::connect(self.gateway.socks5).await.unwrap();
        echo_through(socks_as_alice(stream, self.echo).await, b"abcdefg").await;
        self.refused_with_a_wrong_password().await;
        let mut stream = TcpStream::connect(self.gateway.socks5).await.unwrap();
        let odd = TargetAddr::domain(ODD_NAME, DENIED_PORT).unwrap();
        let denied =
            proxypool_proto::socks5::connect(&mut stream, &odd, Some(("alice", PASSWORD))).await;
        assert!(denied.is_err(), "the port is refused");
        get.body.len()
    }
}

/// The gateway logging to `log` in `format`, its destination policy allowing only `ports`
/// (the origin's and the echo server's) on 127.0.0.1 and on names.
fn gateway_config(
    controller: &TestController,
    ports: [u16; 2],
    log: &Path,
    format: AccessLogFormat,
) -> GatewayConfig {
    let mut config = config(controller);
    config.destinations = DestinationPolicy::new(&Destinations {
        allow_cidrs: vec!["127.0.0.1/32".into()],
        deny_cidrs: Vec::new(),
        ports: PortSet::Only(ports.into()),
    });
    config.access_log.enabled = true;
    config.access_log.file = Some(log.to_owned());
    config.access_log.format = format;
    config
}

/// `GET` of [`ODD_PATH`] written by hand (curl would encode it); the status answered.
async fn odd_request(gateway: &Running, origin: SocketAddr) -> u16 {
    let credentials = base64::engine::general_purpose::STANDARD.encode(format!("alice:{PASSWORD}"));
    let head = format!(
        "GET http://{origin}{ODD_PATH} HTTP/1.1\r\nHost: {origin}\r\n\
         Proxy-Authorization: Basic {credentials}\r\nConnection: close\r\n\r\n"
    );
    let mut stream = TcpStream::connect(gateway.http).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the answer ends")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer}"))
}

/// Waits until the file has `count` lines, and returns them.
async fn lines(setup: &Setup, count: usize) -> Vec<String> {
    // Tunnel lines come when the tunnels end, a moment after the client closed.
    eventually(Duration::from_secs(5), "the access-log lines", || {
        setup.text().lines().count() >= count
    })
    .await;
    let text = setup.text();
    assert!(text.ends_with('\n'), "every line ends: {text}");
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), count, "one line per request: {text}");
    lines
}

/// One line of squid's native format, read by its documented field order:
/// `time elapsed client code/status bytes method URL user hierarchy/peer type`.
#[derive(Debug)]
struct Squid {
    /// When the request ended, Unix milliseconds.
    ended_ms: u64,
    elapsed_ms: u64,
    client: IpAddr,
    code: String,
    status: String,
    bytes: u64,
    method: String,
    url: String,
    user: String,
    hierarchy: String,
    peer: String,
    content_type: String,
}

fn parse_squid(line: &str) -> Squid {
    assert!(line.is_ascii() && !line.contains('\r'), "{line}");
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [
        time,
        elapsed,
        client,
        result,
        bytes,
        method,
        url,
        user,
        hier,
        content_type,
    ] = fields[..]
    else {
        panic!("not ten fields: {line}");
    };
    let (secs, millis) = time.split_once('.').expect("seconds.milliseconds");
    assert_eq!(millis.len(), 3, "milliseconds in three digits: {line}");
    let (code, status) = result.split_once('/').expect("code/status");
    assert!(
        status.len() == 3 && status.bytes().all(|b| b.is_ascii_digit()),
        "{line}"
    );
    let (hierarchy, peer) = hier.split_once('/').expect("hierarchy/peer");
    Squid {
        ended_ms: secs.parse::<u64>().unwrap() * 1000 + millis.parse::<u64>().unwrap(),
        elapsed_ms: elapsed.parse().unwrap(),
        client: client.parse().unwrap(),
        code: code.into(),
        status: status.into(),
        bytes: bytes.parse().unwrap(),
        method: method.into(),
        url: url.into(),
        user: user.into(),
        hierarchy: hierarchy.into(),
        peer: peer.into(),
        content_type: content_type.into(),
    }
}

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn squid_lines_read_back_by_squid_s_field_order() {
    let setup = Setup::start("squid", AccessLogFormat::Squid).await;
    let before = SystemTime::now();
    let body_len = setup.traffic().await;
    let lines = lines(&setup, 6).await;
    let after = SystemTime::now();
    setup.gateway.shutdown().await;
    let parsed: Vec<Squid> = lines.iter().map(|line| parse_squid(line)).collect();
    for line in &parsed {
        assert_eq!(line.client, IpAddr::from(Ipv4Addr::LOCALHOST), "{line:?}");
        assert!(
            (unix_ms(before)..=unix_ms(after)).contains(&line.ended_ms),
            "ended within the test: {line:?}"
        );
        assert!(
            line.elapsed_ms <= unix_ms(after) - unix_ms(before),
            "{line:?}"
        );
    }
    let the = |method: &str, code: &str| {
        let found: Vec<&Squid> = parsed
            .iter()
            .filter(|l| l.method == method && l.code == code)
            .collect();
        assert_eq!(found.len(), 1, "one {method} {code}: {lines:#?}");
        found[0]
    };
    let origin = setup.origin.addr();
    let echo = setup.echo.to_string();
    let peer = setup.upstream.addr().ip().to_string();
    let media_type = |line: &Squid| line.content_type.clone();

    // Served plain HTTP: the URL without its query, the proxy as the parent.
    let get: Vec<&Squid> = parsed
        .iter()
        .filter(|l| l.method == "GET" && l.code == "TCP_MISS")
        .collect();
    assert_eq!(get.len(), 2, "{lines:#?}");
    let page = get
        .iter()
        .find(|l| l.url == format!("http://{origin}/page"))
        .unwrap_or_else(|| panic!("the page's URL, no query: {lines:#?}"));
    assert_eq!(page.status, "200");
    assert_eq!(page.bytes, body_len as u64);
    assert_eq!(page.user, "alice");
    assert_eq!(
        (page.hierarchy.as_str(), page.peer.as_str()),
        ("FIRSTUP_PARENT", peer.as_str())
    );
    assert_eq!(media_type(page), "application/json");
    // The odd URL stays one field, its quote, backslash and letter percent-encoded.
    let odd = get
        .iter()
        .find(|l| l.url != format!("http://{origin}/page"))
        .unwrap();
    assert_eq!(odd.url, format!("http://{origin}/q%22uote%5Cback%0A%C3%A9"));
    assert_eq!(odd.status, "200");

    let connect = the("CONNECT", "TCP_TUNNEL");
    assert_eq!(
        (connect.status.as_str(), connect.bytes, connect.url.as_str()),
        ("200", 10, echo.as_str())
    );
    assert_eq!(
        (connect.user.as_str(), connect.hierarchy.as_str()),
        ("alice", "FIRSTUP_PARENT")
    );
    assert_eq!(
        (connect.peer.as_str(), connect.content_type.as_str()),
        (peer.as_str(), "-")
    );
    let socks = the("SOCKS5", "TCP_TUNNEL");
    assert_eq!(
        (socks.status.as_str(), socks.bytes, socks.url.as_str()),
        ("200", 7, echo.as_str())
    );
    assert_eq!(
        (socks.user.as_str(), socks.peer.as_str()),
        ("alice", peer.as_str())
    );

    // Refusals: TCP_DENIED, no parent, and the status the HTTP listener gives.
    let refused = the("GET", "TCP_DENIED");
    assert_eq!(refused.status, "407");
    assert_eq!(refused.url, format!("http://{origin}/"));
    assert_eq!((refused.user.as_str(), refused.bytes), ("-", 0));
    assert_eq!(
        (refused.hierarchy.as_str(), refused.peer.as_str()),
        ("HIER_NONE", "-")
    );
    let denied = the("SOCKS5", "TCP_DENIED");
    assert_eq!(denied.status, "403");
    assert_eq!(denied.url, format!("we%22ird%5Cname.test:{DENIED_PORT}"));
    assert_eq!(
        (denied.user.as_str(), denied.hierarchy.as_str()),
        ("alice", "HIER_NONE")
    );
}

/// Matches each line against the NCSA combined format's regex (quoted fields may hold
/// backslash escapes) in Python, and gives each line's groups with the time as Unix
/// seconds; `None` for a line that does not match.
fn combined_groups(lines: &[String]) -> Vec<Option<Vec<String>>> {
    const SCRIPT: &str = r#"
import datetime, json, re, sys
QUOTED = r'"((?:[^"\\]|\\.)*)"'
LINE = re.compile(r'(\S+) (\S+) (\S+) \[([^\]]+)\] ' + QUOTED + r' (\d{3}|-) (\d+|-) ' + QUOTED + ' ' + QUOTED)
REQUEST = re.compile(r'(\S+) (\S+) (\S+)')
out = []
for line in sys.stdin.buffer.read().decode('ascii').split('\n')[:-1]:
    m = LINE.fullmatch(line)
    r = m and REQUEST.fullmatch(m.group(5))
    if not r:
        out.append(None)
        continue
    when = datetime.datetime.strptime(m.group(4), '%d/%b/%Y:%H:%M:%S %z')
    g = m.groups()
    out.append(list(g[:4]) + list(r.groups()) + list(g[5:]) + [str(int(when.timestamp()))])
print(json.dumps(out))
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut input = lines.join("\n");
    input.push('\n');
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Undoes Apache's escapes (`\"`, `\\`, `\n`, `\xhh`, ...).
fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next().expect("an escape is complete") {
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'x' => {
                let hex = [bytes.next().unwrap(), bytes.next().unwrap()];
                let hex = std::str::from_utf8(&hex).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
            }
            other => out.push(other),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combined_lines_match_the_ncsa_combined_regex_and_a_reload_switches_the_format() {
    let setup = Setup::start("combined", AccessLogFormat::Json).await;
    setup.refused_with_a_wrong_password().await;
    eventually(Duration::from_secs(5), "the JSON line", || {
        setup.text().lines().count() == 1
    })
    .await;
    setup
        .gateway
        .reload
        .apply(&setup.config(AccessLogFormat::Combined))
        .unwrap();
    let before = SystemTime::now();
    let body_len = setup.traffic().await;
    let mut lines = lines(&setup, 7).await;
    let after = SystemTime::now();
    setup.gateway.shutdown().await;
    let first: serde_json::Value = serde_json::from_str(&lines.remove(0)).unwrap();
    assert_eq!(first["code"], "auth_required", "before the reload: JSON");

    let groups = combined_groups(&lines);
    let parsed: Vec<Vec<String>> = groups
        .into_iter()
        .zip(&lines)
        .map(|(groups, line)| groups.unwrap_or_else(|| panic!("not combined: {line}")))
        .collect();
    // host ident user time method url protocol status bytes referer user-agent unix-time
    for line in &parsed {
        assert_eq!(
            (line[0].as_str(), line[1].as_str()),
            ("127.0.0.1", "-"),
            "{line:?}"
        );
        assert!(line[3].ends_with(" +0000"), "{line:?}");
        let read_at: u64 = line[11].parse().unwrap();
        assert!(
            (unix_ms(before) / 1000..=unix_ms(after) / 1000).contains(&read_at),
            "read within the test: {line:?}"
        );
    }
    let the = |method: &str, status: &str| {
        let found: Vec<&Vec<String>> = parsed
            .iter()
            .filter(|l| l[4] == method && l[7] == status)
            .collect();
        assert_eq!(found.len(), 1, "one {method} {status}: {lines:#?}");
        found[0]
    };
    let origin = setup.origin.addr();
    let echo = setup.echo.to_string();
    let served: Vec<&Vec<String>> = parsed
        .iter()
        .filter(|l| l[4] == "GET" && l[7] == "200")
        .collect();
    assert_eq!(served.len(), 2, "{lines:#?}");
    let page = served
        .iter()
        .find(|l| l[5] == format!("http://{origin}/page"))
        .unwrap_or_else(|| panic!("the page's URL, no query: {lines:#?}"));
    let fields = |line: &Vec<String>, at: &[usize]| -> Vec<String> {
        at.iter().map(|&i| line[i].clone()).collect()
    };
    assert_eq!(
        fields(page, &[2, 6, 8, 9, 10]),
        [
            "alice",
            "HTTP/1.1",
            &body_len.to_string(),
            "http://ref.test/from",
            "agent \\\"007\\\"",
        ]
    );
    assert_eq!(unescape(&page[10]), b"agent \"007\"");
    // The odd URL is one escaped field: its quote did not end the request line.
    let odd = served
        .iter()
        .find(|l| l[5] != format!("http://{origin}/page"))
        .unwrap();
    assert_eq!(
        unescape(&odd[5]),
        format!("http://{origin}{ODD_PATH}").into_bytes()
    );
    assert_eq!((odd[9].as_str(), odd[10].as_str()), ("-", "-"));

    let connect = the("CONNECT", "200");
    assert_eq!(
        fields(connect, &[2, 5, 6, 8, 9, 10]),
        ["alice", &echo, "HTTP/1.1", "10", "-", "-"]
    );
    let socks = the("SOCKS5", "200");
    assert_eq!(
        fields(socks, &[2, 5, 6, 8, 9, 10]),
        ["alice", &echo, "SOCKS/5", "7", "-", "-"]
    );
    // Refusals: the status the client got, no body (`-`).
    let refused = the("GET", "407");
    assert_eq!(
        fields(refused, &[2, 5, 8]),
        ["-", &format!("http://{origin}/"), "-"]
    );
    assert!(refused[10].starts_with("curl/"), "{refused:?}");
    let denied = the("SOCKS5", "403");
    assert_eq!(
        fields(denied, &[2, 6, 8, 9, 10]),
        ["alice", "SOCKS/5", "-", "-", "-"]
    );
    assert_eq!(
        unescape(&denied[5]),
        format!("{ODD_NAME}:{DENIED_PORT}").into_bytes()
    );
}

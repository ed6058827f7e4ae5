//! Live reload of `proxypool serve`: the file is edited while it runs and SIGHUP applies
//! it. New clients work, a removed client is refused, a changed policy applies, an added
//! upstream is fetched, an open tunnel of an unchanged client survives; a broken file is
//! refused whole and the running configuration keeps serving.

use crate::common::{
    Proc, Scratch, allow_sim_origin, api, curl, curl_or_skip, eventually, free_port, sim_upstream,
    sim_vendor, try_exit_via,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

struct Ports {
    api: u16,
    http: u16,
}

fn config(ports: &Ports, sim: &proxypool_sim::SimVendor, after: bool) -> String {
    let (rate, extra) = if after {
        (
            "requests_per_second = 0.01\nburst = 1.0",
            r#"
[[upstreams]]
id = "extra"
ttl = "10m"
max_size = 10
[upstreams.provider]
kind = "static"
proxies = ["127.0.0.1:9"]
[[upstreams.health.targets]]
url = "http://127.0.0.1:9/"

[[clients]]
id = "beta"
project = "acme"
api_token = { file = "beta-token" }
gateway_password = { file = "beta-password" }
"#,
        )
    } else {
        (
            "requests_per_second = 100.0\nburst = 100.0",
            r#"
[[clients]]
id = "dave"
project = "acme"
api_token = { env = "DAVE_TOKEN" }
gateway_password = { env = "DAVE_PASSWORD" }
"#,
        )
    };
    format!(
        r#"
[quota]
url = "memory"

[listen]
control = "127.0.0.1:0"
api = "127.0.0.1:{api}"

[ownership]
per_worker_target = 4
interval = "200ms"

[checker]
interval = "200ms"

[[policies]]
id = "tight"
{rate}

{sim_upstream}

[[clients]]
id = "acme"
project = "acme"
admin = true
api_token = {{ env = "ACME_TOKEN" }}
gateway_password = {{ env = "ACME_PASSWORD" }}

[[clients]]
id = "carol"
project = "acme"
rate_limit = "tight"
gateway_password = {{ env = "CAROL_PASSWORD" }}
{extra}
[gateway]
shutdown_grace = "1s"
[gateway.listeners]
http = "127.0.0.1:{http}"
{destinations}
"#,
        destinations = allow_sim_origin(sim),
        api = ports.api,
        http = ports.http,
        sim_upstream = sim_upstream(sim),
    )
}

/// A CONNECT tunnel through the gateway to the origin as `basic` (base64 user:password),
/// left open.
fn open_tunnel(http: u16, origin: &str, basic: &str) -> TcpStream {
    let authority = origin
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut stream = TcpStream::connect(("127.0.0.1", http)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nProxy-Authorization: Basic {basic}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.contains(" 200"), "CONNECT answered {status:?}");
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    stream
}

/// One request over an open tunnel; the status line of the answer.
fn request_over(stream: &mut TcpStream, origin: &str) -> String {
    let host = origin.trim_start_matches("http://").trim_end_matches('/');
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_owned()
}

/// Whether `/v1/upstreams` shows `id` with a successful fetch.
fn fetched(body: &str, id: &str) -> bool {
    fn find(value: &serde_json::Value, id: &str) -> bool {
        match value {
            serde_json::Value::Object(map) => {
                let this = map.get("id").and_then(|v| v.as_str()) == Some(id)
                    && map.iter().any(|(k, v)| {
                        k.starts_with("last_success") && !v.is_null()
                            || k == "status"
                                && v.get("last_success_ms").is_some_and(|t| !t.is_null())
                    });
                this || map.values().any(|v| find(v, id))
            }
            serde_json::Value::Array(items) => items.iter().any(|v| find(v, id)),
            _ => false,
        }
    }
    serde_json::from_str(body).is_ok_and(|v: serde_json::Value| find(&v, id))
}

fn gateway_status(http: u16, user: &str, origin: &str) -> String {
    let proxy = format!("http://{user}@127.0.0.1:{http}");
    let (_, out) = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-x",
        &proxy,
        origin,
    ]);
    out
}

/// A client API call as `token`, a 503 retried as a client does: (status, body).
fn api_status(port: u16, token: &str, path: &str, method: &str) -> (String, String) {
    let url = format!("http://127.0.0.1:{port}{path}");
    let answer = api::call(method, &url, Some(token), None);
    (answer.status.to_string(), answer.body)
}

#[test]
fn sighup_applies_clients_policies_and_upstreams_and_refuses_a_broken_file() {
    if !curl_or_skip() {
        return;
    }
    let (_runtime, sim) = sim_vendor(4);
    let scratch = Scratch::new("reload");
    let ports = Ports {
        api: free_port(),
        http: free_port(),
    };
    let file = scratch.write("proxypool.toml", &config(&ports, &sim, false));
    scratch.write("beta-token", "beta-api-token-value\n");
    scratch.write("beta-password", "beta-gateway-password\n");
    let env = [
        ("ACME_TOKEN", "acme-api-token-value"),
        ("ACME_PASSWORD", "acme-gateway-password"),
        ("CAROL_PASSWORD", "carol-gateway-password"),
        ("DAVE_TOKEN", "dave-api-token-value"),
        ("DAVE_PASSWORD", "dave-gateway-password"),
    ];
    let mut serve = Proc::start(
        "serve",
        &["serve", "--config", file.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let origin = sim.origin().url("/");
    let acme = format!("http://acme:acme-gateway-password@127.0.0.1:{}", ports.http);
    eventually("serve answers", Duration::from_secs(30), || {
        try_exit_via(&acme, &origin).is_some()
    });
    assert_eq!(
        gateway_status(ports.http, "dave:dave-gateway-password", &origin),
        "200"
    );
    assert_eq!(
        gateway_status(ports.http, "beta:beta-gateway-password", &origin),
        "407"
    );
    // acme:acme-gateway-password and dave:dave-gateway-password
    let mut tunnel = open_tunnel(ports.http, &origin, "YWNtZTphY21lLWdhdGV3YXktcGFzc3dvcmQ=");
    let mut doomed = open_tunnel(ports.http, &origin, "ZGF2ZTpkYXZlLWdhdGV3YXktcGFzc3dvcmQ=");

    // The new file: beta added, dave removed, carol's policy tightened, an upstream added.
    scratch.write("proxypool.toml", &config(&ports, &sim, true));
    serve.signal("HUP");
    let applied = eventually("the reload applies", Duration::from_secs(2), || {
        gateway_status(ports.http, "beta:beta-gateway-password", &origin) == "200"
            && api_status(ports.api, "beta-api-token-value", "/v1/me", "GET").0 == "200"
    });
    eprintln!("new client served {applied:?} after SIGHUP");
    assert_eq!(
        gateway_status(ports.http, "dave:dave-gateway-password", &origin),
        "407"
    );
    assert_eq!(
        api_status(ports.api, "dave-api-token-value", "/v1/me", "GET").0,
        "401"
    );
    // The tightened policy: one token, refilled once a minute and a half.
    let carol: Vec<String> = (0..3)
        .map(|_| gateway_status(ports.http, "carol:carol-gateway-password", &origin))
        .collect();
    assert!(carol.iter().any(|s| s == "429"), "{carol:?}");
    eventually(
        "the added upstream is fetched",
        Duration::from_secs(5),
        || {
            let (code, body) =
                api_status(ports.api, "acme-api-token-value", "/v1/upstreams", "GET");
            code == "200" && fetched(&body, "extra")
        },
    );
    let (code, last) = api_status(ports.api, "acme-api-token-value", "/v1/admin/reload", "GET");
    assert_eq!(code, "200", "{last}");
    assert!(last.contains("\"applied\""), "{last}");

    // The removed client's open tunnel is closed once the grace (1s) is over.
    doomed
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let waited = std::time::Instant::now();
    let mut byte = [0u8; 1];
    let read = doomed.read(&mut byte);
    assert!(
        matches!(read, Ok(0)),
        "the removed client's tunnel is still open: {read:?}"
    );
    assert!(
        waited.elapsed() < Duration::from_secs(5),
        "closed only after {:?}",
        waited.elapsed()
    );

    // The open tunnel of the unchanged client still carries traffic.
    assert!(
        request_over(&mut tunnel, &origin).contains(" 200"),
        "the tunnel did not survive the reload"
    );

    // A broken file is refused whole; the running configuration keeps serving.
    scratch.write(
        "proxypool.toml",
        &config(&ports, &sim, true).replace("max_size = 10\n", "max_size = 10\nbogus = 1\n"),
    );
    let (code, report) = api_status(
        ports.api,
        "acme-api-token-value",
        "/v1/admin/reload",
        "POST",
    );
    assert_eq!(code, "200", "{report}");
    assert!(report.contains("\"refused\""), "{report}");
    assert!(
        report.contains("bogus") && report.contains("line"),
        "{report}"
    );
    assert!(report.contains("\"reloads_refused\":1"), "{report}");
    assert_eq!(
        gateway_status(ports.http, "beta:beta-gateway-password", &origin),
        "200"
    );
    let (_, metrics) = curl(&[&format!("http://127.0.0.1:{}/metrics", ports.api)]);
    assert!(
        metrics.contains("proxypool_config_reloads_total{result=\"refused\"} 1"),
        "{metrics}"
    );

    // So is a file whose backconnect template names an unknown transform: by line and key,
    // and nothing of it applies (neither its upstream nor any other change).
    let unknown_transform = config(&ports, &sim, true).replace(
        "\n[gateway]\n",
        "\n[[upstreams]]\nid = \"resi_bc\"\nttl = \"10m\"\nmax_size = 10\n\
         [upstreams.credentials]\nusername = \"acct\"\npassword = { env = \"ACME_PASSWORD\" }\n\
         [upstreams.provider]\nkind = \"backconnect\"\n[upstreams.provider.backconnect]\n\
         host = \"127.0.0.1\"\nport = 9\nusername = \"{account}[-city-{city|camel}]-session-{session}\"\n\
         [[upstreams.provider.backconnect.sessions]]\ncity = \"Berlin\"\ncount = 1\n\
         [[upstreams.health.targets]]\nurl = \"http://127.0.0.1:9/\"\n\n[gateway]\n",
    );
    scratch.write(
        "proxypool.toml",
        &unknown_transform.replace("burst = 1.0", "burst = 50.0"),
    );
    let (code, report) = api_status(
        ports.api,
        "acme-api-token-value",
        "/v1/admin/reload",
        "POST",
    );
    assert_eq!(code, "200", "{report}");
    assert!(report.contains("\"refused\""), "{report}");
    assert!(
        report.contains("upstreams[2].provider.backconnect.username: unknown transform")
            && report.contains("line"),
        "{report}"
    );
    assert!(report.contains("\"reloads_refused\":2"), "{report}");
    let (_, upstreams) = api_status(ports.api, "acme-api-token-value", "/v1/upstreams", "GET");
    assert!(!upstreams.contains("resi_bc"), "{upstreams}");
    let carol: Vec<String> = (0..3)
        .map(|_| gateway_status(ports.http, "carol:carol-gateway-password", &origin))
        .collect();
    assert!(
        carol.iter().any(|s| s == "429"),
        "carol's tight policy stays: {carol:?}"
    );

    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(30)).code(), Some(0));
    let logs = serve.stderr_tail();
    for secret in [
        "beta-api-token-value",
        "beta-gateway-password",
        "acme-gateway-password",
    ] {
        assert!(!logs.contains(secret), "{secret} in the logs");
    }
}

/// Signs in to the dashboard with `token`; the session cookie's `name=value`, if any.
fn dashboard_cookie(api: u16, token: &str) -> Option<String> {
    let url = format!("http://127.0.0.1:{api}/ui/session");
    let body = format!("{{\"token\":\"{token}\"}}");
    let (_, out) = curl(&[
        "-D",
        "-",
        "-o",
        "/dev/null",
        "-H",
        "content-type: application/json",
        "--data",
        &body,
        &url,
    ]);
    out.lines()
        .find_map(|line| line.strip_prefix("set-cookie: "))
        .map(|cookie| cookie.split(';').next().unwrap_or_default().to_owned())
}

/// The status of `GET /ui/session` with the dashboard cookie.
fn with_cookie(api: u16, cookie: &str) -> String {
    let url = format!("http://127.0.0.1:{api}/ui/session");
    let (_, out) = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        &format!("cookie: {cookie}"),
        &url,
    ]);
    out
}

#[test]
fn a_rotated_admin_token_ends_its_dashboard_sessions_on_sighup() {
    if !curl_or_skip() {
        return;
    }
    let (_runtime, sim) = sim_vendor(2);
    let scratch = Scratch::new("reload-sessions");
    let ports = Ports {
        api: free_port(),
        http: free_port(),
    };
    let from_file = |after: bool| {
        config(&ports, &sim, after).replace(
            "api_token = { env = \"ACME_TOKEN\" }",
            "api_token = { file = \"acme-token\" }",
        )
    };
    let file = scratch.write("proxypool.toml", &from_file(false));
    scratch.write("acme-token", "acme-api-token-first\n");
    scratch.write("beta-token", "beta-api-token-value\n");
    scratch.write("beta-password", "beta-gateway-password\n");
    let env = [
        ("ACME_PASSWORD", "acme-gateway-password"),
        ("CAROL_PASSWORD", "carol-gateway-password"),
        ("DAVE_TOKEN", "dave-api-token-value"),
        ("DAVE_PASSWORD", "dave-gateway-password"),
    ];
    let mut serve = Proc::start(
        "serve",
        &["serve", "--config", file.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    eventually("serve answers", Duration::from_secs(30), || {
        api_status(ports.api, "acme-api-token-first", "/v1/me", "GET").0 == "200"
    });
    let cookie = dashboard_cookie(ports.api, "acme-api-token-first").expect("signed in");
    assert_eq!(with_cookie(ports.api, &cookie), "200");

    // Other clients change (beta added, dave removed): the session goes on.
    scratch.write("proxypool.toml", &from_file(true));
    serve.signal("HUP");
    eventually("the first reload applies", Duration::from_secs(5), || {
        api_status(ports.api, "beta-api-token-value", "/v1/me", "GET").0 == "200"
    });
    assert_eq!(with_cookie(ports.api, &cookie), "200");

    // The operator rotates the admin token: the old cookie opens nothing any more.
    scratch.write("acme-token", "acme-api-token-second\n");
    serve.signal("HUP");
    eventually("the rotation applies", Duration::from_secs(5), || {
        api_status(ports.api, "acme-api-token-second", "/v1/me", "GET").0 == "200"
    });
    assert_eq!(with_cookie(ports.api, &cookie), "401");
    let fresh = dashboard_cookie(ports.api, "acme-api-token-second").expect("signs in again");
    assert_eq!(with_cookie(ports.api, &fresh), "200");

    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(30)).code(), Some(0));
}

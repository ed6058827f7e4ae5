//! Usage accounting end to end in split mode: two `proxypool controller` processes and one
//! `proxypool gateway` on a private Redis and PostgreSQL, two simulated vendors as the
//! upstreams `sim` and `sim2`. A known number of CONNECT tunnels through each upstream,
//! each carrying a known number of bytes each way, and one extraction: `GET /v1/usage`
//! shows exactly those numbers, split by upstream, and both controllers answer the same.

use crate::common::split::{controller_config, gateway_config, migrate_quota};
use crate::common::{
    Proc, Scratch, api, curl, curl_or_skip, eventually, free_port, gateway_proxies, run,
    sim_upstream_named, sim_vendor,
};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const PROXIES: usize = 4;
const API_TOKEN: &str = "acme-api-token-0001";

/// Opens a CONNECT tunnel through the gateway at `gateway` as `username`, sends one HTTP
/// request to the origin inside it and reads the answer to the end: (sent, received)
/// payload bytes, exactly what the tunnel carried.
fn tunnel_exchange(gateway: &str, username: &str, origin: std::net::SocketAddr) -> (u64, u64) {
    let mut stream = TcpStream::connect(gateway).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let std_stream = stream.try_clone().unwrap();
    std_stream.set_nonblocking(true).unwrap();
    runtime.block_on(async {
        let mut tokio_stream = tokio::net::TcpStream::from_std(std_stream).unwrap();
        proxypool_proto::http_connect::connect(
            &mut tokio_stream,
            &origin.to_string(),
            Some((username, "acme-gateway-password")),
        )
        .await
        .expect("CONNECT through the gateway");
        // Back to blocking use: the head was read exactly, nothing of the tunnel yet.
        tokio_stream
            .into_std()
            .unwrap()
            .set_nonblocking(false)
            .unwrap();
    });
    let request =
        format!("GET /usage-test HTTP/1.1\r\nHost: {origin}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    (request.len() as u64, answer.len() as u64)
}

/// `GET /v1/usage?client=acme` from the controller at `api`: per upstream, (requests,
/// failures, bytes_up, bytes_down, extracted).
fn usage(api: &str) -> Option<BTreeMap<String, [u64; 5]>> {
    let answer = api::call(
        "GET",
        &format!("http://{api}/v1/usage?client=acme"),
        Some(API_TOKEN),
        None,
    );
    if answer.status != 200 {
        return None;
    }
    let body = answer.json();
    let totals = body["clients"][0]["totals"].as_array()?;
    Some(
        totals
            .iter()
            .map(|u| {
                let n = |k: &str| u[k].as_u64().unwrap();
                (
                    u["upstream"].as_str().unwrap().to_owned(),
                    [
                        n("requests"),
                        n("failures"),
                        n("bytes_up"),
                        n("bytes_down"),
                        n("extracted"),
                    ],
                )
            })
            .collect(),
    )
}

#[test]
fn usage_is_exact_per_upstream_and_the_same_from_every_controller() {
    if !curl_or_skip() {
        return;
    }
    let Some(redis) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let Some(pg) = proxypool_testkit::private_postgres_or_skip() else {
        return;
    };
    let admin_url = pg.create_database("proxypool_split").unwrap();
    let (_runtime_a, sim) = sim_vendor(PROXIES);
    let (_runtime_b, sim2) = sim_vendor(PROXIES);
    let scratch = Scratch::new("usage");
    let (control, api, api_2) = (free_port(), free_port(), free_port());
    let upstreams = format!(
        "{}\n{}",
        sim_upstream_named("sim", &sim),
        sim_upstream_named("sim2", &sim2)
    );
    let config = scratch.write(
        "controller.toml",
        &controller_config(
            &redis,
            pg.port(),
            control,
            api,
            2 * PROXIES,
            &upstreams,
            None,
        ),
    );
    let config = config.to_str().unwrap();
    let env = [
        ("WORKER_TOKEN_A", "split-worker-token-a"),
        ("WORKER_TOKEN_B", "split-worker-token-b"),
        ("ACME_TOKEN", API_TOKEN),
        ("ACME_PASSWORD", "acme-gateway-password"),
        ("QUOTA_PASSWORD", "quota-role-password"),
        ("PG_ADMIN_URL", admin_url.as_str()),
    ];
    migrate_quota(config, &env);
    let _controller = Proc::start(
        "controller",
        &["controller", "--config", config],
        &env,
        &scratch.path,
    );
    // The second controller: same file, its own listeners, the same store.
    let control_2 = free_port().to_string();
    let api_2_addr = format!("127.0.0.1:{api_2}");
    let control_2_addr = format!("127.0.0.1:{control_2}");
    let mut env_2 = env.to_vec();
    env_2.push(("PROXYPOOL__LISTEN__API", &api_2_addr));
    env_2.push(("PROXYPOOL__LISTEN__CONTROL", &control_2_addr));
    let _standby = Proc::start(
        "controller-2",
        &["controller", "--config", config],
        &env_2,
        &scratch.path,
    );

    // Before the gateway registers: one extraction of two proxies of sim2, once they are
    // checked (the gateway then gets the other six).
    let api_url = format!("http://127.0.0.1:{api}");
    eventually(
        "sim2's proxies are checked and extractable",
        Duration::from_secs(45),
        || {
            let (code, _, _) = run(
                &[
                    "extract",
                    "--api",
                    &api_url,
                    "--count",
                    "2",
                    "--mode",
                    "all-or-nothing",
                    "--upstream",
                    "sim2",
                    "--json",
                ],
                &[("PROXYPOOL_TOKEN", API_TOKEN)],
            );
            code == 0
        },
    );

    let (http, admin) = (free_port(), free_port());
    let gateway_file = scratch.write(
        "gw-a.toml",
        &gateway_config("gw-a", &[control], http, admin, &sim, None),
    );
    let _gateway = Proc::start(
        "gw-a",
        &["gateway", "--config", gateway_file.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let admin_addr = format!("127.0.0.1:{admin}");
    eventually(
        "the gateway holds every proxy not extracted",
        Duration::from_secs(60),
        || gateway_proxies(&admin_addr) == (2 * PROXIES - 2) as u64,
    );

    // Known traffic: 3 tunnels through sim's proxies, 2 through sim2's.
    let mut expected: BTreeMap<String, [u64; 5]> = BTreeMap::new();
    let gateway = format!("127.0.0.1:{http}");
    let origin = sim.origin().addr();
    for (upstream, tunnels) in [("sim", 3), ("sim2", 2)] {
        let mut sums = [0, 0, 0, 0, if upstream == "sim2" { 2 } else { 0 }];
        for _ in 0..tunnels {
            let (sent, received) =
                tunnel_exchange(&gateway, &format!("acme-upstream-{upstream}"), origin);
            sums[0] += 1;
            sums[2] += sent;
            sums[3] += received;
        }
        expected.insert(upstream.to_owned(), sums);
    }
    eprintln!("sent per upstream [requests, failures, up, down, extracted]: {expected:?}");
    // The gateway reports every second; the numbers then stop changing.
    let first_api = format!("127.0.0.1:{api}");
    let mut seen = None;
    eventually(
        "usage shows exactly the traffic sent",
        Duration::from_secs(30),
        || {
            seen = usage(&first_api);
            seen.as_ref() == Some(&expected)
        },
    );
    // Later reports carry the same totals: they must add nothing. Wait for two more.
    // The split gateway has an admin token (`split::gateway_config`).
    let [flag, header] = crate::common::gateway_admin_header();
    let reports = || {
        let (code, text) = curl(&[
            "-f",
            &flag,
            &header,
            &format!("http://{admin_addr}/metrics"),
        ]);
        if code != 0 {
            return 0.0;
        }
        crate::common::exposition::total(
            &text,
            "proxypool_gateway_reports_total",
            &["outcome=\"accepted\""],
        )
    };
    let matched_at = reports();
    eventually("two more reports", Duration::from_secs(15), || {
        reports() >= matched_at + 2.0
    });
    assert_eq!(usage(&first_api), Some(expected.clone()), "counted once");
    assert_eq!(
        usage(&api_2_addr),
        Some(expected),
        "the other controller answers the same"
    );
}

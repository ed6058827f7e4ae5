//! The dashboard in a real browser: headless Chromium (DevTools protocol, the testkit's
//! `Browser`) against a running `proxypool dev`. Every number the pages show is checked
//! against the JSON API a script would read; an extraction shows within 2 s; cordoning
//! from the page stops new leases; without a session nothing shows, and writes with the
//! cookie need the CSRF token. On `proxypool serve`, the overview says when the pool store
//! recovers from a loss, and `proxypool store` forces and acknowledges one. Screenshots of
//! every page go to `target/ui-screenshots/`.

use crate::common::exposition::ownership_rounds;
use crate::common::{Banner, Scratch, api, curl, curl_or_skip, extract_one, poll_until, start_dev};
use proxypool_testkit::{Browser, browser_or_skip};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const STILL: [&str; 2] = ["--proxy-ttl", "0"];
// Two browsers and two stacks at once are too much for a small CI machine (the
// check_failures test takes it too).
pub(crate) static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn screenshots() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("ui-screenshots")
}

/// `GET path` as the admin, a 503 retried as a client does: the JSON it answered.
fn api_get(banner: &Banner, path: &str) -> Value {
    let url = format!("{}{path}", banner.api());
    let answer = api::call("GET", &url, Some(banner.token()), None);
    assert_eq!(answer.status, 200, "GET {path}: {answer:?}");
    answer.json()
}

fn status_of(args: &[&str]) -> u16 {
    let mut all = vec!["-o", "/dev/null", "-w", "%{http_code}"];
    all.extend_from_slice(args);
    curl(&all).1.parse().unwrap()
}

/// Polls until the page's value (`expression`) equals the API's (`expected`), both read
/// afresh each round, within `timeout`.
fn page_matches_api(
    browser: &mut Browser,
    what: &str,
    expression: &str,
    mut expected: impl FnMut() -> Value,
    timeout: Duration,
) -> Value {
    let mut last = None;
    let matched = poll_until(timeout, || {
        let want = expected();
        // An element the page has not rendered yet makes the expression throw: that is
        // "not shown yet", like a stale number, until the deadline.
        let shown = browser.eval(expression);
        if matches!(&shown, Ok(value) if *value == want) {
            return Some(want);
        }
        last = Some((shown, want));
        None
    });
    matched.unwrap_or_else(|| {
        let (shown, want) = last.expect("polled at least once");
        panic!("{what}: the page shows {shown:?}, the API says {want}")
    })
}

fn open_signed_in(browser: &mut Browser, banner: &Banner) {
    browser.navigate(&format!("{}/ui/", banner.api())).unwrap();
    browser
        .wait_for(
            "document.body.dataset.signedIn === 'false'",
            Duration::from_secs(5),
        )
        .unwrap();
    sign_in(browser, banner.token());
    browser
        .wait_for(
            "document.body.dataset.signedIn === 'true'",
            Duration::from_secs(5),
        )
        .unwrap();
}

fn sign_in(browser: &mut Browser, token: &str) {
    let token = serde_json::to_string(token).unwrap();
    browser
        .eval(&format!(
            "document.getElementById('token').value = {token}; \
             document.getElementById('signin-button').click(); true"
        ))
        .unwrap();
}

fn tab(browser: &mut Browser, name: &str) {
    browser
        .eval(&format!(
            "document.querySelector('#tabs [data-tab={name}]').click(); true"
        ))
        .unwrap();
    browser
        .wait_for(
            &format!("!document.getElementById('page-{name}').hidden"),
            Duration::from_secs(2),
        )
        .unwrap();
}

fn shoot(browser: &mut Browser, name: &str) {
    let path = screenshots().join(format!("{name}.png"));
    browser.screenshot(&path, true).unwrap();
    eprintln!("screenshot: {}", path.display());
}

fn proxy_total(overview: &Value) -> u64 {
    overview["proxies"]["by_status"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

#[test]
fn every_page_shows_what_the_api_says_and_follows_it_live() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !curl_or_skip() {
        return;
    }
    let Some(mut browser) = browser_or_skip(1400, 900) else {
        return;
    };
    let scratch = Scratch::new("dashboard");
    let (_dev, banner) = start_dev("dev-dashboard", &scratch, &STILL);
    assert_eq!(banner.get("dashboard"), format!("{}/ui/", banner.api()));
    open_signed_in(&mut browser, &banner);

    // Overview: all 16 simulated proxies, half leased to the gateway, as the API says.
    crate::common::eventually("16 proxies, 8 leased", Duration::from_secs(30), || {
        let o = api_get(&banner, "/v1/admin/overview");
        proxy_total(&o) == 16 && o["proxies"]["owned"] == 8
    });
    let shown = page_matches_api(
        &mut browser,
        "proxies on the overview",
        "document.getElementById('ov-proxies').textContent",
        || Value::from(proxy_total(&api_get(&banner, "/v1/admin/overview")).to_string()),
        Duration::from_secs(3),
    );
    assert_eq!(shown, "16");
    page_matches_api(
        &mut browser,
        "leased proxies",
        "document.getElementById('ov-owned').textContent",
        || Value::from(api_get(&banner, "/v1/admin/overview")["proxies"]["owned"].to_string()),
        Duration::from_secs(3),
    );
    page_matches_api(
        &mut browser,
        "available proxies of the upstream",
        "document.querySelector('#ov-upstreams tr[data-upstream=sim] td[data-state=AVAILABLE]').textContent",
        || {
            let o = api_get(&banner, "/v1/admin/overview");
            Value::from(
                o["upstreams"][0]["by_status"]["AVAILABLE"]
                    .as_u64()
                    .unwrap_or(0)
                    .to_string(),
            )
        },
        Duration::from_secs(3),
    );

    // Gateway traffic: the request count on the page rises with the API's.
    let before = api_get(&banner, "/v1/admin/overview")["gateway"]["requests"]
        .as_u64()
        .unwrap();
    for _ in 0..5 {
        let proxy = format!("http://dev:{}@{}", banner.password(), banner.http());
        let (code, _) = curl(&["-x", &proxy, banner.origin()]);
        assert_eq!(code, 0);
    }
    crate::common::eventually(
        "the gateway's requests counted",
        Duration::from_secs(15),
        || {
            api_get(&banner, "/v1/admin/overview")["gateway"]["requests"]
                .as_u64()
                .unwrap()
                >= before + 5
        },
    );
    let requests = page_matches_api(
        &mut browser,
        "gateway requests",
        "document.getElementById('ov-requests').textContent.replace(/,/g, '')",
        || Value::from(api_get(&banner, "/v1/admin/overview")["gateway"]["requests"].to_string()),
        Duration::from_secs(3),
    );
    assert!(requests.as_str().unwrap().parse::<u64>().unwrap() >= before + 5);
    shoot(&mut browser, "overview");

    // Upstreams: one row per upstream of /v1/upstreams, with its last listing size.
    tab(&mut browser, "upstreams");
    page_matches_api(
        &mut browser,
        "upstream rows",
        "[...document.querySelectorAll('#up-table tbody tr')].map(r => r.dataset.upstream)",
        || {
            let list = api_get(&banner, "/v1/upstreams");
            list["upstreams"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u["id"].clone())
                .collect()
        },
        Duration::from_secs(3),
    );
    page_matches_api(
        &mut browser,
        "proxies in the last listing",
        "document.querySelector('#up-table tr[data-upstream=sim] td[data-field=last_fetched]').textContent",
        || {
            Value::from(
                api_get(&banner, "/v1/upstreams")["upstreams"][0]["last_fetched"].to_string(),
            )
        },
        Duration::from_secs(3),
    );
    page_matches_api(
        &mut browser,
        "entries accepted from the last listing",
        "document.querySelector('#up-table tr[data-upstream=sim] td[data-field=accepted]').textContent",
        || {
            let o = api_get(&banner, "/v1/admin/overview");
            Value::from(o["upstreams"][0]["last_list"]["accepted"].to_string())
        },
        Duration::from_secs(3),
    );
    shoot(&mut browser, "upstreams");

    // Proxies: every proxy with its state and owner, as the listing says.
    tab(&mut browser, "proxies");
    let rows = "[...document.querySelectorAll('#px-table tbody tr')]\
                .map(r => [r.dataset.proxy, r.dataset.state, r.dataset.owner]).sort()";
    let from_api = || -> Value {
        let page = api_get(&banner, "/v1/admin/proxies?limit=1000");
        let mut rows: Vec<Value> = page["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| serde_json::json!([p["id"], p["status"], p["owner"].as_str().unwrap_or("")]))
            .collect();
        rows.sort_by_key(|r| r.to_string());
        Value::Array(rows)
    };
    let listed = page_matches_api(
        &mut browser,
        "proxy rows",
        rows,
        from_api,
        Duration::from_secs(3),
    );
    assert_eq!(listed.as_array().unwrap().len(), 16);

    // An extraction through the API shows as EXTRACTED within 2 s.
    let extracted = extract_one(&banner);
    let id = extracted["proxies"][0]["id"].as_str().unwrap().to_owned();
    let started = Instant::now();
    browser
        .wait_for(
            &format!("!!document.querySelector('#px-table tr[data-proxy=\"{id}\"][data-state=EXTRACTED][data-client=dev]')"),
            Duration::from_secs(2),
        )
        .unwrap_or_else(|e| panic!("extracted proxy not shown within 2 s: {e}"));
    eprintln!("extraction shown after {:?}", started.elapsed());
    shoot(&mut browser, "proxies");

    // The search box narrows the table to the matching proxy.
    browser
        .eval(&format!(
            "const s = document.getElementById('px-search'); s.value = '{}'; \
             s.dispatchEvent(new Event('input')); true",
            &id[..12]
        ))
        .unwrap();
    let narrowed = browser
        .wait_for(
            "document.querySelectorAll('#px-table tbody tr').length === 1 && \
             document.querySelector('#px-table tbody tr').dataset.proxy",
            Duration::from_secs(2),
        )
        .unwrap();
    assert_eq!(narrowed, id.as_str());

    // Clients: usage and quota per client, as /v1/admin/clients says.
    tab(&mut browser, "clients");
    for field in ["requests", "extracted"] {
        page_matches_api(
            &mut browser,
            field,
            &format!(
                "document.querySelector('#cl-table tr[data-client=dev] td[data-field={field}]').textContent.replace(/,/g, '')"
            ),
            || {
                let clients = api_get(&banner, "/v1/admin/clients");
                let dev = clients["clients"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["client"] == "dev")
                    .unwrap()
                    .clone();
                Value::from(dev["usage"][field].to_string())
            },
            Duration::from_secs(3),
        );
    }
    shoot(&mut browser, "clients");
}

fn leased_to(banner: &Banner, worker: &str) -> usize {
    api_get(banner, "/v1/admin/proxies?limit=1000")["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["owner"] == worker)
        .count()
}

fn mode_in_api(banner: &Banner, worker: &str) -> String {
    api_get(banner, "/v1/admin/workers")["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker"] == worker)
        .map(|w| w["mode"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn click(browser: &mut Browser, action: &str, worker: &str) {
    browser
        .eval(&format!(
            "document.querySelector('#gw-table button[data-action={action}][data-worker=\"{worker}\"]').click(); true"
        ))
        .unwrap();
}

#[test]
fn cordoning_a_gateway_from_the_page_stops_new_leases_to_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !curl_or_skip() {
        return;
    }
    let Some(mut browser) = browser_or_skip(1400, 700) else {
        return;
    };
    let scratch = Scratch::new("dashboard-cordon");
    let (_dev, banner) = start_dev("dev-dashboard-cordon", &scratch, &STILL);
    open_signed_in(&mut browser, &banner);
    tab(&mut browser, "gateways");
    let worker = browser
        .wait_for(
            "document.querySelector('#gw-table tbody tr') && \
             document.querySelector('#gw-table tbody tr').dataset.worker",
            Duration::from_secs(10),
        )
        .unwrap();
    let worker = worker.as_str().unwrap().to_owned();
    crate::common::eventually("8 proxies leased", Duration::from_secs(30), || {
        leased_to(&banner, &worker) == 8
    });
    page_matches_api(
        &mut browser,
        "proxies leased",
        &format!(
            "document.querySelector('#gw-table tr[data-worker=\"{worker}\"] td[data-field=leased]').textContent"
        ),
        || Value::from(leased_to(&banner, &worker).to_string()),
        Duration::from_secs(3),
    );
    shoot(&mut browser, "gateways");

    // Drain from the page: every lease goes back. Then cordon: none comes again.
    click(&mut browser, "drain", &worker);
    crate::common::eventually("draining", Duration::from_secs(3), || {
        mode_in_api(&banner, &worker) == "draining"
    });
    crate::common::eventually("the drain finished", Duration::from_secs(30), || {
        leased_to(&banner, &worker) == 0
    });
    click(&mut browser, "cordon", &worker);
    crate::common::eventually("cordoned", Duration::from_secs(3), || {
        mode_in_api(&banner, &worker) == "cordoned"
    });
    browser
        .wait_for(
            &format!("document.querySelector('#gw-table tr[data-worker=\"{worker}\"]').dataset.mode === 'cordoned'"),
            Duration::from_secs(3),
        )
        .unwrap();
    // 15 ownership rounds assign nothing to it.
    let rounds = || ownership_rounds(&format!("{}/metrics", banner.api()));
    let before = rounds();
    crate::common::eventually(
        "15 ownership rounds while cordoned",
        Duration::from_secs(30),
        || {
            assert_eq!(
                leased_to(&banner, &worker),
                0,
                "a cordoned gateway got a lease"
            );
            rounds() >= before + 15.0
        },
    );
    shoot(&mut browser, "gateways-cordoned");

    // Uncordon from the page: leases come back, so the watch above could have failed.
    click(&mut browser, "uncordon", &worker);
    crate::common::eventually(
        "leases again after uncordon",
        Duration::from_secs(10),
        || leased_to(&banner, &worker) > 0,
    );
    assert_eq!(mode_in_api(&banner, &worker), "active");
}

#[test]
fn without_a_session_nothing_shows_and_cookie_writes_need_the_csrf_token() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !curl_or_skip() {
        return;
    }
    let Some(mut browser) = browser_or_skip(1000, 700) else {
        return;
    };
    let scratch = Scratch::new("dashboard-auth");
    let (_dev, banner) = start_dev("dev-dashboard-auth", &scratch, &STILL);
    let api = banner.api().to_owned();
    browser.navigate(&format!("{api}/ui/")).unwrap();
    browser
        .wait_for(
            "document.body.dataset.signedIn === 'false'",
            Duration::from_secs(5),
        )
        .unwrap();
    let no_data = "document.getElementById('app').hidden && \
                   document.querySelectorAll('#app tbody tr').length === 0 && \
                   !document.getElementById('signin').hidden";
    assert_eq!(browser.eval(no_data).unwrap(), true);

    // A wrong token: refused, the sign-in form stays, no data appears.
    sign_in(&mut browser, "not-the-token");
    browser
        .wait_for(
            "document.getElementById('signin-error').textContent",
            Duration::from_secs(3),
        )
        .unwrap();
    assert_eq!(browser.eval(no_data).unwrap(), true);
    shoot(&mut browser, "signin-refused");
    for path in [
        "/v1/admin/overview",
        "/v1/admin/proxies",
        "/v1/admin/clients",
        "/v1/admin/workers",
        "/v1/upstreams",
        "/ui/session",
    ] {
        assert_eq!(
            status_of(&[&format!("{api}{path}")]),
            401,
            "{path} without credentials"
        );
        assert_eq!(
            status_of(&["-H", "Authorization: Bearer wrong", &format!("{api}{path}")]),
            401,
            "{path} with a wrong token"
        );
    }

    // Signed in, the browser holds an HttpOnly cookie the page's script cannot read.
    sign_in(&mut browser, banner.token());
    browser
        .wait_for(
            "document.body.dataset.signedIn === 'true'",
            Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(browser.eval("document.cookie").unwrap(), "");
    let cookies = browser
        .call("Network.getAllCookies", serde_json::json!({}))
        .unwrap();
    let session = cookies["cookies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "pp_session")
        .unwrap()
        .clone();
    assert_eq!(session["httpOnly"], true);
    assert_eq!(session["sameSite"], "Strict");
    // Plain HTTP (dev on loopback): the cookie is not `Secure`, so no `__Host-` name, which
    // keeps a dashboard reached over plain HTTP usable in any browser.
    assert_eq!(session["secure"], false);
    let cookie = format!("Cookie: pp_session={}", session["value"].as_str().unwrap());
    let workers = api_get(&banner, "/v1/admin/workers");
    let worker = workers["workers"][0]["worker"].as_str().unwrap().to_owned();
    let cordon = format!("{api}/v1/admin/workers/{worker}/cordon");

    // The cookie reads; a write with it but without (or with a wrong) CSRF token is 403
    // and changes nothing.
    assert_eq!(
        status_of(&["-H", &cookie, &format!("{api}/v1/admin/overview")]),
        200
    );
    assert_eq!(status_of(&["-X", "POST", "-H", &cookie, &cordon]), 403);
    assert_eq!(
        status_of(&[
            "-X",
            "POST",
            "-H",
            &cookie,
            "-H",
            "X-CSRF-Token: wrong",
            &cordon
        ]),
        403
    );
    assert_eq!(mode_in_api(&banner, &worker), "active");

    // Signing out ends the session: the same cookie opens nothing any more.
    browser
        .eval("document.getElementById('signout').click(); true")
        .unwrap();
    browser
        .wait_for(
            "document.body.dataset.signedIn === 'false'",
            Duration::from_secs(3),
        )
        .unwrap();
    assert_eq!(browser.eval(no_data).unwrap(), true);
    assert_eq!(
        status_of(&["-H", &cookie, &format!("{api}/v1/admin/overview")]),
        401
    );
    assert_eq!(
        status_of(&["-H", &cookie, &format!("{api}/ui/session")]),
        401
    );
}

/// `proxypool serve` from a file with a SQLite quota (the store guard's durable ledger), for
/// the store's states: (process, API base URL, config file).
fn start_serve_with_sqlite(
    scratch: &Scratch,
    sim: &proxypool_sim::SimVendor,
) -> (crate::common::Proc, String, PathBuf) {
    let (api, http, admin) = (
        crate::common::free_port(),
        crate::common::free_port(),
        crate::common::free_port(),
    );
    let config = scratch.write(
        "proxypool.toml",
        &format!(
            r#"
[quota]
url = "sqlite://data/quota.sqlite3"

[listen]
control = "127.0.0.1:0"
api = "127.0.0.1:{api}"

{upstream}

[[clients]]
id = "ops"
project = "ops"
admin = true
api_token = {{ env = "OPS_TOKEN" }}
gateway_password = {{ env = "OPS_PASSWORD" }}

[gateway]
worker_id = "box-1"
[gateway.listeners]
http = "127.0.0.1:{http}"
admin = "127.0.0.1:{admin}"
{destinations}
"#,
            upstream = crate::common::sim_upstream(sim),
            destinations = crate::common::allow_sim_origin(sim),
        ),
    );
    let serve = crate::common::Proc::start(
        "serve-store",
        &["serve", "--config", config.to_str().unwrap()],
        &SERVE_ENV,
        &scratch.path,
    );
    (serve, format!("http://127.0.0.1:{api}"), config)
}

const SERVE_ENV: [(&str, &str); 2] = [
    ("OPS_TOKEN", "ops-api-token-0001"),
    ("OPS_PASSWORD", "ops-gateway-password"),
];

/// `store` of `GET /v1/upstreams` (Null until it answers).
fn store_of(api: &str) -> Value {
    let (code, body) = curl(&[
        "-H",
        "Authorization: Bearer ops-api-token-0001",
        &format!("{api}/v1/upstreams"),
    ]);
    if code != 0 {
        return Value::Null;
    }
    serde_json::from_str::<Value>(&body).map_or(Value::Null, |v| v["store"].clone())
}

/// `proxypool store ACTION --config FILE`: (exit code, the JSON it printed, stderr).
fn store_command(action: &str, config: &std::path::Path) -> (i32, Value, String) {
    let (code, stdout, stderr) = crate::common::run(
        &["store", action, "--config", config.to_str().unwrap()],
        &SERVE_ENV,
    );
    (
        code,
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr,
    )
}

#[test]
fn the_overview_says_when_the_pool_store_recovers_and_operators_control_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !curl_or_skip() {
        return;
    }
    let Some(mut browser) = browser_or_skip(1400, 900) else {
        return;
    };
    let scratch = Scratch::new("dashboard-store");
    let (_runtime, sim) = crate::common::sim_vendor(4);
    let (_serve, api, config) = start_serve_with_sqlite(&scratch, &sim);
    crate::common::eventually("the store is established", Duration::from_secs(30), || {
        store_of(&api)["state"] == "ok"
    });
    let identity = store_of(&api)["identity"].clone();
    let (code, status, stderr) = store_command("status", &config);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(status["ledger"]["identity"], identity);
    assert_eq!(status["ledger"]["recovery"], Value::Null);

    // An operator forces a recovery (say, Redis was restored from a copy).
    let (code, forced, stderr) = store_command("recover", &config);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(forced["ledger"]["loss"], "forced");
    crate::common::eventually(
        "the forced recovery is in place",
        Duration::from_secs(30),
        || {
            let store = store_of(&api);
            store["state"] == "recovering" && store["loss"] == "forced"
        },
    );
    assert_ne!(store_of(&api)["identity"], identity, "a new store");

    browser.navigate(&format!("{api}/ui/")).unwrap();
    browser
        .wait_for(
            "document.body.dataset.signedIn === 'false'",
            Duration::from_secs(5),
        )
        .unwrap();
    sign_in(&mut browser, "ops-api-token-0001");
    browser
        .wait_for(
            "!document.getElementById('ov-store').hidden && \
             document.getElementById('ov-store').textContent.includes('An operator forced a recovery')",
            Duration::from_secs(10),
        )
        .unwrap();
    shoot(&mut browser, "overview-store-recovering");

    // The operator knows nothing was handed out: the recovery ends, the notice goes.
    let (code, acknowledged, stderr) = store_command("acknowledge", &config);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(acknowledged["ledger"]["recovery"], Value::Null);
    crate::common::eventually("the recovery ends", Duration::from_secs(30), || {
        store_of(&api)["state"] == "ok"
    });
    browser
        .wait_for(
            "document.getElementById('ov-store').hidden",
            Duration::from_secs(10),
        )
        .unwrap();
    // A file whose quota database never saw a store: nothing to acknowledge, nothing written.
    let other = Scratch::new("dashboard-store-other");
    let lonely = other.write(
        "proxypool.toml",
        &std::fs::read_to_string(&config).unwrap().replace(
            "sqlite://data/quota.sqlite3",
            "sqlite://elsewhere/quota.sqlite3",
        ),
    );
    let (code, _, stderr) = store_command("acknowledge", &lonely);
    assert_ne!(code, 0);
    assert!(stderr.contains("no controller has recorded"), "{stderr}");
    let (code, status, _) = store_command("status", &lonely);
    assert_eq!((code, &status["ledger"]), (0, &Value::Null));
}

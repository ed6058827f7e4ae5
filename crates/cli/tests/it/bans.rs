//! Ban-aware rotation end to end in split mode: one `proxypool controller` and two
//! `proxypool gateway` processes on a private Redis and PostgreSQL, against a simulated
//! vendor of 8 proxies whose origin bans 3 of their exits for one host name.
//!
//! 1. Gateway A holds all 8. Every plain-HTTP GET to the banning host succeeds, with at
//!    most one retry; each banned exit is tried once (its ban) and never again while it
//!    cools down; another host still gets all 8 exits.
//! 2. Gateway A is drained and its proxies go to gateway B, which has never seen a ban:
//!    its first snapshot holding them carries the 3 cooldowns A reported, and B sends
//!    nothing to the banning host through them.
//! 3. Inside a CONNECT tunnel the gateway sees no status: the client reports the ban with
//!    `POST /v1/feedback` and the proxy the CONNECT answer named, and no later tunnel to
//!    that host goes through it. The client's `ok` then clears it: the next snapshot
//!    takes the cooldown off the gateway, and the proxy carries that host again.
//! 4. A client that knows only its sticky session reports it by session: the gateway that
//!    holds the session bans the session's proxy, and the session moves off it.

use crate::common::split::{controller_config_as, gateway_config, migrate_quota};
use crate::common::{Proc, Scratch, curl, curl_or_skip, eventually, free_port, gateway_proxies};
use crate::common::{api, gateway_status, sim_upstream, sim_vendor};
use proxypool_sim::StatusCode;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

const PROXIES: usize = 8;
const BANNING: &str = "shop-a.test";
const OTHER: &str = "shop-b.test";
const TUNNELED: &str = "shop-c.test";
const SESSIONED: &str = "shop-d.test";

/// What one request through a gateway saw: the gateway's headers and the origin's echo.
#[derive(Debug)]
struct Seen {
    status: u16,
    headers: BTreeMap<String, String>,
    exit: Option<IpAddr>,
}

/// A GET of `url` through the HTTP proxy `proxy`; `tunnel` sends it through `CONNECT`
/// (whose answer's headers are the ones kept).
fn get(proxy: &str, url: &str, tunnel: bool) -> Seen {
    let mut args = vec!["-i", "-x", proxy];
    if tunnel {
        args.push("-p");
    }
    args.push(url);
    let (code, out) = curl(&args);
    assert_eq!(code, 0, "curl {args:?}: {out}");
    let blocks: Vec<&str> = out.split("\r\n\r\n").collect();
    let head = |block: &str| -> (u16, BTreeMap<String, String>) {
        let mut lines = block.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        (status, headers)
    };
    // With a tunnel the first block is the CONNECT answer, the second the origin's.
    let (gateway_block, origin_block) = if tunnel { (0, 1) } else { (0, 0) };
    let (_, headers) = head(blocks[gateway_block]);
    let (status, _) = head(blocks[origin_block]);
    let exit = blocks
        .last()
        .and_then(|body| serde_json::from_str::<Value>(body).ok())
        .and_then(|echo| echo["exit"].as_str()?.parse().ok());
    Seen {
        status,
        headers,
        exit,
    }
}

/// Proxy id → exit, from GETs of `url` through `proxy` until every proxy answered (each
/// view starts its round robin over, so one pass is not always enough).
fn exits_by_id(proxy: &str, url: &str) -> BTreeMap<String, IpAddr> {
    let mut seen = BTreeMap::new();
    for _ in 0..16 * PROXIES {
        let answer = get(proxy, url, false);
        assert_eq!(answer.status, 200, "{answer:?}");
        seen.insert(
            answer.headers["x-proxypool-proxy"].clone(),
            answer.exit.unwrap(),
        );
        if seen.len() == PROXIES {
            break;
        }
    }
    assert_eq!(seen.len(), PROXIES, "{seen:?}");
    assert_eq!(
        seen.values().collect::<BTreeSet<_>>().len(),
        PROXIES,
        "one exit per proxy: {seen:?}"
    );
    seen
}

fn cooldowns(admin: &str) -> Value {
    gateway_status(admin).map_or(Value::Null, |s| s["cooldowns"].clone())
}

#[test]
fn bans_follow_the_proxy_from_gateway_to_gateway_and_feedback_covers_tunnels() {
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
    let (_runtime, sim) = sim_vendor(PROXIES);
    let scratch = Scratch::new("bans");
    let (control, api) = (free_port(), free_port());
    // Cooldowns far longer than the test, so "never again" is what is measured.
    let config = format!(
        "{}\n[cooldowns]\nbase = \"10m\"\ncap = \"1h\"\n",
        controller_config_as(
            &redis,
            pg.port(),
            control,
            api,
            PROXIES,
            &sim_upstream(&sim),
            true
        )
    );
    let config = scratch.write("controller.toml", &config);
    let config = config.to_str().unwrap();
    let env = [
        ("WORKER_TOKEN_A", "bans-worker-token-a"),
        ("WORKER_TOKEN_B", "bans-worker-token-b"),
        ("ACME_TOKEN", "acme-api-token-0001"),
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
    let start_gateway = |name: &str| {
        let (http, admin) = (free_port(), free_port());
        let file = scratch.write(
            &format!("{name}.toml"),
            &gateway_config(name, &[control], http, admin, &sim, None),
        );
        let process = Proc::start(
            name,
            &["gateway", "--config", file.to_str().unwrap()],
            &env,
            &scratch.path,
        );
        let proxy = format!("http://acme:acme-gateway-password@127.0.0.1:{http}");
        (process, proxy, format!("127.0.0.1:{admin}"))
    };
    let origin = sim.origin();
    let url = |host: &str| origin.host_url(host, "/");

    // 1. Gateway A holds every proxy.
    let (_gateway_a, proxy_a, admin_a) = start_gateway("gw-a");
    eventually(
        "gateway A holds every proxy",
        Duration::from_secs(60),
        || gateway_proxies(&admin_a) == PROXIES as u64,
    );
    // Picks go round the snapshot's proxies in id order: learn which exit each id has.
    let by_id = exits_by_id(&proxy_a, &url(OTHER));
    let order: Vec<IpAddr> = by_id.values().copied().collect();
    // Not neighbours in that order (nor across its wrap), so a ban's retry, which takes
    // the next proxy, takes one that is not banned.
    let banned: Vec<IpAddr> = [1, 4, 6].map(|i| order[i]).to_vec();
    for exit in &banned {
        origin.ban(*exit, BANNING, StatusCode::FORBIDDEN);
    }
    for round in 0..24 {
        let seen = get(&proxy_a, &url(BANNING), false);
        assert_eq!(seen.status, 200, "request {round}: {seen:?}");
        let attempts: u32 = seen.headers["x-proxypool-attempts"].parse().unwrap();
        assert!(attempts <= 2, "at most one retry: {seen:?}");
        assert!(!banned.contains(&seen.exit.unwrap()), "{seen:?}");
    }
    for exit in &banned {
        let count = origin.host_counts(*exit, BANNING);
        assert_eq!((count.requests, count.banned), (1, 1), "{exit}");
    }
    // The other host still gets every exit.
    assert_eq!(exits_by_id(&proxy_a, &url(OTHER)), by_id);
    // The bans leave with A's next report (every second here).
    let reported = eventually("A reported its bans", Duration::from_secs(5), || {
        let cooldowns = cooldowns(&admin_a);
        cooldowns["cooling"] == 3 && cooldowns["pending_report"] == 0
    });
    assert!(reported < Duration::from_secs(3), "{reported:?}");

    // 2. Gateway B takes A's proxies over, with what A learned.
    let (_gateway_b, proxy_b, admin_b) = start_gateway("gw-b");
    let drain = api::call(
        "POST",
        &format!("http://127.0.0.1:{api}/v1/admin/workers/gw-a/drain"),
        Some("acme-api-token-0001"),
        None,
    );
    assert_eq!(drain.status, 200, "{drain:?}");
    let mut first_full: Option<Value> = None;
    eventually(
        "gateway B holds every proxy",
        Duration::from_secs(60),
        || {
            let Some(status) = gateway_status(&admin_b) else {
                return false;
            };
            if status["snapshot"]["proxies"] == PROXIES as u64 {
                first_full = Some(status);
                return true;
            }
            false
        },
    );
    let first_full = first_full.unwrap();
    assert_eq!(
        first_full["cooldowns"]["cooling"], 3,
        "the snapshot that brought the proxies brought their cooldowns: {first_full}"
    );
    for round in 0..16 {
        let seen = get(&proxy_b, &url(BANNING), false);
        assert_eq!(seen.status, 200, "request {round} through B: {seen:?}");
        assert_eq!(seen.headers["x-proxypool-attempts"], "1", "{seen:?}");
    }
    for exit in &banned {
        assert_eq!(
            origin.host_counts(*exit, BANNING).requests,
            1,
            "{exit} through B"
        );
    }
    assert_eq!(
        exits_by_id(&proxy_b, &url(OTHER)),
        by_id,
        "B uses all 8 for the other host"
    );

    // 3. A tunnel: the CONNECT answer names the proxy, with the ticket that proves the
    //    gateway routed this client through it; the client reports the ban with both.
    let seen = get(&proxy_b, &url(TUNNELED), true);
    assert_eq!(seen.status, 200, "{seen:?}");
    let proxy_id = seen.headers["x-proxypool-proxy"].clone();
    let ticket = seen.headers["x-proxypool-ticket"].clone();
    let exit = seen.exit.unwrap();
    feedback(
        api,
        serde_json::json!({ "proxy_id": proxy_id, "domain": TUNNELED, "verdict": "banned",
                            "ticket": ticket }),
    );
    let learned = eventually("B learned the reported ban", Duration::from_secs(5), || {
        cooling_on(&admin_b, &proxy_id, TUNNELED)
    });
    eprintln!("bans reported within {reported:?}; feedback reached gateway B within {learned:?}");
    let before = origin.host_counts(exit, TUNNELED).requests;
    for _ in 0..2 * PROXIES {
        let seen = get(&proxy_b, &url(TUNNELED), true);
        assert_eq!(seen.status, 200, "{seen:?}");
        assert_ne!(seen.headers["x-proxypool-proxy"], proxy_id);
    }
    assert_eq!(origin.host_counts(exit, TUNNELED).requests, before);

    // 3b. The client finds the host works through that proxy after all: its `ok` clears
    //     the cooldown in the store, and the next snapshot takes it off gateway B too.
    let answer = feedback(
        api,
        serde_json::json!({ "proxy_id": proxy_id, "domain": TUNNELED, "verdict": "ok",
                            "ticket": ticket }),
    );
    assert!(answer.contains("cleared"), "{answer}");
    let cleared = eventually("B dropped the cleared ban", Duration::from_secs(5), || {
        !cooling_on(&admin_b, &proxy_id, TUNNELED)
    });
    eprintln!("the cleared ban left gateway B within {cleared:?}");
    let carried_again = (0..2 * PROXIES).any(|_| {
        let seen = get(&proxy_b, &url(TUNNELED), true);
        assert_eq!(seen.status, 200, "{seen:?}");
        seen.headers["x-proxypool-proxy"] == proxy_id
    });
    assert!(carried_again, "{proxy_id} carries {TUNNELED} again");

    // 4. A client that knows only its sticky session (a SOCKS5 client, say) reports it:
    //    the gateway holding the session applies the ban to the session's proxy, which
    //    the session then leaves for that host.
    let session = proxy_b.replacen("acme:", "acme-session-t1:", 1);
    let pinned = get(&session, &url(SESSIONED), true);
    assert_eq!(pinned.headers["x-proxypool-session"], "new", "{pinned:?}");
    let pinned_id = pinned.headers["x-proxypool-proxy"].clone();
    let answer = feedback(
        api,
        serde_json::json!({ "session": "t1", "domain": SESSIONED, "verdict": "banned" }),
    );
    assert!(answer.contains("queued"), "{answer}");
    let applied = eventually(
        "B applied the session's feedback",
        Duration::from_secs(5),
        || cooling_on(&admin_b, &pinned_id, SESSIONED),
    );
    eprintln!("session feedback applied by gateway B within {applied:?}");
    let moved = get(&session, &url(SESSIONED), true);
    assert_eq!(
        moved.headers["x-proxypool-session"], "reassigned",
        "{moved:?}"
    );
    assert_ne!(moved.headers["x-proxypool-proxy"], pinned_id);
}

/// `POST /v1/feedback` with `body` as the client acme; the answer's body (asserted 200).
fn feedback(api: u16, body: Value) -> String {
    let answer = api::call(
        "POST",
        &format!("http://127.0.0.1:{api}/v1/feedback"),
        Some("acme-api-token-0001"),
        Some(&body.to_string()),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

/// Whether the gateway at `admin` lists a running cooldown of `proxy_id` for `domain`.
fn cooling_on(admin: &str, proxy_id: &str, domain: &str) -> bool {
    cooldowns(admin)["entries"]
        .as_array()
        .is_some_and(|entries| {
            entries
                .iter()
                .any(|e| e["proxy_id"] == proxy_id && e["domain"] == domain)
        })
}

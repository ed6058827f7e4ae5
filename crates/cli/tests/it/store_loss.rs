//! Exclusivity through a loss of the pool store, in split mode as processes: two
//! `proxypool controller`s and two `proxypool gateway`s on a private Redis (AOF on, every
//! write synced) and PostgreSQL, against the simulated vendor.
//!
//! 1. A few hundred proxies are extracted and the gateways lease others.
//! 2. Redis is killed and started on an empty data directory. Every controller refuses
//!    calls until one of them has put a new store in place (counted once, shown on
//!    `/readyz` and `/v1/upstreams`); then no extraction returns, and no gateway routes, a
//!    proxy that was handed out before (a gateway only its own, until its lease ends),
//!    while proxies the vendor issues after the loss are served.
//! 3. Redis restarted with its data is not a loss.
//! 4. Redis restored from an older copy of its AOF (taken in step 3): recognised as rolled
//!    back, and again nothing handed out before is handed out again.

use crate::common::split::{failover_controller_config, gateway_config, migrate_quota};
use crate::common::{
    Proc, Scratch, api, curl, curl_or_skip, eventually, eventually_some, free_port,
    gateway_proxies, sim_upstream,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

const ENV: [(&str, &str); 5] = [
    ("WORKER_TOKEN_A", "loss-worker-token-a"),
    ("WORKER_TOKEN_B", "loss-worker-token-b"),
    ("ACME_TOKEN", "acme-api-token-0001"),
    ("ACME_PASSWORD", "acme-gateway-password"),
    ("QUOTA_PASSWORD", "quota-role-password"),
];
/// Listed by the vendor at any time.
const PROXIES: usize = 260;
/// Each gateway's share.
const PER_GATEWAY: u64 = 20;

/// A controller's client API, as the admin client `acme`.
struct Api {
    port: u16,
}

impl Api {
    /// One call, sent once: the test observes the store's 503s itself (status 0 when
    /// nothing answered).
    fn call(&self, method: &str, path: &str, body: Option<&str>) -> api::Answer {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        api::call_once(method, &url, Some("acme-api-token-0001"), body)
    }

    /// A partial extraction of `count`: (status, error code, ids with their host:port).
    fn extract(&self, count: u32) -> (u16, String, Vec<(String, String)>) {
        let answer = self.call(
            "POST",
            "/v1/extractions",
            Some(&format!(r#"{{"count": {count}, "mode": "partial"}}"#)),
        );
        let (status, body) = (answer.status, answer.json());
        let code = body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let ids = body["proxies"]
            .as_array()
            .map(|proxies| {
                proxies
                    .iter()
                    .map(|p| {
                        (
                            p["id"].as_str().unwrap().to_owned(),
                            format!("{}:{}", p["host"].as_str().unwrap(), p["port"]),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        (status, code, ids)
    }

    fn metric_sum(&self, family: &str, label: &str) -> f64 {
        let (code, body) = curl(&[&format!("http://127.0.0.1:{}/metrics", self.port)]);
        assert_eq!(code, 0);
        body.lines()
            .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(label))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    }

    /// `store` of `/v1/upstreams` (Null when the call fails).
    fn store(&self) -> Value {
        let answer = self.call("GET", "/v1/upstreams", None);
        if answer.status != 200 {
            return Value::Null;
        }
        answer.json()["store"].clone()
    }

    /// Every proxy of the pool: id -> (status, owner).
    fn listing(&self) -> BTreeMap<String, (String, Option<String>)> {
        // Once the store serves again: a 503 here is load, retried as a client does.
        let url = format!("http://127.0.0.1:{}/v1/admin/proxies?limit=500", self.port);
        let answer = api::call("GET", &url, Some("acme-api-token-0001"), None);
        assert_eq!(answer.status, 200, "{answer:?}");
        let body = answer.json();
        assert!(body["next"].is_null(), "one page");
        body["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap().to_owned(),
                    (
                        p["status"].as_str().unwrap().to_owned(),
                        p["owner"].as_str().map(str::to_owned),
                    ),
                )
            })
            .collect()
    }
}

/// What was handed out before a loss: extracted ids, and leased ids by gateway.
#[derive(Default, Debug)]
struct HandedOut {
    extracted: BTreeSet<String>,
    leased: BTreeMap<String, String>,
}

impl HandedOut {
    fn add_listing(&mut self, listing: &BTreeMap<String, (String, Option<String>)>) {
        for (id, (status, owner)) in listing {
            if status == "EXTRACTED" {
                self.extracted.insert(id.clone());
            }
            if let Some(owner) = owner {
                self.leased.insert(id.clone(), owner.clone());
            }
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.extracted.contains(id) || self.leased.contains_key(id)
    }
}

/// The proxy id a request through `proxy` was carried by (`X-Proxypool-Proxy`).
fn routed_by(proxy: &str, origin: &str) -> Option<String> {
    let (code, out) = curl(&["-i", "-x", proxy, origin]);
    if code != 0 || !out.starts_with("HTTP/1.1 200") {
        return None;
    }
    out.lines()
        .find_map(|l| {
            l.strip_prefix("x-proxypool-proxy: ")
                .or_else(|| l.strip_prefix("X-Proxypool-Proxy: "))
        })
        .map(|id| id.trim().to_owned())
}

/// Kills Redis, lets `change` do what it will to its data directory, starts it again.
fn redis_down_and_up(redis: &mut proxypool_testkit::RedisServer, change: impl FnOnce(&Path)) {
    redis.stop().unwrap();
    change(redis.dir().unwrap());
    redis.start_again().unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Checks, over at least 30 rounds and until new proxies were extracted, that
/// extractions and both gateways' routes never hand out what `before` says was handed out
/// (a gateway may route only what it held itself); returns the ids extracted meanwhile
/// (all new).
fn nothing_handed_out_again(
    apis: &[Api],
    gateways: &[(&str, String)],
    origin: &str,
    before: &HandedOut,
    rotated: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut extracted = BTreeSet::new();
    let mut routed_new = 0;
    let mut round = 0;
    eventually("new proxies extracted", Duration::from_secs(120), || {
        round += 1;
        let (status, code, ids) = apis[round % 2].extract(5);
        match status {
            200 => {
                for (id, addr) in ids {
                    assert!(!before.contains(&id), "{id} extracted again after the loss");
                    assert!(
                        rotated.contains(&addr),
                        "{addr} was not issued after the loss"
                    );
                    assert!(extracted.insert(id));
                }
            }
            503 => assert!(
                ["store_recovering", "store_lost"].contains(&code.as_str()),
                "unexpected 503 {code}"
            ),
            other => panic!("extraction answered {other} {code}"),
        }
        for (worker, proxy) in gateways {
            if let Some(id) = routed_by(proxy, origin) {
                match before.leased.get(&id) {
                    Some(owner) => assert_eq!(owner, worker, "{worker} routed {id}, {owner}'s"),
                    None => {
                        assert!(
                            !before.extracted.contains(&id),
                            "{worker} routed extracted {id}"
                        );
                        routed_new += 1;
                    }
                }
            }
        }
        round >= 30 && !extracted.is_empty()
    });
    eprintln!(
        "after the loss: {} new proxies extracted, {routed_new} routes over new leases",
        extracted.len()
    );
    extracted
}

#[test]
fn nothing_handed_out_before_a_store_loss_is_handed_out_again() {
    if !curl_or_skip() {
        return;
    }
    let Some(mut redis) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    for setting in [["appendonly", "yes"], ["appendfsync", "always"]] {
        redis
            .command(&["CONFIG", "SET", setting[0], setting[1]])
            .unwrap();
    }
    // Kept in the file, so a restart reads the AOF back.
    redis.command(&["CONFIG", "REWRITE"]).unwrap();
    let Some(pg) = proxypool_testkit::private_postgres_or_skip() else {
        return;
    };
    let admin_url = pg.create_database("proxypool_split").unwrap();
    let (runtime, sim) = crate::common::sim_vendor(PROXIES);
    // Proxies live a minute: that is the hold of a recovery.
    let upstream = sim_upstream(&sim)
        .replace("ttl = \"10m\"", "ttl = \"60s\"")
        .replace("max_size = 100", "max_size = 1000");
    let scratch = Scratch::new("store-loss");
    let controls = [free_port(), free_port()];
    let apis = [Api { port: free_port() }, Api { port: free_port() }];
    let mut env: Vec<(&str, &str)> = ENV.to_vec();
    env.push(("PG_ADMIN_URL", admin_url.as_str()));
    let mut controllers = Vec::new();
    for (i, name) in ["ctl-1", "ctl-2"].into_iter().enumerate() {
        let text =
            failover_controller_config(&redis, pg.port(), controls[i], apis[i].port, &upstream)
                + &format!("\n[ownership]\nper_worker_target = {PER_GATEWAY}\n");
        let file = scratch.write(&format!("{name}.toml"), &text);
        if i == 0 {
            migrate_quota(file.to_str().unwrap(), &env);
        }
        controllers.push(Proc::start(
            name,
            &["controller", "--config", file.to_str().unwrap()],
            &env,
            &scratch.path,
        ));
    }
    let mut gateways = Vec::new();
    let mut proxies = Vec::new();
    for (worker, order) in [("gw-a", [0, 1]), ("gw-b", [1, 0])] {
        let (http, admin) = (free_port(), free_port());
        let file = scratch.write(
            &format!("{worker}.toml"),
            &gateway_config(
                worker,
                &[controls[order[0]], controls[order[1]]],
                http,
                admin,
                &sim,
                None,
            ),
        );
        gateways.push((
            Proc::start(
                worker,
                &["gateway", "--config", file.to_str().unwrap()],
                &env,
                &scratch.path,
            ),
            format!("127.0.0.1:{admin}"),
        ));
        proxies.push((
            worker,
            format!("http://acme:acme-gateway-password@127.0.0.1:{http}"),
        ));
    }
    let origin = sim.origin().url("/");
    eventually(
        "both gateways hold their share",
        Duration::from_secs(90),
        || {
            gateways
                .iter()
                .all(|(_, admin)| gateway_proxies(admin) == PER_GATEWAY)
        },
    );

    // 1. A few hundred extracted, from both controllers.
    let mut before = HandedOut::default();
    let mut extracted = 0;
    eventually("200 proxies extracted", Duration::from_secs(90), || {
        let (status, _, ids) = apis[extracted % 2].extract(50);
        if status == 200 {
            for (id, _) in ids {
                assert!(before.extracted.insert(id), "extracted twice");
                extracted += 1;
            }
        }
        extracted >= 200
    });
    let listing = apis[0].listing();
    before.add_listing(&listing);
    assert_eq!(
        before.leased.len() as u64,
        2 * PER_GATEWAY,
        "{:?}",
        before.leased
    );
    assert!(before.extracted.len() >= 200);
    for (worker, proxy) in &proxies {
        let id = routed_by(proxy, &origin).expect("routed before the loss");
        assert_eq!(before.leased.get(&id).map(String::as_str), Some(*worker));
    }
    let first_identity = apis[0].store()["identity"].clone();
    assert_eq!(apis[0].store()["state"], "ok");

    // 2. The data directory is lost.
    redis_down_and_up(&mut redis, |dir| {
        std::fs::remove_dir_all(dir.join("appendonlydir")).unwrap();
    });
    eventually(
        "the loss is recognised and a new store put in place",
        Duration::from_secs(30),
        || {
            // Each controller sees the loss on its own next check; until then the one
            // that did not put the new store in place refuses everything (Lost).
            apis.iter().all(|api| {
                let store = api.store();
                store["state"] == "recovering" && store["loss"] == "missing"
            })
        },
    );
    assert_ne!(apis[0].store()["identity"], first_identity);
    assert_eq!(apis[0].store()["identity"], apis[1].store()["identity"]);
    let losses: f64 = apis
        .iter()
        .map(|a| {
            a.metric_sum(
                "proxypool_controller_store_losses_total",
                "reason=\"missing\"",
            )
        })
        .sum();
    assert_eq!(losses, 1.0, "one controller recorded the loss");
    let ready = apis[0].call("GET", "/readyz", None);
    assert_eq!(ready.status, 200, "{ready:?}");
    assert_eq!(ready.json()["store"]["state"], "recovering");
    // Refetched, every proxy is withheld: a clear answer, never someone else's proxy.
    eventually(
        "extraction says the store is recovering",
        Duration::from_secs(30),
        || {
            let (status, code, ids) = apis[0].extract(5);
            assert!(
                ids.is_empty(),
                "handed out during recovery before new proxies: {ids:?}"
            );
            status == 503 && code == "store_recovering"
        },
    );
    let refused = apis[0].call("POST", "/v1/extractions", Some(r#"{"count": 1}"#));
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    // The vendor issues new proxies: provably new, they are served.
    let mut rotated: BTreeSet<String> = runtime
        .block_on(sim.vendor().rotate(60))
        .unwrap()
        .iter()
        .map(|p| p.addr().to_string())
        .collect();
    let after_first = nothing_handed_out_again(&apis, &proxies, &origin, &before, &rotated);

    // 3. Restarted with its data: not a loss. A copy of the AOF is kept for step 4.
    let backup = scratch.file("aof-copy");
    let identity = apis[0].store()["identity"].clone();
    assert!(identity.is_string(), "{identity}");
    redis_down_and_up(&mut redis, |dir| {
        copy_dir(&dir.join("appendonlydir"), &backup)
    });
    // Both controllers checked the restarted store before the loss count is read, and
    // the generation moved past the copy's, so restoring the copy below is a rollback:
    // each identity check advances the generation, and none can while the store is down,
    // so a controller's generation changing after the restart is a check of the
    // restarted store.
    let generations = apis.each_ref().map(|a| {
        eventually_some(
            "the controller reports the store's generation",
            Duration::from_secs(30),
            || a.store()["generation"].as_u64(),
        )
    });
    eventually(
        "both controllers checked the restarted store",
        Duration::from_secs(30),
        || {
            apis.iter().zip(generations).all(|(a, before)| {
                let store = a.store();
                store["identity"] == identity
                    && store["generation"].as_u64().is_some_and(|now| now > before)
            })
        },
    );
    let losses: f64 = apis
        .iter()
        .map(|a| a.metric_sum("proxypool_controller_store_losses_total", "reason="))
        .sum();
    assert_eq!(losses, 1.0, "a restart with the data is no loss");

    // More is handed out after the copy: then the copy is restored.
    rotated.extend(
        runtime
            .block_on(sim.vendor().rotate(60))
            .unwrap()
            .iter()
            .map(|p| p.addr().to_string()),
    );
    let mut before_second = HandedOut::default();
    before_second
        .extracted
        .extend(before.extracted.iter().cloned());
    before_second.extracted.extend(after_first.iter().cloned());
    // Once the new proxies are checked: something extracted, then a few more tries.
    let extract_into = |extracted: &mut BTreeSet<String>| {
        let (status, _, ids) = apis[0].extract(10);
        let got = status == 200 && !ids.is_empty();
        extracted.extend(ids.into_iter().map(|(id, _)| id));
        got
    };
    eventually(
        "proxies extracted after the copy",
        Duration::from_secs(60),
        || extract_into(&mut before_second.extracted),
    );
    for _ in 0..3 {
        extract_into(&mut before_second.extracted);
    }
    before_second.add_listing(&apis[0].listing());
    // Leases of the first incarnation a gateway may still route.
    for (id, owner) in &before.leased {
        before_second
            .leased
            .entry(id.clone())
            .or_insert_with(|| owner.clone());
    }

    // 4. Restored from the older copy.
    redis_down_and_up(&mut redis, |dir| {
        std::fs::remove_dir_all(dir.join("appendonlydir")).unwrap();
        copy_dir(&backup, &dir.join("appendonlydir"));
    });
    eventually(
        "the older copy is recognised",
        Duration::from_secs(30),
        || {
            let store = apis[0].store();
            store["state"] == "recovering" && store["loss"] == "rolled_back"
        },
    );
    let losses: f64 = apis
        .iter()
        .map(|a| {
            a.metric_sum(
                "proxypool_controller_store_losses_total",
                "reason=\"rolled_back\"",
            )
        })
        .sum();
    assert_eq!(losses, 1.0);
    let fresh: BTreeSet<String> = runtime
        .block_on(sim.vendor().rotate(60))
        .unwrap()
        .iter()
        .map(|p| p.addr().to_string())
        .collect();
    nothing_handed_out_again(&apis, &proxies, &origin, &before_second, &fresh);

    drop(gateways);
    drop(controllers);
}

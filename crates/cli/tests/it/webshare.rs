//! The Webshare example of `docs/vendors.md` as a new user runs it: `proxypool sim` prints
//! its Webshare-shaped list, the example's configuration (taken from the page as written,
//! only pointed at the simulated vendor) goes into a `serve` file, and everything is
//! checked over real HTTP against what the vendor served: `GET /v1/upstreams` counts the
//! entries the vendor marked `"valid": false` as `vendor_invalid` and stores none of them,
//! extraction hands out only valid proxies with their canonical `city` and `asn` labels and
//! narrows by `country` and `city`, and the gateway's `-country-`, `-city-` and `-asn-`
//! selectors leave through a proxy of that place, or through none.
//!
//! Webshare writes no protocol, so the example reads every entry as http; the simulated
//! vendor lists only its HTTP proxies there, as every Webshare proxy speaks HTTP, so every
//! valid entry becomes usable. Which of them the gateway leases (half, `extraction_share`) is
//! the ownership manager's choice, so the test reads it from `GET /v1/admin/proxies` and
//! checks each side against what it holds.

use crate::common::sim::{banner_field, start_sim};
use crate::common::{
    Proc, Scratch, api, curl, curl_or_skip, eventually, eventually_some, free_port,
    gateway_proxies, run,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const VENDORS_MD: &str = include_str!("../../../../docs/vendors.md");
/// The Webshare example's lines this test changes, as the page writes them.
const DOC_URL: &str =
    "url = \"https://proxy.webshare.io/api/v2/proxy/list/?mode=direct&page_size=100\"";
const DOC_HEALTH: &str = "url = \"https://example.com/\"";

const TOKEN: &str = "acme-api-token-0001";
const PASSWORD: &str = "acme-gateway-password";
/// The simulated fleet: 24 proxies, HTTP and SOCKS5 alternating; the Webshare list names
/// the 12 HTTP ones, every third invalid, so 8 are usable: four for the gateway and four
/// for extraction.
const PROXIES: usize = 24;

/// The TOML block of `docs/vendors.md`'s Webshare example.
fn documented_config() -> &'static str {
    proxypool_testkit::marked_toml_block(VENDORS_MD, "webshare-config:")
}

/// The documented upstream pointed at the simulated vendor: its list `url` (plain http on
/// loopback, hence the two flags) and its origin as the health target; nothing else.
fn upstream_for(url: &str, health: &str) -> String {
    let documented = documented_config();
    assert!(documented.contains(DOC_URL), "{documented}");
    assert!(documented.contains(DOC_HEALTH), "{documented}");
    documented
        .replacen(
            DOC_URL,
            &format!("url = \"{url}\"\nallow_plaintext = true\nallow_private_hosts = true"),
            1,
        )
        .replacen(DOC_HEALTH, &format!("url = \"{health}\""), 1)
}

/// One entry of the list as the vendor served it.
#[derive(Debug, Clone)]
struct Served {
    valid: bool,
    country: String,
    city: String,
    asn: u64,
}

/// Every page of the Webshare-shaped list, read as a client of the vendor reads it:
/// `host:port` -> the entry.
fn read_list(url: &str, token: &str) -> BTreeMap<String, Served> {
    let auth = format!("Authorization: Token {token}");
    let mut entries = BTreeMap::new();
    let mut next = Some(url.to_owned());
    while let Some(page) = next.take() {
        let (code, body) = curl(&["--compressed", "-H", &auth, &page]);
        assert_eq!(code, 0, "{page}: {body}");
        let page: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        for entry in page["results"].as_array().unwrap() {
            let address = format!(
                "{}:{}",
                entry["proxy_address"].as_str().unwrap(),
                entry["port"]
            );
            let served = Served {
                valid: entry["valid"].as_bool().unwrap(),
                country: entry["country_code"].as_str().unwrap().to_owned(),
                city: entry["city_name"].as_str().unwrap().to_owned(),
                asn: entry["asn_number"].as_u64().unwrap(),
            };
            entries.insert(address, served);
        }
        next = page["next"].as_str().map(str::to_owned);
    }
    entries
}

/// A city as the store keeps it: lower case, words joined by `_` (`New York` is
/// `new_york`, `São Paulo` is `são_paulo`).
fn canonical_city(city: &str) -> String {
    city.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join("_")
}

/// The pool's proxies of upstream `webshare` as `GET /v1/admin/proxies` lists them.
fn listed(api_port: u16) -> Vec<Value> {
    let answer = api::call(
        "GET",
        &format!("http://127.0.0.1:{api_port}/v1/admin/proxies?upstream=webshare&limit=1000"),
        Some(TOKEN),
        None,
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()["proxies"].as_array().unwrap().clone()
}

fn address(proxy: &Value) -> String {
    format!("{}:{}", proxy["host"].as_str().unwrap(), proxy["port"])
}

/// `POST /v1/extractions` with `body`.
fn extract(api_port: u16, body: &str) -> api::Answer {
    api::call(
        "POST",
        &format!("http://127.0.0.1:{api_port}/v1/extractions"),
        Some(TOKEN),
        Some(body),
    )
}

/// One GET of `origin` through the gateway on `http` as `username`: the exit it left from,
/// or the refusal's status and `X-Proxypool-Error`.
fn through_gateway(http: u16, username: &str, origin: &str) -> Result<String, (u16, String)> {
    let proxy = format!("http://{username}:{PASSWORD}@127.0.0.1:{http}");
    let (code, out) = curl(&["-s", "-i", "-x", &proxy, origin]);
    assert_eq!(code, 0, "curl through the gateway as {username}: {out}");
    let answer = api::Answer::parse(&out);
    if answer.status == 200 {
        Ok(crate::common::exit_of(&answer.body))
    } else {
        let error = answer.header("x-proxypool-error").unwrap_or("").to_owned();
        Err((answer.status, error))
    }
}

#[test]
fn the_documented_webshare_example_serves_only_valid_proxies_by_place() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("webshare");
    let mut sim = start_sim(&scratch, PROXIES);
    let lines = sim.stdout.clone();
    let webshare_url = banner_field(&lines, "webshare list").to_owned();
    let vendor_token = lines
        .iter()
        .find(|line| line.trim_start().starts_with("webshare list"))
        .and_then(|line| line.split("Authorization: Token ").nth(1))
        .and_then(|rest| rest.split([';', ')']).next())
        .expect("the banner names the Webshare list's token")
        .to_owned();
    let origin = banner_field(&lines, "origin").to_owned();
    let origin_port = origin
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    // The printed proxies: "kind addr  exit ip  user:pass".
    let printed: BTreeMap<String, (String, String)> = lines
        .iter()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|words| words.len() == 5 && (words[0] == "http" || words[0] == "socks5"))
        .map(|words| {
            (
                words[1].to_owned(),
                (words[0].to_owned(), words[3].to_owned()),
            )
        })
        .collect();
    assert_eq!(printed.len(), PROXIES, "{lines:#?}");

    // What the vendor serves, over the pages a client walks.
    let served = read_list(&format!("{webshare_url}&page_size=10"), &vendor_token);
    // Only the fleet's HTTP proxies are on the list.
    let http_proxies = printed.values().filter(|(kind, _)| kind == "http").count();
    assert_eq!(served.len(), http_proxies, "{served:?}");
    assert!(served.keys().all(|a| printed[a].0 == "http"), "{served:?}");
    let invalid = served.values().filter(|s| !s.valid).count();
    assert!(invalid > 0, "{served:?}");
    // Usable: every valid entry.
    let usable: BTreeSet<&String> = served
        .iter()
        .filter(|(address, s)| s.valid && printed[*address].0 == "http")
        .map(|(address, _)| address)
        .collect();
    let leased_target = usable.len() - usable.len().div_ceil(2);
    assert!(leased_target > 0, "{usable:?}");

    let (api_port, http, admin) = (free_port(), free_port(), free_port());
    let upstream = upstream_for(
        &format!("{webshare_url}&page_size=10"),
        &format!("{}/health", origin.trim_end_matches('/')),
    );
    let config = scratch.write(
        "proxypool.toml",
        &format!(
            r#"
[listen]
control = "127.0.0.1:0"
api = "127.0.0.1:{api_port}"

[ownership]
interval = "200ms"

[checker]
interval = "200ms"

{upstream}

[[clients]]
id = "acme"
project = "acme"
api_token = {{ env = "ACME_TOKEN" }}
gateway_password = {{ env = "ACME_PASSWORD" }}
admin = true

[gateway]
[gateway.listeners]
http = "127.0.0.1:{http}"
admin = "127.0.0.1:{admin}"
[gateway.destinations]
allow_cidrs = ["127.0.0.1/32"]
ports = [{origin_port}]
"#
        ),
    );
    let env = [
        ("ACME_TOKEN", TOKEN),
        ("ACME_PASSWORD", PASSWORD),
        ("WEBSHARE_API_TOKEN", vendor_token.as_str()),
    ];
    let path = config.to_str().unwrap();
    let (code, stdout, stderr) = run(&["check-config", path], &env);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let mut serve = Proc::start("serve", &["serve", "--config", path], &env, &scratch.path);

    // The list is checked and the gateway holds its half.
    let gateway_admin = format!("127.0.0.1:{admin}");
    eventually(
        "the gateway leases its half of the usable proxies",
        Duration::from_secs(60),
        || gateway_proxies(&gateway_admin) >= leased_target as u64,
    );
    let pool = eventually_some(
        "every stored proxy is checked",
        Duration::from_secs(30),
        || {
            let pool = listed(api_port);
            let settled = pool
                .iter()
                .all(|p| !matches!(p["status"].as_str(), Some("FETCHED" | "CHECKING")));
            settled.then_some(pool)
        },
    );

    // 1. The upstream's status counts what the vendor served and what it marked invalid.
    let answer = api::call(
        "GET",
        &format!("http://127.0.0.1:{api_port}/v1/upstreams"),
        Some(TOKEN),
        None,
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let upstreams = answer.json();
    let status = upstreams["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["id"] == "webshare")
        .unwrap_or_else(|| panic!("{upstreams}"))
        .clone();
    assert_eq!(status["health"], "ok", "{status}");
    assert_eq!(status["last_error"], Value::Null, "{status}");
    assert_eq!(status["last_fetched"], served.len(), "{status}");
    assert_eq!(
        status["last_dropped"],
        serde_json::json!({ "vendor_invalid": invalid }),
        "{status}"
    );
    assert_eq!(status["last_ignored"], serde_json::json!({}), "{status}");
    assert_eq!(status["last_refused"], 0, "{status}");
    // Stored and usable: exactly the valid entries.
    let stored: BTreeSet<String> = pool.iter().map(address).collect();
    let valid: BTreeSet<String> = served
        .iter()
        .filter(|(_, s)| s.valid)
        .map(|(a, _)| a.clone())
        .collect();
    assert_eq!(stored, valid, "{pool:#?}");
    let available: BTreeSet<String> = pool
        .iter()
        .filter(|p| p["status"] == "AVAILABLE")
        .map(address)
        .collect();
    assert_eq!(
        available,
        usable.iter().map(|a| (*a).clone()).collect(),
        "{pool:#?}"
    );
    for proxy in &pool {
        let entry = &served[&address(proxy)];
        assert_eq!(
            proxy["region"].as_str(),
            Some(entry.country.to_lowercase().as_str()),
            "{proxy}"
        );
    }
    let held: BTreeSet<String> = pool
        .iter()
        .filter(|p| p["status"] == "AVAILABLE" && !p["owner"].is_null())
        .map(address)
        .collect();
    let unowned: BTreeSet<String> = available.difference(&held).cloned().collect();
    assert_eq!(held.len(), leased_target, "{pool:#?}");

    // 3. The gateway: a place's selector leaves through a proxy of that place it holds,
    // and a place it holds none of is refused, never served from elsewhere.
    let places: BTreeSet<(String, String, u64)> = served
        .values()
        .map(|s| (s.country.clone(), s.city.clone(), s.asn))
        .collect();
    let exits_where = |matches: &dyn Fn(&Served) -> bool| -> BTreeSet<String> {
        held.iter()
            .filter(|address| matches(&served[*address]))
            .map(|address| printed[address].1.clone())
            .collect()
    };
    let mut served_through_gateway = 0;
    for (country, city, asn) in &places {
        let selectors = [
            (
                format!("acme-country-{}", country.to_lowercase()),
                exits_where(&|s: &Served| &s.country == country),
            ),
            (
                format!("acme-country-{country}-city-{}", canonical_city(city)),
                exits_where(&|s: &Served| &s.country == country && &s.city == city),
            ),
            (
                format!("acme-asn-AS{asn}"),
                exits_where(&|s: &Served| s.asn == *asn),
            ),
        ];
        for (username, exits) in selectors {
            for _ in 0..3 {
                match through_gateway(http, &username, &origin) {
                    Ok(exit) => {
                        assert!(
                            exits.contains(&exit),
                            "{username} left from {exit}: {exits:?}"
                        );
                        served_through_gateway += 1;
                    }
                    Err(refusal) => {
                        assert!(
                            exits.is_empty(),
                            "{username}: {refusal:?}, holding {exits:?}"
                        );
                        assert_eq!(refusal, (503, "no_eligible_proxy".to_owned()), "{username}");
                    }
                }
            }
        }
    }
    assert!(served_through_gateway > 0);
    // A country with another country's city matches nothing, though the gateway holds
    // proxies of that city or of that country (it holds some of each valid place).
    let mismatched: Vec<(&String, &String)> = places
        .iter()
        .flat_map(|(country, _, _)| {
            places
                .iter()
                .filter(move |(other, _, _)| other != country)
                .map(move |(_, city, _)| (country, city))
        })
        .collect();
    assert!(!mismatched.is_empty(), "{places:?}");
    for (country, city) in &mismatched {
        let username = format!("acme-country-{country}-city-{}", canonical_city(city));
        let answer = through_gateway(http, &username, &origin);
        assert_eq!(
            answer,
            Err((503, "no_eligible_proxy".to_owned())),
            "{username}"
        );
    }

    // 2. Extraction: a bad city is refused and changes nothing.
    let bad = extract(api_port, r#"{"count":1,"filters":{"city":"New/York"}}"#);
    assert_eq!(bad.status, 400, "{bad:?}");
    assert!(bad.body.contains("city"), "{bad:?}");
    // Filters as the vendor writes the place (`US`, `New York`), matched canonically. A
    // country with another country's city matches nothing (asked before anything is
    // extracted, so the unowned proxies of either are there to be wrongly matched).
    for (country, city) in &mismatched {
        let body = serde_json::json!({
            "count": 100,
            "filters": { "country": country, "city": city },
        });
        let answer = extract(api_port, &body.to_string());
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.json()["returned"], 0, "{body}: {answer:?}");
    }
    let mut extracted = BTreeSet::new();
    let countries: BTreeSet<&String> = places.iter().map(|(country, _, _)| country).collect();
    for country in countries {
        let cities: BTreeSet<&String> = places
            .iter()
            .filter(|(c, _, _)| c == country)
            .map(|(_, city, _)| city)
            .collect();
        for city in cities {
            let expected: BTreeSet<String> = unowned
                .iter()
                .filter(|a| &served[*a].country == country && &served[*a].city == city)
                .cloned()
                .collect();
            let body = serde_json::json!({
                "count": 100,
                "filters": { "country": country, "city": city },
            });
            let answer = extract(api_port, &body.to_string());
            assert_eq!(answer.status, 200, "{answer:?}");
            let got = answer.json()["proxies"].as_array().unwrap().clone();
            let addresses: BTreeSet<String> = got.iter().map(address).collect();
            assert_eq!(addresses, expected, "{body}: {got:#?}");
            for proxy in &got {
                let entry = &served[&address(proxy)];
                assert!(entry.valid, "{proxy}");
                assert_eq!(
                    proxy["region"].as_str(),
                    Some(country.to_lowercase().as_str())
                );
                assert_eq!(proxy["city"].as_str(), Some(canonical_city(city).as_str()));
                assert_eq!(proxy["asn"].as_str(), Some(entry.asn.to_string().as_str()));
            }
            extracted.extend(addresses);
        }
    }
    // Every proxy extraction could have (the refused request took none), and nothing the
    // gateway holds.
    assert_eq!(extracted, unowned, "{pool:#?}");

    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(30)).code(), Some(0));
    sim.signal("TERM");
    assert_eq!(sim.wait(Duration::from_secs(10)).code(), Some(0));
}

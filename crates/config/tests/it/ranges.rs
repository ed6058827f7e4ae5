//! Values out of their range are refused with the range in words ("must be between 1 and
//! 1000"), never in Rust's range syntax, for every key that has a range.

use proxypool_config::{Config, ConfigError, Env, Role};

/// A file with one value out of range per key that has a range, all refused at once.
const OUT_OF_RANGE: &str = r#"
[quota]
url = "sqlite://quota.sqlite3"
max_connections = 0

[snapshot]
max_proxies = 0

[ownership]
expire_batch = 0

[checker]
concurrency = 0
write_batch = 0

[cooldowns]
feedback_per_minute = 0

[api.extraction]
max_count = 0

[api.limits]
ipv6_prefix = 16

[gateway.access_log]
refusals_per_second = 2000000

[[upstreams]]
id = "listed"
ttl = "10m"
max_size = 10
[upstreams.provider]
kind = "http"
url = "https://vendor.example/list"
format = "json"
max_bytes = 0
redirect_hosts = ["cdn.vendor.example:0"]
[upstreams.provider.pagination]
style = "next_url"
next = "/next"
max_pages = 0
[[upstreams.health.targets]]
url = "https://example.com/"
expect_status = 42

[[upstreams]]
id = "bc"
ttl = "10m"
max_size = 10
[upstreams.credentials]
username = "acct"
password = { env = "BC_PASSWORD" }
[upstreams.provider]
kind = "backconnect"
[upstreams.provider.backconnect]
host = "gate.vendor.example"
port = 0
username = "{account}-sessid-{session}"
session_id_length = 5
[[upstreams.provider.backconnect.sessions]]
count = 0
[[upstreams.health.targets]]
url = "https://example.com/"

[[clients]]
id = "scraper"
project = "p"
api_token = { env = "TOKEN" }
rotation = { every_requests = 0 }
[clients.quota.extract]
limit = 0
window = "60s"
"#;

#[test]
fn every_range_is_said_in_words() {
    let dir = std::env::temp_dir();
    let env = Env::from_pairs([
        ("BC_PASSWORD", "bc-password"),
        ("TOKEN", "a-token-of-sixteen-chars"),
    ]);
    let result = Config::from_toml_str(OUT_OF_RANGE, "ranges.toml", &dir, Role::Serve, &env);
    let Err(ConfigError::Invalid { problems, .. }) = result else {
        panic!("expected an invalid configuration, got {result:?}");
    };
    let said: Vec<(String, String)> = problems.into_iter().map(|p| (p.path, p.message)).collect();
    for (key, words) in [
        ("quota.max_connections", "must be between 1 and 256"),
        ("snapshot.max_proxies", "must be between 1 and 100000"),
        ("ownership.expire_batch", "must be between 1 and 10000"),
        ("checker.concurrency", "must be between 1 and 10000"),
        ("checker.write_batch", "must be between 1 and 10000"),
        (
            "cooldowns.feedback_per_minute",
            "must be between 1 and 60000",
        ),
        ("api.extraction.max_count", "must be between 1 and 1000"),
        ("api.limits.ipv6_prefix", "must be between 32 and 128"),
        (
            "gateway.access_log.refusals_per_second",
            "must be between 0 and 1000000",
        ),
        (
            "upstreams[0].provider.max_bytes",
            "must be between 1 and 67108864",
        ),
        (
            "upstreams[0].provider.redirect_hosts[0]",
            "a number between 1 and 65535",
        ),
        (
            "upstreams[0].provider.pagination.max_pages",
            "must be between 1 and 1000",
        ),
        (
            "upstreams[0].health.targets[0].expect_status",
            "between 100 and 599",
        ),
        (
            "upstreams[1].provider.backconnect.port",
            "must be between 1 and 65535",
        ),
        (
            "upstreams[1].provider.backconnect.session_id_length",
            "must be between 12 and 32 hex digits",
        ),
        (
            "upstreams[1].provider.backconnect.sessions[0].count",
            "must be between 1 and 1000",
        ),
        (
            "clients[0].rotation.every_requests",
            "must be between 1 and 1000000",
        ),
        (
            "clients[0].quota.extract.limit",
            "must be between 1 and 1000",
        ),
    ] {
        let found = said
            .iter()
            .find(|(path, _)| path == key)
            .unwrap_or_else(|| panic!("no problem at {key} in {said:#?}"));
        assert!(found.1.contains(words), "{key}: {:?}", found.1);
    }
    for (path, message) in &said {
        assert!(!message.contains("..="), "{path}: {message}");
    }
}

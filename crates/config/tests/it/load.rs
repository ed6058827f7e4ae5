//! Configuration loading: the shipped examples, unknown keys, overrides, secret references
//! and errors that say where (file, line, key).

use proxypool_config::gateway::AccessLogFormat;
use proxypool_config::{Config, ConfigError, Env, ProviderKind, QuotaKind, Role, StoreKind};
use proxypool_core::PortSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

const EXAMPLE: &str = include_str!("../../../../examples/proxypool.toml");
const GATEWAY_EXAMPLE: &str = include_str!("../../../../examples/gateway.toml");

fn example() -> String {
    EXAMPLE.to_owned()
}

fn secret_dir() -> PathBuf {
    // One directory per call: tests run in parallel and must not see a half-written file.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("proxypool-config-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(dir.join("secrets")).unwrap();
    std::fs::write(dir.join("secrets/dc-password"), "dc-secret-pw\n").unwrap();
    dir
}

fn example_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("PROXYPOOL_WORKER_TOKEN", "worker-token-value"),
        ("ACME_PROXY_PASSWORD", "acme-secret-pw"),
        ("SCRAPER_API_TOKEN", "scraper-api-token"),
        ("SCRAPER_GATEWAY_PASSWORD", "scraper-gateway-password"),
    ]
}

fn load(text: &str, env: Vec<(&str, &str)>, dir: &Path) -> Result<Config, ConfigError> {
    Config::from_toml_str(
        text,
        "proxypool.toml",
        dir,
        Role::Serve,
        &Env::from_pairs(env),
    )
}

#[test]
fn the_shipped_example_loads_and_resolves_its_references() {
    let dir = secret_dir();
    let config = load(&example(), example_env(), &dir).unwrap();
    assert_eq!(config.store.kind, StoreKind::Memory);
    assert_eq!(
        config.quota.kind,
        QuotaKind::Sqlite {
            path: dir.join("data/quota.sqlite3")
        }
    );
    assert_eq!(config.upstreams.len(), 2);
    let acme = &config.upstreams[0];
    assert_eq!(
        acme.credentials
            .as_ref()
            .unwrap()
            .password
            .plain()
            .unwrap()
            .expose(),
        "acme-secret-pw"
    );
    let dc = &config.upstreams[1];
    assert_eq!(dc.provider.kind, ProviderKind::Static);
    // The trailing newline of the file is not part of the secret.
    assert_eq!(
        dc.credentials
            .as_ref()
            .unwrap()
            .password
            .plain()
            .unwrap()
            .expose(),
        "dc-secret-pw"
    );
    assert!(
        config.worker_tokens[0]
            .token
            .verifier()
            .unwrap()
            .verify("worker-token-value")
    );
    assert!(
        config.clients[0]
            .api_token_hash()
            .unwrap()
            .verify("scraper-api-token")
    );
    assert!(
        config.clients[0]
            .gateway_password_hash()
            .unwrap()
            .verify("scraper-gateway-password")
    );

    let printed = format!("{config:?}");
    for secret in [
        "acme-secret-pw",
        "dc-secret-pw",
        "worker-token-value",
        "scraper-api-token",
        "scraper-gateway-password",
    ] {
        assert!(
            !printed.contains(secret),
            "{secret} leaked into Debug output"
        );
    }
}

#[test]
fn hashes_of_referenced_secrets_are_the_same_on_every_load() {
    let dir = secret_dir();
    let a = load(&example(), example_env(), &dir).unwrap();
    let b = load(&example(), example_env(), &dir).unwrap();
    assert_eq!(a.clients[0].gateway_password, b.clients[0].gateway_password);
}

#[test]
fn unknown_keys_are_errors_that_name_the_key_path() {
    let dir = secret_dir();
    let text = example().replace("jitter = \"5s\"", "jitter = \"5s\"\nretries = 3");
    let err = load(&text, example_env(), &dir).unwrap_err();
    let message = err.to_string();
    assert!(message.starts_with("proxypool.toml: "), "{message}");
    assert!(message.contains("upstreams[0].provider"), "{message}");
    assert!(message.contains("retries"), "{message}");
}

#[test]
fn bad_values_name_the_file_the_key_and_the_reason() {
    let dir = secret_dir();
    let text = example().replace(
        "timeout = \"10s\"            # each page's fetch (connect, redirects, body)",
        "timeout = 10",
    );
    let message = load(&text, example_env(), &dir).unwrap_err().to_string();
    assert!(
        message.contains("upstreams[0].provider.timeout"),
        "{message}"
    );
    assert!(message.contains("unit"), "{message}");

    let text = example().replace("renew_before = \"20s\"", "renew_before = \"40s\"");
    let err = load(&text, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems()[0].path, "ownership.renew_before");

    let text = example().replace("rate_limit = \"standard\"", "rate_limit = \"premium\"");
    let err = load(&text, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems()[0].path, "clients[0].rate_limit");

    // Listener limits: a zero cap or a head cap under hyper's smallest buffer is refused.
    for (from, to, path) in [
        (
            "max_connections_per_ip = 128",
            "max_connections_per_ip = 0",
            "api.limits.max_connections_per_ip",
        ),
        (
            "max_header_bytes = 16384           # larger request heads get 431 in",
            "max_header_bytes = 4096 # larger request heads get 431 in",
            "api.limits.max_header_bytes",
        ),
        (
            "max_connections_per_ip = 64",
            "max_connections_per_ip = 0",
            "control.limits.max_connections_per_ip",
        ),
        (
            "max_body_bytes = 65536             # largest registration",
            "max_body_bytes = 0 # largest registration",
            "control.limits.max_body_bytes",
        ),
        // A per-address cap not well below the global one, an IPv6 grouping that lumps
        // whole providers together, a first-byte deadline past the head's.
        (
            "max_connections_per_ip = 128",
            "max_connections_per_ip = 257",
            "api.limits.max_connections_per_ip",
        ),
        (
            "max_connections_per_ip = 64",
            "max_connections_per_ip = 300",
            "control.limits.max_connections_per_ip",
        ),
        (
            "ipv6_prefix = 64                   # IPv6 peers are counted per network of this prefix (32..=128)\n# first_byte_timeout = \"3s\"        # a new connection that sends nothing for this long is closed (default: 3s or header_read_timeout)\nheader_read_timeout = \"10s\"        # time to send a request head (and to start the next one on",
            "ipv6_prefix = 16\nheader_read_timeout = \"10s\" # (and to start the next one on",
            "api.limits.ipv6_prefix",
        ),
        (
            "# first_byte_timeout = \"3s\"        # a new connection that sends nothing for this long is closed (default: 3s or header_read_timeout)\nheader_read_timeout = \"10s\"        # time to send a request head (and to start the next one)",
            "first_byte_timeout = \"11s\"\nheader_read_timeout = \"10s\" # (and to start the next one)",
            "control.limits.first_byte_timeout",
        ),
        (
            "max_requests_in_flight_per_ip = 32",
            "max_requests_in_flight_per_ip = 257",
            "api.limits.max_requests_in_flight_per_ip",
        ),
        (
            "feedback_per_minute = 60",
            "feedback_per_minute = 0",
            "cooldowns.feedback_per_minute",
        ),
        (
            "feedback_burst = 20",
            "feedback_burst = 60001",
            "cooldowns.feedback_burst",
        ),
        (
            "[log]\nformat = \"text\"",
            "[log]\nformat = \"xml\"",
            "log.format",
        ),
    ] {
        assert!(example().contains(from), "{from}");
        let err = load(&example().replace(from, to), example_env(), &dir).unwrap_err();
        assert_eq!(err.problems()[0].path, path, "{err}");
    }
}

#[test]
fn environment_overrides_apply_and_are_named_in_errors() {
    let dir = secret_dir();
    let mut env = example_env();
    env.push(("PROXYPOOL__UPSTREAMS__ACME_RESI__MAX_SIZE", "500"));
    env.push(("PROXYPOOL__CHECKER__TIMEOUT", "4s"));
    let config = load(&example(), env, &dir).unwrap();
    assert_eq!(config.upstreams[0].max_size, 500);
    assert_eq!(config.checker.timeout.as_ms(), 4_000);

    let mut env = example_env();
    env.push(("PROXYPOOL__SNAPSHOT__SESSION_TTL", "soon"));
    let err = load(&example(), env, &dir).unwrap_err();
    let problem = &err.problems()[0];
    assert_eq!(problem.path, "snapshot.session_ttl");
    assert_eq!(
        problem.env_var.as_deref(),
        Some("PROXYPOOL__SNAPSHOT__SESSION_TTL")
    );
    assert!(err.to_string().contains("PROXYPOOL__SNAPSHOT__SESSION_TTL"));
}

#[test]
fn missing_secret_references_name_the_variable_never_a_value() {
    let dir = secret_dir();
    let env: Vec<_> = example_env()
        .into_iter()
        .filter(|(k, _)| *k != "ACME_PROXY_PASSWORD")
        .collect();
    let err = load(&example(), env, &dir).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("upstreams[0].credentials.password"),
        "{message}"
    );
    assert!(
        message.contains("ACME_PROXY_PASSWORD is not set"),
        "{message}"
    );
    assert!(!message.contains("worker-token-value"));
}

#[test]
fn urls_with_inline_passwords_are_refused() {
    let dir = secret_dir();
    let text = example().replace(
        "url = \"memory\"",
        "url = \"redis://:hunter2@127.0.0.1:6379/0\"",
    );
    let message = load(&text, example_env(), &dir).unwrap_err().to_string();
    assert!(message.contains("store.url"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");

    let text = example().replace(
        "url = \"sqlite://data/quota.sqlite3\"",
        "url = \"postgres://pp:hunter2@db:5432/pp\"",
    );
    let message = load(&text, example_env(), &dir).unwrap_err().to_string();
    assert!(
        message.contains("quota.url") && !message.contains("hunter2"),
        "{message}"
    );

    let text = example().replace(
        "\"socks5://192.0.2.10:1080\"",
        "\"socks5://u:hunter2@192.0.2.10:1080\"",
    );
    let message = load(&text, example_env(), &dir).unwrap_err().to_string();
    assert!(
        message.contains("upstreams[1].provider.proxies[0]"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
}

#[test]
fn syntax_errors_give_a_position_without_echoing_the_line() {
    let dir = secret_dir();
    let text = "[store]\nurl = \"memory\"\npassword = hunter2 oops\n";
    let err = load(text, vec![], &dir).unwrap_err();
    let message = err.to_string();
    assert!(message.starts_with("proxypool.toml:3:"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
}

#[test]
fn redis_stores_parse_their_url_and_tuning_and_open_without_connecting() {
    let dir = secret_dir();
    let text = example().replace(
        "url = \"memory\"",
        "url = \"redis+sentinel://10.0.0.1:26379,10.0.0.2/mymaster/2\"",
    );
    let text = text.replace("key_prefix = \"pp\"", "key_prefix = \"pp-staging\"");
    let config = load(&text, example_env(), &dir).unwrap();
    assert_eq!(
        config.store.kind,
        StoreKind::Sentinel {
            sentinels: vec!["10.0.0.1:26379".into(), "10.0.0.2:26379".into()],
            master: "mymaster".into(),
            db: 2
        }
    );
    assert_eq!(config.store.key_prefix, "pp-staging");
    assert_eq!(config.store.call_timeout.as_ms(), 500);
    assert_eq!(config.store.leader_lease.as_ms(), 10_000);
}

#[test]
fn redis_cluster_urls_give_seed_nodes_and_bad_forms_name_the_line() {
    let dir = secret_dir();
    let with_url = |url: &str| example().replace("url = \"memory\"", &format!("url = \"{url}\""));
    let config = load(
        &with_url("redis+cluster://10.0.0.1:7000,Redis-B,[fd00::1]:7002"),
        example_env(),
        &dir,
    )
    .unwrap();
    assert_eq!(
        config.store.kind,
        StoreKind::Cluster {
            nodes: vec![
                "10.0.0.1:7000".into(),
                "redis-b:6379".into(),
                "fd00::1:7002".into()
            ],
            tls: false
        }
    );
    // The cluster's TLS takes [store.tls] as rediss:// does.
    std::fs::write(
        dir.join("redis-ca.pem"),
        "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let tls = with_url("rediss+cluster://h1:6380/").replace(
        "# [store.tls]              # optional",
        "[store.tls]\nca = \"redis-ca.pem\"\n# optional",
    );
    let config = load(&tls, example_env(), &dir).unwrap();
    assert_eq!(
        config.store.kind,
        StoreKind::Cluster {
            nodes: vec!["h1:6380".into()],
            tls: true
        }
    );
    assert!(config.store.tls.is_some());
    let plain_tls = tls.replace("rediss+cluster://", "redis+cluster://");
    let err = load(&plain_tls, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems()[0].path, "store.tls", "{err}");

    let url_line = example()
        .lines()
        .position(|l| l.starts_with("url = \"memory\""))
        .unwrap()
        + 1;
    for (url, says) in [
        ("redis+cluster://:hunter2@h1:7000", "credentials"),
        ("redis+cluster://h1:7000/2", "only database 0"),
        ("redis+cluster://h1:7000,", "empty seed node"),
        ("redis+cluster://", "empty seed node"),
        ("redis+cluster://h1:0", "invalid port"),
        ("redis+cluster://h1:7000?timeout=1", "no query"),
        ("redis+clusters://h1:7000", "redis+cluster://HOST:PORT"),
    ] {
        let err = load(&with_url(url), example_env(), &dir).unwrap_err();
        let problem = &err.problems()[0];
        assert_eq!(problem.path, "store.url", "{url}: {err}");
        assert_eq!(problem.line, Some(url_line), "{url}: {err}");
        assert!(problem.message.contains(says), "{url}: {err}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
    // Sentinel-only settings stay Sentinel-only.
    let text =
        with_url("redis+cluster://h1").replace("# sentinel_tls = false", "sentinel_tls = true");
    let err = load(&text, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems()[0].path, "store.sentinel_tls", "{err}");
}

#[test]
fn with_a_shared_store_renew_before_must_cover_a_leader_failover() {
    let dir = secret_dir();
    let short = example().replace("renew_before = \"20s\"", "renew_before = \"12s\"");
    // One embedded controller: nothing to fail over to, so 12 s is fine.
    load(&short, example_env(), &dir).unwrap();

    let redis = short.replace("url = \"memory\"", "url = \"redis://127.0.0.1:6379/0\"");
    let err = load(&redis, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems().len(), 1, "{err}");
    let problem = &err.problems()[0];
    assert_eq!(problem.path, "ownership.renew_before");
    assert!(problem.message.contains("at least 15s"), "{err}");
    assert!(problem.message.contains("store.leader_lease"), "{err}");

    // Shortening the leader lease is the other way to satisfy it.
    let faster = redis.replace("leader_lease = \"10s\"", "leader_lease = \"5s\"");
    load(&faster, example_env(), &dir).unwrap();
    // And the shipped defaults pass with Redis.
    let defaults = example().replace("url = \"memory\"", "url = \"redis://127.0.0.1:6379/0\"");
    load(&defaults, example_env(), &dir).unwrap();
}

#[test]
fn store_tuning_is_checked_and_named() {
    let dir = secret_dir();
    let text = example().replace("key_prefix = \"pp\"", "key_prefix = \"a{b}\"");
    let err = load(&text, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems()[0].path, "store.key_prefix");

    // Shard groups: 1-64, read as given.
    for bad in ["0", "65"] {
        let text = example().replace("groups = 1 ", &format!("groups = {bad} "));
        let err = load(&text, example_env(), &dir).unwrap_err();
        assert_eq!(err.problems()[0].path, "store.groups", "{bad}");
    }
    let text = example().replace("groups = 1 ", "groups = 3 ");
    assert_eq!(load(&text, example_env(), &dir).unwrap().store.groups, 3);

    // The leader must be able to retry a slow renewal before its lease ends.
    let text = example().replace("leader_lease = \"10s\"", "leader_lease = \"1s\"");
    let mut env = example_env();
    env.push(("PROXYPOOL__STORE__CALL_TIMEOUT", "500ms"));
    let err = load(&text, env, &dir).unwrap_err();
    assert_eq!(err.problems()[0].path, "store.leader_lease");
    assert!(err.to_string().contains("4 times"), "{err}");

    let mut env = example_env();
    env.push(("PROXYPOOL__STORE__LEADER_LEASE", "1s"));
    env.push(("PROXYPOOL__STORE__CALL_TIMEOUT", "200ms"));
    let config = load(&example(), env, &dir).unwrap();
    assert_eq!(config.store.leader_lease.as_ms(), 1_000);

    let text = example().replace(
        "leader_lease = \"10s\"",
        "leader_lease = \"10s\"\nlease = \"5s\"",
    );
    let message = load(&text, example_env(), &dir).unwrap_err().to_string();
    assert!(
        message.contains("store") && message.contains("lease"),
        "{message}"
    );
}

#[test]
fn quota_timeouts_and_limits_of_every_operation_are_configuration() {
    let dir = secret_dir();
    let config = load(&example(), example_env(), &dir).unwrap();
    assert_eq!(config.quota.decision_timeout.as_ms(), 3_000);
    let scraper = &config.clients[0];
    for operation in ["extract", "inspect", "admin"] {
        assert!(scraper.quota.contains_key(operation), "{operation}");
    }

    let mut env = example_env();
    env.push(("PROXYPOOL__QUOTA__ACQUIRE_TIMEOUT", "250ms"));
    env.push(("PROXYPOOL__QUOTA__DECISION_TIMEOUT", "1s"));
    env.push(("PROXYPOOL__QUOTA__STATEMENT_TIMEOUT", "500ms"));
    env.push(("PROXYPOOL__QUOTA__MAX_CONNECTIONS", "8"));
    let config = load(&example(), env, &dir).unwrap();
    assert_eq!(
        (
            config.quota.acquire_timeout.as_ms(),
            config.quota.statement_timeout.as_ms(),
            config.quota.decision_timeout.as_ms(),
            config.quota.max_connections
        ),
        (250, 500, 1_000, Some(8))
    );

    // The decision bound must cover its parts; the error explains the rule.
    let text = example().replace("decision_timeout = \"3s\"", "decision_timeout = \"2s\"");
    let err = load(&text, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems()[0].path, "quota.decision_timeout");
    assert!(
        err.to_string().contains("bounds the whole decision"),
        "{err}"
    );
    let text = example().replace("acquire_timeout = \"2s\"", "acquire_timeout = \"0s\"");
    let err = load(&text, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems()[0].path, "quota.acquire_timeout");
    let text = example().replace(
        "[clients.quota.inspect]\nlimit = 1000",
        "[clients.quota.inspect]\nlimit = 1001",
    );
    let err = load(&text, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems()[0].path, "clients[0].quota.inspect.limit");
}

#[test]
fn problems_name_the_line_of_the_key() {
    let dir = secret_dir();
    let text = example().replace("renew_before = \"20s\"", "renew_before = \"40s\"");
    let line = text
        .lines()
        .position(|l| l.starts_with("renew_before"))
        .unwrap()
        + 1;
    let err = load(&text, example_env(), &dir).unwrap_err();
    assert_eq!(err.problems()[0].line, Some(line));
    assert!(
        err.to_string()
            .contains(&format!("line {line}: ownership.renew_before")),
        "{err}"
    );
}

#[test]
fn every_duration_is_written_with_a_unit_and_the_old_ms_keys_are_gone() {
    let dir = secret_dir();
    for (new, old, key) in [
        (
            "request_timeout = \"10s\"",
            "request_timeout_ms = 10000",
            "api.limits",
        ),
        (
            "shutdown_grace = \"10s\"",
            "shutdown_grace_ms = 10000",
            "gateway",
        ),
        (
            "hard_lockout = \"30s\"",
            "hard_lockout_ms = 30000",
            "policies[0]",
        ),
    ] {
        assert!(example().contains(new), "{new}");
        let text = example().replace(new, old);
        let message = load(&text, example_env(), &dir).unwrap_err().to_string();
        assert!(
            message.contains(key) && message.contains("_ms"),
            "{key}: {message}"
        );
    }
    let text = example().replace("request_timeout = \"10s\"", "request_timeout = 10000");
    let message = load(&text, example_env(), &dir).unwrap_err().to_string();
    assert!(
        message.contains("api.limits.request_timeout") && message.contains("unit"),
        "{message}"
    );
}

#[test]
fn the_gateway_example_loads_as_a_split_gateway_and_needs_its_token() {
    let dir = secret_dir();
    let env = Env::from_pairs([("PROXYPOOL_WORKER_TOKEN", "worker-token-value")]);
    let config =
        Config::from_toml_str(GATEWAY_EXAMPLE, "gateway.toml", &dir, Role::Gateway, &env).unwrap();
    let gateway = config.gateway.as_ref().unwrap();
    assert_eq!(gateway.worker_id.as_ref().unwrap().as_str(), "gw-1");
    assert_eq!(
        gateway
            .worker_token
            .as_ref()
            .unwrap()
            .plain()
            .unwrap()
            .expose(),
        "worker-token-value"
    );
    assert_eq!(gateway.shutdown_grace.as_ms(), 10_000);
    assert!(!config.has_controller());

    let err = Config::from_toml_str(
        GATEWAY_EXAMPLE,
        "gateway.toml",
        &dir,
        Role::Gateway,
        &Env::default(),
    )
    .unwrap_err();
    assert_eq!(err.problems()[0].path, "gateway.worker_token");
    let env = Env::from_pairs([("PROXYPOOL_WORKER_TOKEN", "worker-token-value")]);
    for (from, to, path) in [
        (
            "max_connections_per_ip = 1000 ",
            "max_connections_per_ip = 2501 ",
            "gateway.limits.max_connections_per_ip",
        ),
        (
            "ipv6_prefix = 64 ",
            "ipv6_prefix = 129 ",
            "gateway.limits.ipv6_prefix",
        ),
    ] {
        assert!(GATEWAY_EXAMPLE.contains(from), "{from}");
        let text = GATEWAY_EXAMPLE.replace(from, to);
        let err =
            Config::from_toml_str(&text, "gateway.toml", &dir, Role::Gateway, &env).unwrap_err();
        assert_eq!(err.problems()[0].path, path, "{err}");
    }
    // The controller's file without a [gateway] is not a gateway's file.
    let err = load(
        &example().replace("[gateway]", "[gateway_x]"),
        example_env(),
        &dir,
    )
    .unwrap_err();
    assert!(err.to_string().contains("gateway"), "{err}");
}

#[test]
fn a_gateway_lists_one_controller_or_several() {
    let dir = secret_dir();
    let env = Env::from_pairs([("PROXYPOOL_WORKER_TOKEN", "worker-token-value")]);
    let load_gateway =
        |text: &str| Config::from_toml_str(text, "gateway.toml", &dir, Role::Gateway, &env);
    let urls_of = |text: &str| {
        let config = load_gateway(text).unwrap();
        config.gateway.unwrap().controller_url.unwrap().0
    };
    let one = "controller_url = \"http://127.0.0.1:7070\"";
    assert_eq!(urls_of(GATEWAY_EXAMPLE), ["http://127.0.0.1:7070"]);

    let two = GATEWAY_EXAMPLE.replace(
        one,
        "controller_url = [\"http://127.0.0.1:7070\", \"http://127.0.0.2:7070\"]",
    );
    assert_eq!(
        urls_of(&two),
        ["http://127.0.0.1:7070", "http://127.0.0.2:7070"]
    );

    for (list, path, says) in [
        ("[]", "gateway.controller_url", "at least one"),
        (
            "[\"http://127.0.0.1:7070\", \"http://127.0.0.2\"]",
            "gateway.controller_url[1]",
            "port",
        ),
        (
            "[\"http://127.0.0.1:7070\", \"https://ctl:7070\"]",
            "gateway.controller_url",
            "mixes",
        ),
        ("7070", "gateway.controller_url", "a URL or a list of URLs"),
    ] {
        let text = GATEWAY_EXAMPLE.replace(one, &format!("controller_url = {list}"));
        let err = load_gateway(&text).unwrap_err();
        assert_eq!(err.problems()[0].path, path, "{list}: {err}");
        assert!(err.to_string().contains(says), "{list}: {err}");
    }
}

#[test]
fn the_effective_configuration_shows_references_never_secrets() {
    let dir = secret_dir();
    let mut env = example_env();
    env.push(("PROXYPOOL__CHECKER__TIMEOUT", "4s"));
    let config = load(&example(), env, &dir).unwrap();
    let text = config.effective_toml().unwrap();
    assert!(text.contains("timeout = \"4s\""), "{text}");
    assert!(text.contains("env = \"SCRAPER_API_TOKEN\""), "{text}");
    for secret in [
        "acme-secret-pw",
        "dc-secret-pw",
        "worker-token-value",
        "scraper-api-token",
        "scraper-gateway-password",
        "sha256:",
    ] {
        assert!(!text.contains(secret), "{secret} in the effective output");
    }
    // What is printed loads again to the same configuration.
    let again = load(&text, example_env(), &dir).unwrap();
    assert_eq!(again.checker.timeout.as_ms(), 4_000);
    assert_eq!(again.clients, config.clients);
}

#[test]
fn the_destination_policy_loads_with_its_defaults_and_overrides() {
    let dir = secret_dir();
    let config = load(&example(), example_env(), &dir).unwrap();
    let destinations = &config.gateway.as_ref().unwrap().destinations;
    assert!(destinations.allow_cidrs.is_empty() && destinations.deny_cidrs.is_empty());
    assert_eq!(destinations.ports, PortSet::only([80, 443, 8080, 8443]));
    assert_eq!(config.clients[0].allowed_ports, None);

    let text = example()
        .replace(
            "ports = [80, 443, 8080, 8443]      #",
            "ports = \"*\"      #",
        )
        .replace(
            "allow_cidrs = []                   #",
            "allow_cidrs = [\"10.20.0.0/16\", \"::1\"] #",
        )
        .replace("# allowed_ports = [443]  ", "allowed_ports = [443]    ");
    let config = load(&text, example_env(), &dir).unwrap();
    let destinations = &config.gateway.as_ref().unwrap().destinations;
    assert_eq!(destinations.ports, PortSet::Any);
    assert_eq!(destinations.allow_cidrs, ["10.20.0.0/16", "::1"]);
    assert_eq!(config.clients[0].allowed_ports, Some(PortSet::only([443])));
}

#[test]
fn a_bad_destination_block_or_port_list_names_the_file_the_line_and_the_key() {
    let dir = secret_dir();
    for (from, to, key) in [
        (
            "allow_cidrs = []                   #",
            "allow_cidrs = [\"10.0.0.0/8\", \"10.0.0.0/33\"] #",
            "gateway.destinations.allow_cidrs[1]",
        ),
        (
            "deny_cidrs = []                    #",
            "deny_cidrs = [\"not-an-ip\"] #",
            "gateway.destinations.deny_cidrs[0]",
        ),
        (
            "ports = [80, 443, 8080, 8443]      #",
            "ports = []      #",
            "gateway.destinations.ports",
        ),
        (
            "ports = [80, 443, 8080, 8443]      #",
            "ports = [0, 80]      #",
            "gateway.destinations.ports",
        ),
        (
            "# allowed_ports = [443]  ",
            "allowed_ports = []       ",
            "clients[0].allowed_ports",
        ),
    ] {
        assert!(example().contains(from), "{from}");
        let text = example().replace(from, to);
        let line = text.lines().position(|l| l.starts_with(to)).unwrap() + 1;
        let err = load(&text, example_env(), &dir).unwrap_err();
        let problem = &err.problems()[0];
        assert_eq!(problem.path, key, "{err}");
        assert_eq!(problem.line, Some(line), "{err}");
        let message = err.to_string();
        assert!(
            message.starts_with("proxypool.toml: ")
                && message.contains(&format!("line {line}: {key}")),
            "{message}"
        );
    }
    // A port list that is neither "*" nor a list of ports fails at parse time, by key.
    let text = example().replace(
        "ports = [80, 443, 8080, 8443]      #",
        "ports = \"any\"      #",
    );
    let message = load(&text, example_env(), &dir).unwrap_err().to_string();
    assert!(message.contains("gateway.destinations.ports"), "{message}");
}

#[test]
fn balancer_lists_are_cidrs_named_by_key() {
    let dir = secret_dir();
    for (table, key) in [
        ("[control]", "control.trusted_proxies[1]"),
        ("[api]", "api.trusted_proxies[1]"),
    ] {
        let example = example();
        let table_at = example.find(&format!("\n{table}\n")).unwrap();
        let at = table_at
            + example[table_at..]
                .find("trusted_proxies = []")
                .expect("the example lists the table's balancers");
        let text = format!(
            "{}trusted_proxies = [\"10.0.0.0/8\", \"not-a-block\"]{}",
            &example[..at],
            &example[at + "trusted_proxies = []".len()..]
        );
        let err = load(&text, example_env(), &dir).unwrap_err();
        assert!(err.problems().iter().any(|p| p.path == key), "{key}: {err}");
    }
}

/// The (key, message) of each problem of a configuration that must be invalid.
pub(crate) fn problems(result: Result<Config, ConfigError>) -> Vec<(String, String)> {
    match result {
        Err(ConfigError::Invalid { problems, .. }) => {
            problems.into_iter().map(|p| (p.path, p.message)).collect()
        }
        other => panic!("expected an invalid configuration, got {other:?}"),
    }
}

#[test]
fn tls_files_are_anchored_at_the_file_and_a_missing_one_is_named_by_key() {
    let dir = secret_dir();
    std::fs::create_dir_all(dir.join("tls")).unwrap();
    for name in ["api.pem", "api.key", "gw-ca.pem"] {
        std::fs::write(dir.join("tls").join(name), "-----BEGIN X-----\n").unwrap();
    }
    let text = example().replace(
        "\n[api.limits]\n",
        "\n[api.tls]\ncert = \"tls/api.pem\"\nkey = \"tls/api.key\"\n\n[control.tls]\ncert = \"tls/missing.pem\"\nkey = \"tls/api.key\"\nclient_ca = \"tls/gw-ca.pem\"\n\n[api.limits]\n",
    );
    let found = problems(load(&text, example_env(), &dir));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "control.tls.cert");
    assert!(found[0].1.contains("missing.pem"), "{found:?}");

    let text = text.replace("tls/missing.pem", "tls/api.pem");
    let config = load(&text, example_env(), &dir).unwrap();
    let tls = config.api.tls.unwrap();
    assert_eq!(tls.cert, dir.join("tls/api.pem"));
    assert_eq!(
        config.control.tls.unwrap().client_ca,
        Some(dir.join("tls/gw-ca.pem"))
    );
}

#[test]
fn vendor_lists_need_https_or_allow_plaintext_and_credentials_need_allowed_hosts() {
    let dir = secret_dir();
    let plaintext = example().replace(
        "url = \"https://vendor.example/",
        "url = \"http://vendor.example/",
    );
    let found = problems(load(&plaintext, example_env(), &dir));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "upstreams[0].provider.url");
    assert!(found[0].1.contains("allow_plaintext"), "{found:?}");
    let allowed = plaintext.replace("# allow_plaintext = false", "allow_plaintext = true");
    assert!(load(&allowed, example_env(), &dir).is_ok());

    let open = example().replace("allowed_hosts = [\"vendor.example\"]", "allowed_hosts = []");
    let found = problems(load(&open, example_env(), &dir));
    assert_eq!(
        found[0].0, "upstreams[0].provider.allowed_hosts",
        "{found:?}"
    );
    let bad = example().replace(
        "allowed_hosts = [\"vendor.example\"]",
        "allowed_hosts = [\"vendor.example\", \"10.0.0.0/33\", \"bad host\"]",
    );
    let found: Vec<String> = problems(load(&bad, example_env(), &dir))
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(
        found,
        [
            "upstreams[0].provider.allowed_hosts[1]",
            "upstreams[0].provider.allowed_hosts[2]"
        ]
    );
}

#[test]
fn a_client_s_rotation_loads_in_every_form_and_is_left_out_by_default() {
    use proxypool_config::{ClientRotation, Millis};
    let dir = secret_dir();
    let config = load(&example(), example_env(), &dir).unwrap();
    assert_eq!(config.clients[0].rotation, None);
    let from = "# rotation = { every_requests = 5 }    ";
    assert!(example().contains(from));
    for (value, expected) in [
        ("\"per_request\"", ClientRotation::PerRequest),
        ("\"least_used\"", ClientRotation::LeastUsed),
        ("{ every_requests = 5 }", ClientRotation::EveryRequests(5)),
        ("{ every = \"30s\" }", ClientRotation::Every(Millis(30_000))),
        ("{ every = \"2m\" }", ClientRotation::Every(Millis(120_000))),
    ] {
        let text = example().replace(from, &format!("rotation = {value}    "));
        let config = load(&text, example_env(), &dir).unwrap_or_else(|e| panic!("{value}: {e}"));
        assert_eq!(config.clients[0].rotation, Some(expected), "{value}");
        assert_eq!(
            config.clients[0].rotation.map(ClientRotation::to_snapshot),
            Some(match expected {
                ClientRotation::PerRequest => proxypool_core::control::ClientRotation::PerRequest,
                ClientRotation::LeastUsed => proxypool_core::control::ClientRotation::LeastUsed,
                ClientRotation::EveryRequests(n) => {
                    proxypool_core::control::ClientRotation::EveryRequests(n)
                }
                ClientRotation::Every(every) => {
                    proxypool_core::control::ClientRotation::EveryMs(every.as_ms())
                }
            })
        );
    }
}

#[test]
fn a_bad_client_rotation_names_the_key() {
    let dir = secret_dir();
    let from = "# rotation = { every_requests = 5 }    ";
    for (value, key, expected) in [
        (
            "{ every_requests = 0 }",
            "clients[0].rotation.every_requests",
            "must be between 1 and 1000000",
        ),
        (
            "{ every_requests = 1000001 }",
            "clients[0].rotation.every_requests",
            "must be between 1 and 1000000",
        ),
        (
            "{ every = \"500ms\" }",
            "clients[0].rotation.every",
            "must be between",
        ),
        (
            "{ every = \"25h\" }",
            "clients[0].rotation.every",
            "must be between",
        ),
    ] {
        let text = example().replace(from, &format!("rotation = {value}    "));
        let err = load(&text, example_env(), &dir).unwrap_err();
        let problem = err
            .problems()
            .iter()
            .find(|p| p.path == key)
            .unwrap_or_else(|| panic!("{value}: {err}"));
        assert!(problem.message.contains(expected), "{value}: {err}");
    }
    // Not one of the forms at all: refused at parse time, naming the key.
    for value in [
        "\"sometimes\"",
        "{ every_requests = 5, every = \"30s\" }",
        "5",
    ] {
        let text = example().replace(from, &format!("rotation = {value}    "));
        let message = load(&text, example_env(), &dir).unwrap_err().to_string();
        assert!(message.contains("rotation"), "{value}: {message}");
    }
}

#[test]
fn the_access_log_takes_its_keys_and_refuses_bad_values_by_name() {
    let dir = secret_dir();
    let base = GATEWAY_EXAMPLE.replace(
        "enabled = false                 # off by default",
        "enabled = true                  # off by default",
    );
    let gateway = |text: &str| {
        Config::from_toml_str(
            text,
            "gateway.toml",
            &dir,
            Role::Gateway,
            &Env::from_pairs(example_env()),
        )
    };
    let config = gateway(&base.replace(
        "# file = \"/var/log/proxypool/access.log\"",
        "file = \"/var/log/proxypool/access.log\"",
    ))
    .unwrap();
    let log = &config.gateway.as_ref().unwrap().access_log;
    assert!(log.enabled);
    assert_eq!(
        log.file.as_deref(),
        Some(Path::new("/var/log/proxypool/access.log"))
    );
    assert_eq!(
        log.format,
        AccessLogFormat::Json,
        "the example's, and the default"
    );
    for (written, format) in [
        ("squid", AccessLogFormat::Squid),
        ("combined", AccessLogFormat::Combined),
    ] {
        let text = base.replace("format = \"json\" ", &format!("format = \"{written}\" "));
        assert_ne!(text, base, "the example names the format");
        let config = gateway(&text).unwrap();
        assert_eq!(config.gateway.unwrap().access_log.format, format);
    }
    // A bad format is refused by name, with the values it takes, whatever else is right.
    let error = gateway(&base.replace("format = \"json\" ", "format = \"apache\" ")).unwrap_err();
    let problem = &error.problems()[0];
    assert_eq!(problem.path, "gateway.access_log.format", "{error}");
    let message = error.to_string();
    for named in ["apache", "json", "squid", "combined"] {
        assert!(message.contains(named), "{named}: {message}");
    }
    for (from, to, key) in [
        (
            "sample_one_in = 1 ",
            "sample_one_in = 0 ",
            "gateway.access_log.sample_one_in",
        ),
        ("queue = 16384", "queue = 1", "gateway.access_log.queue"),
        (
            "# file = \"/var/log/proxypool/access.log\"",
            "file = \"\"",
            "gateway.access_log.file",
        ),
    ] {
        let text = base.replace(from, to);
        assert_ne!(text, base, "{from} is in the example");
        let message = gateway(&text).unwrap_err().to_string();
        assert!(message.contains(key), "{key}: {message}");
    }
}

/// The example with its commented `[upstreams.provider.auth.*]` tables named in `auth` and
/// its `[upstreams.provider.fields]` table written out.
fn with_vendor_api(auth: &[&str]) -> String {
    let mut out = String::new();
    let mut live = false;
    for line in example().lines() {
        if let Some(table) = line.strip_prefix("# [upstreams.provider.") {
            live = auth
                .iter()
                .any(|a| table.starts_with(&format!("auth.{a}]")))
                || table.starts_with("fields]");
        } else if !line.starts_with("# ") {
            live = false;
        }
        match line.strip_prefix("# ") {
            Some(uncommented) if live => out.push_str(uncommented),
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn vendor_api_env() -> Vec<(&'static str, &'static str)> {
    let mut env = example_env();
    env.extend([
        ("ACME_API_TOKEN", "acme-api-token"),
        ("ACME_LIST_PASSWORD", "acme-list-password"),
        ("ACME_API_KEY", "acme-api-key"),
    ]);
    env
}

#[test]
fn the_example_s_vendor_api_settings_load_when_written_out() {
    use proxypool_config::{FlagValue, PageStyle, TimeUnit};
    let dir = secret_dir();
    let text = with_vendor_api(&["header", "query"]);
    let config = load(&text, vendor_api_env(), &dir).unwrap_or_else(|e| panic!("{e}"));
    let provider = &config.upstreams[0].provider;
    let pages = provider.pagination.as_ref().unwrap();
    assert_eq!(
        (pages.style, pages.next.as_deref(), pages.max_pages),
        (PageStyle::NextUrl, Some("/next"), 20)
    );
    let auth = provider.auth.as_ref().unwrap();
    let header = auth.header.as_ref().unwrap();
    assert_eq!(
        (header.name.as_str(), header.scheme.as_deref()),
        ("Authorization", Some("Token"))
    );
    assert_eq!(header.value.plain().unwrap().expose(), "acme-api-token");
    assert_eq!(
        auth.query.as_ref().unwrap().value.plain().unwrap().expose(),
        "acme-api-key"
    );
    let fields = provider.fields.as_ref().unwrap();
    assert_eq!(fields.list.as_deref(), Some("/result/items"));
    assert_eq!(fields.city.as_deref(), Some("/geo/city"));
    assert_eq!(fields.time_unit, Some(TimeUnit::Seconds));
    assert_eq!(
        (fields.state.as_deref(), fields.asn.as_deref()),
        (Some("/geo/state"), Some("/geo/asn"))
    );
    assert_eq!(fields.valid.as_deref(), Some("/status"));
    assert_eq!(
        fields.usable_values(),
        [FlagValue::Text("active".into()), FlagValue::Integer(1)]
    );
    // The secrets never reach the effective configuration.
    let shown = config.effective_toml().unwrap();
    assert!(!shown.contains("acme-api-token") && !shown.contains("acme-api-key"));
}

#[test]
fn bad_vendor_api_settings_name_the_file_the_line_and_the_key() {
    let dir = secret_dir();
    let base = with_vendor_api(&["query"]);
    let cases = [
        (
            "next = \"/next\"",
            "next = \"links/next\"",
            "upstreams[0].provider.pagination.next",
        ),
        (
            "max_pages = 20",
            "max_pages = 0",
            "upstreams[0].provider.pagination.max_pages",
        ),
        (
            "max_pages = 20",
            "max_pages = 1001",
            "upstreams[0].provider.pagination.max_pages",
        ),
        (
            "host = \"/addr\"",
            "host = \"/a~2ddr\"",
            "upstreams[0].provider.fields.host",
        ),
        (
            "list = \"/result/items\"",
            "list = \"result\"",
            "upstreams[0].provider.fields.list",
        ),
        (
            "name = \"api_key\"",
            "name = \"\"",
            "upstreams[0].provider.auth.query.name",
        ),
        (
            "format = \"json\"",
            "format = \"text\"",
            "upstreams[0].provider.pagination.style",
        ),
        (
            "valid_values = [\"active\", 1]",
            "valid_values = []",
            "upstreams[0].provider.fields.valid_values",
        ),
        (
            "valid = \"/status\"",
            "# valid = \"/status\"",
            "upstreams[0].provider.fields.valid_values",
        ),
        (
            "format = \"json\"",
            "format = \"json\"\nredirect_hosts = [\"dl.vendor.example:0\"]",
            "upstreams[0].provider.redirect_hosts[0]",
        ),
    ];
    for (from, to, key) in cases {
        assert!(base.contains(from), "{from}");
        let text = base.replacen(from, to, 1);
        let err = load(&text, vendor_api_env(), &dir).unwrap_err();
        let problem = err
            .problems()
            .iter()
            .find(|p| p.path == key)
            .unwrap_or_else(|| panic!("{to}: no problem at {key}: {err}"));
        let written = text.lines().position(|l| l.starts_with(to)).map(|i| i + 1);
        if key.ends_with(to.split(' ').next().unwrap()) {
            assert_eq!(problem.line, written, "{to}: {err}");
        }
        assert!(err.to_string().contains("proxypool.toml"), "{err}");
    }
    // Text with field pointers: the fields table is named.
    let text = base.replacen("format = \"json\"", "format = \"text\"", 1);
    let found = problems(load(&text, vendor_api_env(), &dir));
    assert!(
        found.iter().any(|p| p.0 == "upstreams[0].provider.fields"),
        "{found:?}"
    );
}

#[test]
fn basic_and_an_authorization_header_together_are_refused() {
    let dir = secret_dir();
    for (auth, shorthand) in [
        (&["basic", "header"][..], false),
        (&["basic"][..], true),
        (&["header"][..], true),
    ] {
        let mut text = with_vendor_api(auth);
        if shorthand {
            text = text.replacen(
                "# authorization = { env = \"ACME_API_AUTHORIZATION\" }",
                "authorization = { env = \"ACME_API_TOKEN\" }",
                1,
            );
        }
        let found = problems(load(&text, vendor_api_env(), &dir));
        assert_eq!(
            found.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
            ["upstreams[0].provider.auth.basic"],
            "{auth:?} {shorthand}: {found:?}"
        );
        assert!(found[0].1.contains("Authorization"), "{found:?}");
    }
    // A header of another name goes with Basic.
    let text = with_vendor_api(&["basic", "header"]).replacen(
        "\nname = \"Authorization\"",
        "\nname = \"X-Api-Key\"",
        1,
    );
    let config = load(&text, vendor_api_env(), &dir).unwrap_or_else(|e| panic!("{e}"));
    let auth = config.upstreams[0].provider.auth.clone().unwrap();
    assert!(auth.basic.is_some() && auth.header.is_some());
    // A header name that is no token.
    let text = with_vendor_api(&["header"]).replacen(
        "\nname = \"Authorization\"",
        "\nname = \"X Api Key\"",
        1,
    );
    let found = problems(load(&text, vendor_api_env(), &dir));
    assert_eq!(found[0].0, "upstreams[0].provider.auth.header.name");
}

#[test]
fn proxy_tls_and_a_health_ca_load_anchored_and_bad_ones_are_named_by_key() {
    let dir = secret_dir();
    std::fs::create_dir_all(dir.join("tls")).unwrap();
    for name in ["acme-proxy-ca.pem", "site-ca.pem"] {
        std::fs::write(dir.join("tls").join(name), "-----BEGIN X-----\n").unwrap();
    }
    let enabled = example()
        .replacen("# ca = \"tls/site-ca.pem\"", "ca = \"tls/site-ca.pem\"", 1)
        .replacen("# [upstreams.proxy_tls]", "[upstreams.proxy_tls]", 1)
        .replacen(
            "# ca = \"tls/acme-proxy-ca.pem\"",
            "ca = \"tls/acme-proxy-ca.pem\"",
            1,
        )
        .replacen(
            "# server_name = \"proxy.vendor.example\"",
            "server_name = \"proxy.vendor.example\"",
            1,
        );
    let config = load(&enabled, example_env(), &dir).unwrap();
    let upstream = &config.upstreams[0];
    let tls = upstream
        .proxy_tls
        .as_ref()
        .expect("the example's proxy_tls");
    assert_eq!(tls.ca, Some(dir.join("tls/acme-proxy-ca.pem")));
    assert_eq!(tls.server_name.as_deref(), Some("proxy.vendor.example"));
    assert_eq!(upstream.health.ca, Some(dir.join("tls/site-ca.pem")));
    assert!(config.upstreams[1].proxy_tls.is_none());

    let broken = enabled
        .replace("tls/acme-proxy-ca.pem", "tls/missing.pem")
        .replace("tls/site-ca.pem", "tls/absent.pem")
        .replace("\"proxy.vendor.example\"", "\"not a name\"");
    let found: Vec<String> = problems(load(&broken, example_env(), &dir))
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(
        found,
        [
            "upstreams[0].health.ca",
            "upstreams[0].proxy_tls.ca",
            "upstreams[0].proxy_tls.server_name",
        ]
    );
}

#[test]
fn https_check_targets_load_and_other_schemes_are_refused() {
    let dir = secret_dir();
    let https = example().replacen(
        "url = \"http://example.com/\"",
        "url = \"https://example.com/health\"",
        1,
    );
    let config = load(&https, example_env(), &dir).unwrap();
    let target = config.upstreams[0].health.targets[0]
        .parsed
        .as_ref()
        .unwrap();
    assert!(target.tls);
    assert_eq!(target.port, 443);
    let ftp = example().replacen(
        "url = \"http://example.com/\"",
        "url = \"ftp://example.com/\"",
        1,
    );
    let found = problems(load(&ftp, example_env(), &dir));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "upstreams[0].health.targets[0].url");
}

#[test]
fn a_backconnect_upstream_loads_and_its_mistakes_are_named_by_key() {
    let dir = secret_dir();
    let upstream = |username: &str, groups: &str, credentials: bool| {
        let credentials = if credentials {
            "[upstreams.credentials]\nusername = \"acct\"\npassword = { file = \"secrets/dc-password\" }\n"
        } else {
            ""
        };
        format!(
            "\n[[upstreams]]\nid = \"resi_bc\"\nttl = \"10m\"\nmax_size = 100\n{credentials}\
             [upstreams.provider]\nkind = \"backconnect\"\n\
             [upstreams.provider.backconnect]\nhost = \"gate.vendor.example\"\nport = 7777\n\
             username = \"{username}\"\nsession_lifetime = \"5m\"\n{groups}\
             [[upstreams.health.targets]]\nurl = \"http://example.com/\"\n"
        )
    };
    let group = "[[upstreams.provider.backconnect.sessions]]\ncountry = \"us\"\ncount = 3\n";
    let good = upstream(
        "customer-{account}-cc-{country}[-city-{city}]-sessid-{session}-sesstime-{minutes}",
        group,
        true,
    );
    let config = load(&format!("{}{good}", example()), example_env(), &dir).unwrap();
    let backconnect = config.upstreams[2].provider.backconnect.as_ref().unwrap();
    assert!(
        backconnect.templates.is_some(),
        "validation parses the templates"
    );
    assert_eq!(backconnect.sessions[0].count, 3);

    for (bad, key) in [
        (
            upstream("customer-{account}-cc-{country}", group, true),
            "upstreams[2].provider.backconnect.username",
        ),
        (
            upstream("customer-{acount}-sessid-{session}", group, true),
            "upstreams[2].provider.backconnect.username",
        ),
        (
            upstream("{account}-city-{city}-sessid-{session}", group, true),
            "upstreams[2].provider.backconnect.sessions[0].city",
        ),
        (
            upstream("{account}-sessid-{session}", "", true),
            "upstreams[2].provider.backconnect.sessions",
        ),
        (
            upstream(
                "{account}-sessid-{session}",
                "[[upstreams.provider.backconnect.sessions]]\ncountry = \"u-s\"\ncount = 0\n",
                true,
            ),
            "upstreams[2].provider.backconnect.sessions[0].count",
        ),
        (
            upstream("{account}-sessid-{session}", group, false),
            "upstreams[2].provider.backconnect.username",
        ),
    ] {
        let found: Vec<String> =
            problems(load(&format!("{}{bad}", example()), example_env(), &dir))
                .into_iter()
                .map(|p| p.0)
                .collect();
        assert!(found.contains(&key.to_owned()), "{key}: {found:?}");
    }
}

#[test]
fn the_https_listener_and_its_tls_go_together_and_client_ca_turns_on_mtls() {
    let dir = secret_dir();
    std::fs::create_dir_all(dir.join("tls")).unwrap();
    for name in ["gw.pem", "gw.key", "clients-ca.pem"] {
        std::fs::write(dir.join("tls").join(name), "-----BEGIN X-----\n").unwrap();
    }
    let listener = "admin = \"127.0.0.1:9090\"           # /healthz";
    let https = "https = \"127.0.0.1:8443\"\n".to_owned() + listener;
    let tls_table = "\n[gateway.tls]\ncert = \"tls/gw.pem\"\nkey = \"tls/gw.key\"\n";
    let with_tls = |text: String, table: &str| {
        text.replace(
            "\n[gateway.destinations]",
            &format!("{table}\n[gateway.destinations]"),
        )
    };

    // The listener without its certificate: refused, naming the table and why.
    let found = problems(load(
        &example().replace(listener, &https),
        example_env(),
        &dir,
    ));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "gateway.tls");
    assert!(found[0].1.contains("listeners.https"), "{found:?}");

    // The certificate without the listener: refused too (it would serve nothing).
    let found = problems(load(&with_tls(example(), tls_table), example_env(), &dir));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "gateway.tls");
    assert!(found[0].1.contains("set listeners.https"), "{found:?}");

    // A missing file is named by its key.
    let missing = tls_table.replace("tls/gw.key", "tls/nope.key");
    let found = problems(load(
        &with_tls(example().replace(listener, &https), &missing),
        example_env(),
        &dir,
    ));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "gateway.tls.key");
    assert!(found[0].1.contains("nope.key"), "{found:?}");

    // Both: loads, paths anchored at the file; client_ca is the mTLS switch.
    let mtls = format!("{tls_table}client_ca = \"tls/clients-ca.pem\"\n");
    let config = load(
        &with_tls(example().replace(listener, &https), &mtls),
        example_env(),
        &dir,
    )
    .unwrap();
    let gateway = config.gateway.unwrap();
    assert_eq!(
        gateway.listeners.https,
        Some("127.0.0.1:8443".parse().unwrap())
    );
    let tls = gateway.tls.unwrap();
    assert_eq!(tls.cert, dir.join("tls/gw.pem"));
    assert_eq!(tls.client_ca, Some(dir.join("tls/clients-ca.pem")));
}

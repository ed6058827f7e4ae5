//! What a reload changes: [`ReloadPlan`] compares the running configuration with a newly
//! loaded one, key by key, and sorts each difference into "applies live" or "needs a
//! restart".
//!
//! Keys that shape what a process has bound, opened or sized at start (listen addresses,
//! the control API's listener limits, the store and quota connections, the control API's session and snapshot contract, the
//! client API's transport limits and shield, a gateway's identity, listeners, limiter
//! engine, tracked-proxy and sticky-session bounds, I/O threads, control pacing and the access log's
//! queue size, the fleet listener's address and what it advertises, adding or removing
//! the `[gateway]` or `[gateway.fleet]` table) need a restart: a reload reports them and keeps the running
//! values ([`with_restart_keys`]). Everything else (clients, policies, upstreams, worker
//! tokens, checker/ownership/maintenance tuning, extraction settings, the gateway's
//! limits, rotation, sessions, dialing, destinations, shield and grace) is applied live.

use crate::model::Config;
use toml::Value;

/// Key prefixes whose changes need a restart.
pub const RESTART_REQUIRED: &[&str] = &[
    "log",
    "store",
    "quota",
    "listen",
    "control",
    "snapshot",
    "api.limits",
    "api.shield",
    "api.trusted_proxies",
    "api.proxy_protocol",
    "api.secure_cookies",
    "gateway.worker_id",
    "gateway.controller_url",
    "gateway.worker_token",
    "gateway.controller_tls",
    "gateway.admin_tls",
    "gateway.tls",
    "api.tls",
    "gateway.listeners",
    "gateway.fleet.listen",
    "gateway.fleet.advertise",
    "gateway.limiter",
    "gateway.limits.admin_max_connections",
    "gateway.limits.max_tracked_proxies",
    "gateway.limits.max_sticky_sessions",
    "gateway.control",
    "gateway.trusted_proxies",
    "gateway.io_threads",
    "gateway.access_log.queue",
];

/// The differences between two loads of a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadPlan {
    /// Changed keys that apply live.
    pub live: Vec<String>,
    /// Changed keys that need a restart (not applied).
    pub restart: Vec<String>,
}

impl ReloadPlan {
    /// Compares `running` with `loaded`.
    pub fn between(running: &Config, loaded: &Config) -> ReloadPlan {
        let mut changed = Vec::new();
        match (Value::try_from(running), Value::try_from(loaded)) {
            (Ok(a), Ok(b)) => diff("", &a, &b, &mut changed),
            // Serializing plain data cannot fail; if it ever did, claim nothing is live.
            _ => changed.push(String::new()),
        }
        // Secrets serialize as their references only; a rotated value behind the same
        // reference still counts as a change of its key.
        secret_changes(running, loaded, &mut changed);
        changed.sort();
        changed.dedup();
        let (restart, live) = changed.into_iter().partition(|key| needs_restart(key));
        ReloadPlan { live, restart }
    }

    /// Whether nothing changed at all.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty() && self.restart.is_empty()
    }
}

/// `loaded` with every key that needs a restart taken from `running`: what a reload
/// applies, and what is in force after it.
pub fn with_restart_keys(running: &Config, loaded: &Config) -> Config {
    let mut config = loaded.clone();
    config.log = running.log.clone();
    config.store = running.store.clone();
    config.quota = running.quota.clone();
    config.listen = running.listen.clone();
    config.control = running.control.clone();
    config.snapshot = running.snapshot.clone();
    config.api.limits = running.api.limits.clone();
    config.api.shield = running.api.shield.clone();
    config.api.trusted_proxies = running.api.trusted_proxies.clone();
    config.api.proxy_protocol = running.api.proxy_protocol;
    config.api.secure_cookies = running.api.secure_cookies;
    config.gateway = match (&running.gateway, &loaded.gateway) {
        (Some(old), Some(new)) => {
            let mut gateway = new.clone();
            gateway.worker_id = old.worker_id.clone();
            gateway.controller_url = old.controller_url.clone();
            gateway.worker_token = old.worker_token.clone();
            gateway.listeners = old.listeners.clone();
            gateway.tls = old.tls.clone();
            gateway.limiter = old.limiter.clone();
            gateway.limits.admin_max_connections = old.limits.admin_max_connections;
            gateway.limits.max_tracked_proxies = old.limits.max_tracked_proxies;
            gateway.limits.max_sticky_sessions = old.limits.max_sticky_sessions;
            gateway.control = old.control.clone();
            gateway.trusted_proxies = old.trusted_proxies.clone();
            gateway.io_threads = old.io_threads;
            gateway.fleet = match (&old.fleet, gateway.fleet.take()) {
                (Some(old), Some(mut new)) => {
                    new.listen = old.listen;
                    new.advertise.clone_from(&old.advertise);
                    Some(new)
                }
                // Joining or leaving the fleet binds or closes a listener.
                (old, _) => old.clone(),
            };
            Some(gateway)
        }
        // Adding or removing the whole table needs a restart.
        (old, _) => old.clone(),
    };
    config
}

fn needs_restart(key: &str) -> bool {
    key.is_empty()
        || key == "gateway"
        || key == "gateway.fleet"
        || RESTART_REQUIRED
            .iter()
            .any(|prefix| key == *prefix || key.starts_with(&format!("{prefix}.")))
}

fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Table(a), Value::Table(b)) => {
            for key in a.keys().chain(b.keys()) {
                let child = join(path, key);
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff(&child, x, y, out),
                    _ => out.push(child),
                }
            }
        }
        // Arrays of tables with ids (upstreams, clients, policies) are reported per
        // element by id; other arrays as a whole.
        (Value::Array(a), Value::Array(b)) if a.iter().chain(b).all(has_id) => {
            for id in a.iter().chain(b).filter_map(id_of) {
                let child = format!("{path}[{id}]");
                match (find(a, id), find(b, id)) {
                    (Some(x), Some(y)) => diff(&child, x, y, out),
                    _ => out.push(child),
                }
            }
        }
        _ if a != b => out.push(path.to_owned()),
        _ => {}
    }
}

fn secret_changes(running: &Config, loaded: &Config, out: &mut Vec<String>) {
    if running.store.password != loaded.store.password {
        out.push("store.password".into());
    }
    if running.quota.password != loaded.quota.password {
        out.push("quota.password".into());
    }
    let token = |c: &Config| c.gateway.as_ref().and_then(|g| g.worker_token.clone());
    if token(running) != token(loaded) {
        out.push("gateway.worker_token".into());
    }
    for client in &loaded.clients {
        if let Some(old) = running.clients.iter().find(|c| c.id == client.id)
            && (old.api_token != client.api_token
                || old.gateway_password != client.gateway_password)
        {
            out.push(format!("clients[{}]", client.id));
        }
    }
    for upstream in &loaded.upstreams {
        if let Some(old) = running.upstreams.iter().find(|u| u.id == upstream.id)
            && old != upstream
        {
            out.push(format!("upstreams[{}]", upstream.id));
        }
    }
    let admin = |c: &Config| c.gateway.as_ref().and_then(|g| g.admin_token.clone());
    if admin(running) != admin(loaded) {
        out.push("gateway.admin_token".into());
    }
    if running.api.metrics_token != loaded.api.metrics_token {
        out.push("api.metrics_token".into());
    }
    if running.worker_tokens != loaded.worker_tokens {
        out.push("worker_tokens".into());
    }
}

fn has_id(value: &Value) -> bool {
    id_of(value).is_some()
}

fn id_of(value: &Value) -> Option<&str> {
    value.get("id").and_then(Value::as_str)
}

fn find<'v>(items: &'v [Value], id: &str) -> Option<&'v Value> {
    items.iter().find(|item| id_of(item) == Some(id))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Env, Role};
    use std::path::Path;

    fn load(text: &str) -> Config {
        let env = Env::from_pairs([
            ("T", "token-value-one-00001"),
            ("T2", "token-value-two-00002"),
        ]);
        Config::from_toml_str(text, "t.toml", Path::new("."), Role::Controller, &env).unwrap()
    }

    const BASE: &str = r#"
[listen]
api = "127.0.0.1:7080"
[[clients]]
id = "a"
project = "p"
api_token = { env = "T" }
[checker]
concurrency = 8
"#;

    #[test]
    fn sorts_changes_into_live_and_restart() {
        let running = load(BASE);
        assert!(ReloadPlan::between(&running, &load(BASE)).is_empty());

        let changed = BASE
            .replace("127.0.0.1:7080", "127.0.0.1:7081")
            .replace("concurrency = 8", "concurrency = 9")
            + "[[clients]]\nid = \"b\"\nproject = \"p\"\napi_token = { env = \"T\" }\n";
        let plan = ReloadPlan::between(&running, &load(&changed));
        assert_eq!(plan.restart, vec!["listen.api".to_owned()]);
        assert_eq!(
            plan.live,
            vec!["checker.concurrency".to_owned(), "clients[b]".to_owned()]
        );
    }

    #[test]
    fn the_tls_listener_and_its_certificate_paths_need_a_restart() {
        for key in [
            "gateway.listeners.https",
            "gateway.tls",
            "gateway.tls.client_ca",
        ] {
            assert!(needs_restart(key), "{key}");
        }
        // A prefix is a whole key segment: nothing else starting with "tls" is caught.
        assert!(!needs_restart("gateway.tlsx"));
    }

    #[test]
    fn what_needs_a_restart_keeps_its_running_value_and_the_rest_applies() {
        let with_gateway = |listen: &str, grace: &str, tracked: u32| {
            format!(
                "{BASE}[gateway]\nshutdown_grace = \"{grace}\"\n[gateway.listeners]\nhttp = \"{listen}\"\n[gateway.limits]\nmax_tracked_proxies = {tracked}\n"
            )
        };
        let running = load(&with_gateway("127.0.0.1:1", "1s", 10));
        let loaded = load(
            &with_gateway("127.0.0.1:2", "2s", 20).replace("127.0.0.1:7080", "127.0.0.1:7081"),
        );
        let plan = ReloadPlan::between(&running, &loaded);
        assert_eq!(
            plan.restart,
            vec![
                "gateway.limits.max_tracked_proxies".to_owned(),
                "gateway.listeners.http".to_owned(),
                "listen.api".to_owned()
            ]
        );
        assert_eq!(plan.live, vec!["gateway.shutdown_grace".to_owned()]);
        let applied = with_restart_keys(&running, &loaded);
        let gateway = applied.gateway.as_ref().unwrap();
        assert_eq!(gateway.shutdown_grace.as_ms(), 2_000);
        assert_eq!(gateway.limits.max_tracked_proxies, 10);
        assert_eq!(
            gateway.listeners,
            running.gateway.as_ref().unwrap().listeners
        );
        assert_eq!(applied.listen, running.listen);
        // Nothing a restart would change is left to change after the reload.
        assert!(ReloadPlan::between(&applied, &loaded).live.is_empty());

        let without = load(BASE);
        let plan = ReloadPlan::between(&without, &running);
        assert_eq!(plan.restart, vec!["gateway".to_owned()]);
        assert!(with_restart_keys(&without, &running).gateway.is_none());
    }

    #[test]
    fn the_per_client_sticky_cap_is_live_and_the_table_bound_is_not() {
        let with_limits = |limits: &str| {
            format!(
                "{BASE}[gateway.listeners]\nhttp = \"127.0.0.1:1\"\n[gateway.limits]\n{limits}\n"
            )
        };
        let running = load(&with_limits("max_sticky_sessions = 100"));
        let loaded = load(&with_limits(
            "max_sticky_sessions = 200\nmax_sticky_sessions_per_client = 5",
        ));
        let plan = ReloadPlan::between(&running, &loaded);
        assert_eq!(
            plan.restart,
            vec!["gateway.limits.max_sticky_sessions".to_owned()]
        );
        assert_eq!(
            plan.live,
            vec!["gateway.limits.max_sticky_sessions_per_client".to_owned()]
        );
        let env = Env::from_pairs([("T", "token-value-one-00001")]);
        let zero = with_limits("max_sticky_sessions_per_client = 0");
        let error = Config::from_toml_str(&zero, "t.toml", Path::new("."), Role::Serve, &env)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("max_sticky_sessions_per_client") && error.contains("at least 1"),
            "{error}"
        );
    }

    #[test]
    fn the_gateway_admin_token_applies_live_and_a_bad_one_fails_the_load() {
        let with_token = |token: &str| {
            format!("{BASE}[gateway]\n{token}\n[gateway.listeners]\nhttp = \"127.0.0.1:1\"\n")
        };
        let env = Env::from_pairs([
            ("T", "token-value-one-00001"),
            ("T2", "token-value-two-00002"),
            ("SHORT", "x"),
        ]);
        let load =
            |text: &str| Config::from_toml_str(text, "t.toml", Path::new("."), Role::Serve, &env);
        let running = load(&with_token("")).unwrap();
        let loaded = load(&with_token("admin_token = { env = \"T2\" }")).unwrap();
        assert!(
            loaded
                .gateway
                .as_ref()
                .unwrap()
                .admin_token
                .as_ref()
                .unwrap()
                .verifier()
                .is_some(),
            "resolved to a salted hash"
        );
        let plan = ReloadPlan::between(&running, &loaded);
        assert!(plan.restart.is_empty(), "{:?}", plan.restart);
        assert_eq!(plan.live, vec!["gateway.admin_token".to_owned()]);
        let rotated = load(&with_token("admin_token = { env = \"T\" }")).unwrap();
        let plan = ReloadPlan::between(&loaded, &rotated);
        assert!(plan.restart.is_empty(), "{:?}", plan.restart);
        assert!(
            plan.live.contains(&"gateway.admin_token".to_owned()),
            "{:?}",
            plan.live
        );
        let error = load(&with_token("admin_token = { env = \"SHORT\" }"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("gateway.admin_token"), "{error}");
    }

    #[test]
    fn the_dashboards_secure_cookie_setting_needs_a_restart() {
        let running = load(BASE);
        let loaded = load(&format!("{BASE}[api]\nsecure_cookies = true\n"));
        let plan = ReloadPlan::between(&running, &loaded);
        assert_eq!(plan.restart, vec!["api.secure_cookies".to_owned()]);
        assert!(!with_restart_keys(&running, &loaded).api.secure_cookies);
    }

    #[test]
    fn the_fleet_listener_and_its_address_need_a_restart_and_its_timeouts_apply_live() {
        let with_fleet =
            |fleet: &str| format!("{BASE}[gateway.listeners]\nhttp = \"127.0.0.1:1\"\n{fleet}");
        let table = |listen: &str, advertise: &str, hop: &str| {
            with_fleet(&format!(
                "[gateway.fleet]\nlisten = \"{listen}\"\nadvertise = \"{advertise}\"\nhop_timeout = \"{hop}\"\n"
            ))
        };
        let running = load(&table("127.0.0.1:9443", "gw-1.internal:9443", "3s"));
        let loaded = load(&table("127.0.0.1:9444", "gw-1.internal:9444", "5s"));
        let plan = ReloadPlan::between(&running, &loaded);
        assert_eq!(
            plan.restart,
            vec![
                "gateway.fleet.advertise".to_owned(),
                "gateway.fleet.listen".to_owned()
            ]
        );
        assert_eq!(plan.live, vec!["gateway.fleet.hop_timeout".to_owned()]);
        let applied = with_restart_keys(&running, &loaded);
        let fleet = applied.gateway.as_ref().unwrap().fleet.as_ref().unwrap();
        assert_eq!(fleet.listen, "127.0.0.1:9443".parse().unwrap());
        assert_eq!(fleet.advertise, "gw-1.internal:9443");
        assert_eq!(fleet.hop_timeout.as_ms(), 5_000);

        // Joining or leaving the fleet binds or closes a listener.
        let alone = load(&with_fleet(""));
        for (from, to) in [(&alone, &running), (&running, &alone)] {
            let plan = ReloadPlan::between(from, to);
            assert_eq!(plan.restart, vec!["gateway.fleet".to_owned()]);
            let applied = with_restart_keys(from, to);
            assert_eq!(
                applied.gateway.unwrap().fleet,
                from.gateway.as_ref().unwrap().fleet
            );
        }
    }

    #[test]
    fn io_threads_need_a_restart_and_are_bounded() {
        let with_threads = |threads: &str| {
            format!("{BASE}[gateway]\n{threads}\n[gateway.listeners]\nhttp = \"127.0.0.1:1\"\n")
        };
        let unset = load(&with_threads(""));
        assert_eq!(unset.gateway.as_ref().unwrap().io_threads, None);
        let running = load(&with_threads("io_threads = 0"));
        assert_eq!(running.gateway.as_ref().unwrap().io_threads, Some(0));
        let loaded = load(&with_threads("io_threads = 4"));
        let plan = ReloadPlan::between(&running, &loaded);
        assert_eq!(plan.restart, vec!["gateway.io_threads".to_owned()]);
        assert!(plan.live.is_empty(), "{:?}", plan.live);
        let applied = with_restart_keys(&running, &loaded);
        assert_eq!(applied.gateway.as_ref().unwrap().io_threads, Some(0));

        let env = Env::from_pairs([("T", "token-value-one-00001")]);
        for (threads, message) in [
            ("io_threads = 257", "at most 256"),
            ("io_threads = -1", "io_threads"),
        ] {
            let error = Config::from_toml_str(
                &with_threads(threads),
                "t.toml",
                Path::new("."),
                Role::Serve,
                &env,
            )
            .unwrap_err()
            .to_string();
            assert!(
                error.contains("io_threads") && error.contains(message),
                "{error}"
            );
        }
    }

    #[test]
    fn the_capacity_wait_applies_live_and_is_bounded() {
        let with_limits = |limits: &str| {
            format!(
                "{BASE}[gateway.listeners]\nhttp = \"127.0.0.1:1\"\n[gateway.limits]\n{limits}\n"
            )
        };
        let running = load(&with_limits(""));
        assert_eq!(
            running.gateway.as_ref().unwrap().limits.capacity_wait.0,
            300
        );
        let loaded = load(&with_limits(
            "capacity_wait = \"0s\"\nmax_capacity_waiters_per_client = 4\nmax_capacity_waiters = 8",
        ));
        let plan = ReloadPlan::between(&running, &loaded);
        assert!(plan.restart.is_empty(), "{:?}", plan.restart);
        assert_eq!(
            plan.live,
            vec![
                "gateway.limits.capacity_wait".to_owned(),
                "gateway.limits.max_capacity_waiters".to_owned(),
                "gateway.limits.max_capacity_waiters_per_client".to_owned(),
            ]
        );
        let env = Env::from_pairs([("T", "token-value-one-00001")]);
        for (limits, key, message) in [
            ("capacity_wait = \"31s\"", "capacity_wait", "at most 30s"),
            (
                "max_capacity_waiters_per_client = 0",
                "max_capacity_waiters_per_client",
                "at least 1",
            ),
            (
                "max_capacity_waiters = 0",
                "max_capacity_waiters",
                "at least 1",
            ),
        ] {
            let error = Config::from_toml_str(
                &with_limits(limits),
                "t.toml",
                Path::new("."),
                Role::Serve,
                &env,
            )
            .unwrap_err()
            .to_string();
            assert!(error.contains(key) && error.contains(message), "{error}");
        }
    }

    #[test]
    fn listener_limits_need_a_restart_but_the_gateways_per_ip_cap_applies_live() {
        let with = |control: u32, per_ip: u32, admin: u32| {
            format!(
                "{BASE}[control.limits]\nmax_connections_per_ip = {control}\n[gateway]\n\
                 [gateway.listeners]\nhttp = \"127.0.0.1:1\"\n[gateway.limits]\n\
                 max_connections_per_ip = {per_ip}\nadmin_max_connections = {admin}\n"
            )
        };
        let running = load(&with(8, 100, 10));
        let loaded = load(&with(9, 200, 20));
        let plan = ReloadPlan::between(&running, &loaded);
        assert_eq!(
            plan.restart,
            vec![
                "control.limits.max_connections_per_ip".to_owned(),
                "gateway.limits.admin_max_connections".to_owned(),
            ]
        );
        assert_eq!(
            plan.live,
            vec!["gateway.limits.max_connections_per_ip".to_owned()]
        );
        let applied = with_restart_keys(&running, &loaded);
        assert_eq!(applied.control.limits.max_connections_per_ip, 8);
        let gateway = applied.gateway.as_ref().unwrap();
        assert_eq!(gateway.limits.max_connections_per_ip, 200);
        assert_eq!(gateway.limits.admin_max_connections, 10);
        assert!(ReloadPlan::between(&applied, &loaded).live.is_empty());
    }

    #[test]
    fn a_rotated_secret_behind_the_same_reference_is_a_change() {
        let running = load(BASE);
        let env = Env::from_pairs([("T", "another-token-value")]);
        let rotated =
            Config::from_toml_str(BASE, "t.toml", Path::new("."), Role::Controller, &env).unwrap();
        let plan = ReloadPlan::between(&running, &rotated);
        assert_eq!(plan.live, vec!["clients[a]".to_owned()]);
        assert!(plan.restart.is_empty());
    }
}

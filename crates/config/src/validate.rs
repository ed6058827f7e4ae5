//! Checks that need more than one key (or more than a type), and secret resolution.
//!
//! Every problem is collected with its key path, so one load reports all of them.

use crate::api;
use crate::check::Check;
use crate::client::{
    ClientConfig, ClientRotation, MAX_ROTATE_EVERY, MAX_ROTATE_REQUESTS, QUOTA_OPERATIONS,
};
use crate::duration::Millis;
use crate::gateway;
use crate::limiter::RatePolicy;
use crate::load::Role;
use crate::model::*;
use crate::target::{TargetUrl, split_host_port};
use crate::upstream::*;
use proxypool_core::{ClientId, UpstreamId};
use std::collections::HashSet;

/// Validates `config` in place for `role`, resolving the secrets that role uses.
pub(crate) fn validate(c: &mut Check<'_>, config: &mut Config, role: Role) {
    let (controller, gateway, remote_gateway) = match role {
        Role::Controller => (true, false, false),
        Role::Serve => (true, true, false),
        Role::Gateway => (false, true, true),
        Role::Check => {
            let controller = config.has_controller();
            (controller, config.gateway.is_some(), !controller)
        }
    };
    if controller {
        store(c, &mut config.store);
        quota(c, &mut config.quota);
        tuning(c, config);
        worker_tokens(c, &mut config.worker_tokens);
        let policy_ids = policies(c, &config.policies);
        let upstream_ids = upstreams(c, &mut config.upstreams, config.checker.timeout);
        clients(c, &mut config.clients, &upstream_ids, &policy_ids);
        api::validate(c, &mut config.api);
        for (key, message) in config.control.limits.problems() {
            c.at(format!("control.limits.{key}"), message);
        }
        if let Some(tls) = &mut config.control.tls {
            crate::tls::check_server(c, "control.tls", tls);
        }
        for (i, cidr) in config.control.trusted_proxies.iter().enumerate() {
            if let Err(message) = parse_cidr(cidr) {
                c.at(format!("control.trusted_proxies[{i}]"), message);
            }
        }
    }
    if gateway {
        match &mut config.gateway {
            Some(section) => gateway::validate(c, section, remote_gateway),
            None => c.at(
                "gateway",
                "missing: add a [gateway] table with at least listeners.http or listeners.socks5",
            ),
        }
    }
}

fn no_userinfo(c: &mut Check<'_>, path: &str, url: &str) -> bool {
    let authority = url
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?']).next().unwrap_or(""))
        .unwrap_or("");
    if authority.contains('@') {
        c.at(
            path,
            "the URL must not carry credentials; use password_env or password_file",
        );
        return false;
    }
    true
}

fn store(c: &mut Check<'_>, store: &mut StoreConfig) {
    let url = store.url.clone();
    store.kind = if url == "memory" {
        StoreKind::Memory
    } else if url.starts_with("redis://") || url.starts_with("rediss://") {
        if !no_userinfo(c, "store.url", &url) {
            return;
        }
        StoreKind::Redis { url }
    } else if let Some(rest) = url.strip_prefix("redis+sentinel://") {
        if !no_userinfo(c, "store.url", &url) {
            return;
        }
        match parse_sentinel(rest) {
            Ok(kind) => kind,
            Err(message) => return c.at("store.url", message),
        }
    } else {
        return c.at(
            "store.url",
            "must be \"memory\", redis://HOST:PORT[/DB] or redis+sentinel://HOST:PORT[,HOST:PORT]/MASTER[/DB]",
        );
    };
    if let Some(password) = &mut store.password {
        c.resolve_plain("store.password", password);
    }
    if store.kind == StoreKind::Memory && store.password.is_some() {
        c.at("store.password", "the memory store takes no password");
    }
    if let Some(tls) = &mut store.tls {
        crate::tls::check_client(c, "store.tls", tls);
        c.require(
            store.url.starts_with("rediss://"),
            "store.tls",
            "needs a rediss:// URL (Sentinel over TLS trusts the system roots)",
        );
    }
    c.require(
        !store.sentinel_tls || matches!(store.kind, StoreKind::Sentinel { .. }),
        "store.sentinel_tls",
        "only for a redis+sentinel:// URL",
    );
    store_tuning(c, store);
}

/// The Redis-only knobs (checked for every store, so a file switched to Redis later by an
/// override does not start failing only then).
fn store_tuning(c: &mut Check<'_>, store: &StoreConfig) {
    let prefix = &store.key_prefix;
    c.require(
        (1..=64).contains(&prefix.len())
            && prefix
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | ':' | '-')),
        "store.key_prefix",
        "must be 1-64 characters of [A-Za-z0-9._:-]",
    );
    c.duration(
        "store.call_timeout",
        store.call_timeout,
        Millis(10),
        Millis::from_secs(60),
    );
    c.duration(
        "store.leader_lease",
        store.leader_lease,
        Millis(500),
        Millis::from_secs(600),
    );
    // A renewal runs every third of the lease and the leader steps down a call timeout
    // (plus a tenth of the lease for clock skew) before it ends; below 4x the call timeout
    // one slow renewal would already cost the leadership.
    c.require(
        store.call_timeout.0.saturating_mul(4) <= store.leader_lease.0,
        "store.leader_lease",
        "must be at least 4 times store.call_timeout, so a slow renewal can be retried before the lease ends",
    );
}

fn parse_sentinel(rest: &str) -> Result<StoreKind, String> {
    let mut parts = rest.split('/');
    let hosts = parts.next().unwrap_or("");
    let master = parts
        .next()
        .filter(|m| !m.is_empty())
        .ok_or("redis+sentinel:// needs /MASTER_NAME after the sentinel hosts")?;
    let db = match parts.next() {
        None | Some("") => 0,
        Some(db) => db
            .parse()
            .map_err(|_| format!("invalid database number {db:?}"))?,
    };
    let sentinels = hosts
        .split(',')
        .map(|h| {
            split_host_port(h).map(|(host, port)| match port {
                Some(port) => format!("{host}:{port}"),
                None => format!("{host}:26379"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(StoreKind::Sentinel {
        sentinels,
        master: master.to_owned(),
        db,
    })
}

fn quota(c: &mut Check<'_>, quota: &mut QuotaStoreConfig) {
    let url = quota.url.clone();
    quota.kind = if url == "memory" {
        QuotaKind::Memory
    } else if let Some(path) = url.strip_prefix("sqlite://") {
        if path.is_empty() {
            return c.at("quota.url", "sqlite:// needs a file path");
        }
        QuotaKind::Sqlite {
            path: c.base_dir.join(path),
        }
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        if !no_userinfo_password(c, &url) {
            return;
        }
        QuotaKind::Postgres { url }
    } else {
        return c.at(
            "quota.url",
            "must be \"memory\", sqlite://PATH or postgres://USER@HOST:PORT/DB",
        );
    };
    if let Some(password) = &mut quota.password {
        c.resolve_plain("quota.password", password);
    }
    if !matches!(quota.kind, QuotaKind::Postgres { .. }) && quota.password.is_some() {
        c.at("quota.password", "only a postgres quota takes a password");
    }
    if let Some(connections) = quota.max_connections {
        c.require(
            (1..=256).contains(&connections),
            "quota.max_connections",
            "must be in 1..=256",
        );
    }
    let (min, max) = (Millis(1), Millis::from_secs(60));
    c.duration("quota.acquire_timeout", quota.acquire_timeout, min, max);
    c.duration("quota.statement_timeout", quota.statement_timeout, min, max);
    c.duration("quota.decision_timeout", quota.decision_timeout, min, max);
    // The decision bound covers waiting for a connection and running the statement; one
    // shorter than either would cut every slow-but-healthy decision into a 503.
    for (key, part) in [
        ("acquire_timeout", quota.acquire_timeout),
        ("statement_timeout", quota.statement_timeout),
    ] {
        if quota.decision_timeout <= part {
            c.at(
                "quota.decision_timeout",
                format!("must be longer than quota.{key} ({part}): it bounds the whole decision"),
            );
        }
    }
}

/// PostgreSQL URLs name a user (`postgres://proxypool@db/...`) but never a password.
fn no_userinfo_password(c: &mut Check<'_>, url: &str) -> bool {
    let authority = url
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?']).next().unwrap_or(""))
        .unwrap_or("");
    let has_password = authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'));
    if has_password || url.contains("password=") {
        c.at(
            "quota.url",
            "the URL must not carry a password; use password_env or password_file",
        );
        return false;
    }
    true
}

fn tuning(c: &mut Check<'_>, config: &Config) {
    let cooldowns = &config.cooldowns;
    let day = Millis(proxypool_core::cooldown::MAX_COOLDOWN_MS);
    c.duration("cooldowns.cap", cooldowns.cap, Millis::from_secs(1), day);
    c.duration(
        "cooldowns.base",
        cooldowns.base,
        Millis::from_secs(1),
        cooldowns.cap.max(Millis::from_secs(1)),
    );
    c.duration("cooldowns.memory", cooldowns.memory, Millis(0), day);
    let s = &config.snapshot;
    c.duration(
        "snapshot.long_poll_wait",
        s.long_poll_wait,
        Millis(0),
        Millis::from_secs(300),
    );
    c.duration(
        "snapshot.max_staleness",
        s.max_staleness,
        Millis::from_secs(1),
        Millis::from_secs(3600),
    );
    c.duration(
        "snapshot.session_ttl",
        s.session_ttl,
        Millis::from_secs(1),
        Millis::from_secs(3600),
    );
    c.duration(
        "snapshot.poll_interval",
        s.poll_interval,
        Millis(10),
        Millis::from_secs(60),
    );
    c.require(
        s.report_interval.0 >= 10 && s.report_interval.0 * 2 <= s.session_ttl.0,
        "snapshot.report_interval",
        "must be at least 10ms and at most half of snapshot.session_ttl, so one lost report does not end a session",
    );
    c.require(
        (1..=100_000).contains(&s.max_proxies),
        "snapshot.max_proxies",
        "must be in 1..=100000",
    );

    let o = &config.ownership;
    c.duration(
        "ownership.lease",
        o.lease,
        Millis(100),
        Millis::from_secs(3600),
    );
    c.require(
        o.renew_before > o.interval && o.renew_before.0.saturating_add(o.interval.0) < o.lease.0,
        "ownership.renew_before",
        "must be longer than ownership.interval (or leases lapse between rounds) and shorter than ownership.lease by more than ownership.interval (or every round renews every lease)",
    );
    if config.store.kind != StoreKind::Memory
        && let Some(message) = crate::timing::failover_problem(config)
    {
        c.at("ownership.renew_before", message);
    }
    c.duration(
        "ownership.interval",
        o.interval,
        Millis(10),
        Millis::from_secs(60),
    );
    c.require(
        o.per_worker_target >= 1,
        "ownership.per_worker_target",
        "must be at least 1",
    );
    c.require(
        (1..=10_000).contains(&o.expire_batch),
        "ownership.expire_batch",
        "must be in 1..=10000",
    );
    c.require(
        o.assign_batch >= 1,
        "ownership.assign_batch",
        "must be at least 1",
    );

    let k = &config.checker;
    c.require(
        (1..=10_000).contains(&k.concurrency),
        "checker.concurrency",
        "must be in 1..=10000",
    );
    c.duration(
        "checker.timeout",
        k.timeout,
        Millis(1),
        Millis::from_secs(120),
    );
    c.duration(
        "checker.interval",
        k.interval,
        Millis(10),
        Millis::from_secs(600),
    );
    c.require(
        k.round_size >= 1,
        "checker.round_size",
        "must be at least 1",
    );
    c.require(
        (1..=proxypool_core::health::MAX_HEALTH_BATCH).contains(&k.write_batch),
        "checker.write_batch",
        "must be in 1..=10000",
    );

    let m = &config.maintenance;
    c.duration(
        "maintenance.interval",
        m.interval,
        Millis(10),
        Millis::from_secs(3600),
    );
    c.require(m.batch >= 1, "maintenance.batch", "must be at least 1");
}

fn worker_tokens(c: &mut Check<'_>, tokens: &mut [WorkerTokenConfig]) {
    let mut names = HashSet::new();
    for (i, token) in tokens.iter_mut().enumerate() {
        let path = format!("worker_tokens[{i}]");
        if token.name.trim().is_empty() || !names.insert(token.name.clone()) {
            c.at(format!("{path}.name"), "must be present and unique");
        }
        let owner = format!("worker_token:{}", token.name);
        c.resolve_verifier(&format!("{path}.token"), &owner, &mut token.token);
    }
}

fn policies(c: &mut Check<'_>, policies: &[RatePolicy]) -> HashSet<String> {
    let mut ids = HashSet::new();
    // Client policies run in the gateway's limiter, on its default engine.
    let engine = proxypool_throttle::EngineOptions::default();
    for (i, policy) in policies.iter().enumerate() {
        let path = format!("policies[{i}]");
        match &policy.id {
            Some(id) if !id.trim().is_empty() && ids.insert(id.clone()) => {}
            _ => c.at(format!("{path}.id"), "must be present and unique"),
        }
        if let Err(message) = policy.check(&engine) {
            c.at(path, message);
        }
    }
    ids
}

fn upstreams(
    c: &mut Check<'_>,
    upstreams: &mut [UpstreamConfig],
    check_timeout: Millis,
) -> HashSet<UpstreamId> {
    let mut ids = HashSet::new();
    for (i, upstream) in upstreams.iter_mut().enumerate() {
        let path = format!("upstreams[{i}]");
        if !ids.insert(upstream.id.clone()) {
            c.at(format!("{path}.id"), "is used by another upstream");
        }
        c.duration(
            &format!("{path}.ttl"),
            upstream.ttl,
            Millis(1_000),
            Millis(proxypool_core::upsert::MAX_TTL_MS),
        );
        c.require(
            upstream.safety_margin < upstream.ttl,
            format!("{path}.safety_margin"),
            "must be shorter than ttl",
        );
        c.require(
            upstream.max_size >= 1,
            format!("{path}.max_size"),
            "must be at least 1",
        );
        c.require(
            upstream.max_sessions >= 1,
            format!("{path}.max_sessions"),
            "must be at least 1",
        );
        if let Some(creds) = &mut upstream.credentials {
            let cpath = format!("{path}.credentials");
            c.require(
                !creds.username.is_empty() && !creds.username.chars().any(char::is_control),
                format!("{cpath}.username"),
                "must be a non-empty name without control characters",
            );
            c.resolve_plain(&format!("{cpath}.password"), &mut creds.password);
        }
        provider(c, &path, upstream);
        health(
            c,
            &format!("{path}.health"),
            &mut upstream.health,
            check_timeout,
        );
    }
    ids
}

fn provider(c: &mut Check<'_>, upstream_path: &str, upstream: &mut UpstreamConfig) {
    let path = format!("{upstream_path}.provider");
    let p = &mut upstream.provider;
    c.duration(
        &format!("{path}.interval"),
        p.interval,
        Millis(100),
        Millis::from_secs(86_400),
    );
    c.require(
        p.jitter <= p.interval,
        format!("{path}.jitter"),
        "must not be longer than interval",
    );
    c.duration(
        &format!("{path}.timeout"),
        p.timeout,
        Millis(1),
        Millis::from_secs(300),
    );
    c.require(
        (1..=64 * 1024 * 1024).contains(&p.max_bytes),
        format!("{path}.max_bytes"),
        "must be in 1..=67108864",
    );
    match p.kind {
        ProviderKind::Http => {
            match &p.url {
                None => c.at(format!("{path}.url"), "an http provider needs a url"),
                Some(url) => match TargetUrl::parse_list(url) {
                    Err(message) => c.at(format!("{path}.url"), message),
                    Ok((false, _)) if !p.allow_plaintext => c.at(
                        format!("{path}.url"),
                        "an http:// list exposes the vendor's authorization and lets anyone \
                         on the path add entries: use https://, or set allow_plaintext = true \
                         for a vendor on a trusted network",
                    ),
                    Ok((false, _)) if p.tls.is_some() => {
                        c.at(format!("{path}.tls"), "only for an https:// list")
                    }
                    Ok(_) => {}
                },
            }
            if let Some(tls) = &mut p.tls {
                crate::tls::check_client(c, &format!("{path}.tls"), tls);
            }
            for (j, host) in p.allowed_hosts.iter().enumerate() {
                if let Err(message) = allowed_host(host) {
                    c.at(format!("{path}.allowed_hosts[{j}]"), message);
                }
            }
            c.require(
                upstream.credentials.is_none() || !p.allowed_hosts.is_empty(),
                format!("{path}.allowed_hosts"),
                "required with credentials: the vendor's hosts (domain suffixes or CIDRs) that \
                 may receive them, so a tampered list cannot collect them",
            );
            c.require(
                p.format.is_some(),
                format!("{path}.format"),
                "an http provider needs format = \"text\" or \"json\"",
            );
            c.require(
                p.proxies.is_empty(),
                format!("{path}.proxies"),
                "only a static provider lists proxies",
            );
            if let Some(authorization) = &mut p.authorization {
                c.resolve_plain(&format!("{path}.authorization"), authorization);
            }
        }
        ProviderKind::Static => {
            c.require(
                !p.allow_plaintext
                    && p.tls.is_none()
                    && p.allowed_hosts.is_empty()
                    && !p.allow_private_hosts,
                format!("{path}.allowed_hosts"),
                "allow_plaintext, tls, allowed_hosts and allow_private_hosts are for an http provider",
            );
            c.require(
                p.url.is_none() && p.format.is_none(),
                format!("{path}.url"),
                "a static provider takes no url or format",
            );
            c.require(
                p.authorization.is_none(),
                format!("{path}.authorization"),
                "a static provider takes no authorization",
            );
            c.require(
                !p.proxies.is_empty(),
                format!("{path}.proxies"),
                "a static provider needs at least one proxy",
            );
            for (j, entry) in p.proxies.iter().enumerate() {
                if let Err(message) = static_entry(entry) {
                    c.at(format!("{path}.proxies[{j}]"), message);
                }
            }
        }
    }
}

/// An `allowed_hosts` entry: a CIDR block or a domain suffix (letters, digits, `-`, `.`).
fn allowed_host(entry: &str) -> Result<(), String> {
    if entry.contains('/') || entry.parse::<std::net::IpAddr>().is_ok() {
        let cidr = if entry.contains('/') {
            entry.to_owned()
        } else if entry.contains(':') {
            format!("{entry}/128")
        } else {
            format!("{entry}/32")
        };
        return parse_cidr(&cidr).map(drop);
    }
    let name = entry.strip_prefix("*.").unwrap_or(entry);
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{entry:?} is neither a domain suffix nor a CIDR block"
        ))
    }
}

/// A static entry: `[scheme://]host:port` with scheme `http`, `https` or `socks5`; the
/// credentials come from the upstream's `[credentials]`, never inline.
fn static_entry(entry: &str) -> Result<(), String> {
    let entry = entry.trim();
    if entry.is_empty() {
        return Err("empty entry".into());
    }
    let authority = match entry.split_once("://") {
        Some(("http" | "https" | "socks5", rest)) => rest,
        Some((scheme, _)) => {
            return Err(format!("unknown scheme {scheme:?} (http, https or socks5)"));
        }
        None => entry,
    };
    if authority.contains('@') || authority.matches(':').count() > 1 && !authority.starts_with('[')
    {
        return Err(
            "credentials may not be written inline; use the upstream's [credentials]".into(),
        );
    }
    if authority.contains(['/', '?', ' ']) {
        return Err("write [scheme://]host:port, nothing more".into());
    }
    match split_host_port(authority)? {
        (_, Some(_)) => Ok(()),
        (_, None) => Err("the port is missing: write host:port".into()),
    }
}

fn health(c: &mut Check<'_>, path: &str, health: &mut HealthConfig, check_timeout: Millis) {
    c.require(
        !health.targets.is_empty(),
        format!("{path}.targets"),
        "at least one check target is needed: proxies are served only after a check through them",
    );
    for (j, target) in health.targets.iter_mut().enumerate() {
        match TargetUrl::parse(&target.url) {
            Ok(parsed) => target.parsed = Some(parsed),
            Err(message) => c.at(format!("{path}.targets[{j}].url"), message),
        }
        c.require(
            (100..=599).contains(&target.expect_status),
            format!("{path}.targets[{j}].expect_status"),
            "must be an HTTP status code (100..=599)",
        );
    }
    c.duration(
        &format!("{path}.interval"),
        health.interval,
        Millis(100),
        Millis::from_secs(86_400),
    );
    c.require(
        health.unhealthy_after >= 1,
        format!("{path}.unhealthy_after"),
        "must be at least 1",
    );
    if let Some(max) = health.max_latency {
        c.require(
            max.0 >= 1 && max < check_timeout,
            format!("{path}.max_latency"),
            "must be at least 1ms and shorter than checker.timeout",
        );
    }
}

fn clients(
    c: &mut Check<'_>,
    clients: &mut [ClientConfig],
    upstream_ids: &HashSet<UpstreamId>,
    policy_ids: &HashSet<String>,
) {
    let mut ids = HashSet::new();
    for (i, client) in clients.iter_mut().enumerate() {
        let path = format!("clients[{i}]");
        if !ids.insert(client.id.clone()) {
            c.at(format!("{path}.id"), "is used by another client");
        }
        if ClientId::new(&client.project).is_err() {
            c.at(
                format!("{path}.project"),
                "must be 1-128 characters of [A-Za-z0-9._:-] starting with a letter or digit",
            );
        }
        let ClientConfig {
            id,
            api_token,
            gateway_password,
            ..
        } = client;
        if let Some(token) = api_token {
            c.resolve_verifier(
                &format!("{path}.api_token"),
                &format!("api_token:{id}"),
                token,
            );
        }
        if let Some(password) = gateway_password {
            c.resolve_verifier(
                &format!("{path}.gateway_password"),
                &format!("gateway_password:{id}"),
                password,
            );
        }
        c.require(
            client.api_token.is_some() || client.gateway_password.is_some(),
            path.clone(),
            "a client needs an api token or a gateway password (or both)",
        );
        for (j, upstream) in client.allowed_upstreams.iter().enumerate() {
            c.require(
                upstream_ids.contains(upstream),
                format!("{path}.allowed_upstreams[{j}]"),
                "names no configured upstream",
            );
        }
        if let Some(policy) = &client.rate_limit {
            c.require(
                policy_ids.contains(policy),
                format!("{path}.rate_limit"),
                "names no configured policy",
            );
        }
        for (operation, limit) in &client.quota {
            let qpath = format!("{path}.quota.{operation}");
            if !QUOTA_OPERATIONS.contains(&operation.as_str()) {
                c.at(
                    qpath.clone(),
                    format!("unknown operation; known: {}", QUOTA_OPERATIONS.join(", ")),
                );
            }
            c.require(
                (1..=1000).contains(&limit.limit),
                format!("{qpath}.limit"),
                "must be in 1..=1000",
            );
            c.duration(
                &format!("{qpath}.window"),
                limit.window,
                Millis::from_secs(1),
                Millis::from_secs(300),
            );
        }
        c.require(
            client.max_connections >= 1,
            format!("{path}.max_connections"),
            "must be at least 1",
        );
        for (j, cidr) in client.ip_allowlist.iter().enumerate() {
            if let Err(message) = parse_cidr(cidr) {
                c.at(format!("{path}.ip_allowlist[{j}]"), message);
            }
        }
        if let Some(statuses) = &client.ban_statuses {
            crate::gateway::validate_ban_statuses(c, &format!("{path}.ban_statuses"), statuses);
        }
        if let Some(ports) = &client.allowed_ports {
            crate::gateway::validate_ports(c, &format!("{path}.allowed_ports"), ports);
        }
        match client.rotation {
            Some(ClientRotation::EveryRequests(n)) if !(1..=MAX_ROTATE_REQUESTS).contains(&n) => {
                c.at(
                    format!("{path}.rotation.every_requests"),
                    format!("must be in 1..={MAX_ROTATE_REQUESTS}"),
                );
            }
            Some(ClientRotation::Every(every)) => c.duration(
                &format!("{path}.rotation.every"),
                every,
                Millis::from_secs(1),
                MAX_ROTATE_EVERY,
            ),
            _ => {}
        }
    }
}

/// The blocks of a CIDR list of a loaded configuration (every entry was checked with
/// [`parse_cidr`] at load, so none is dropped here).
pub fn parse_cidrs(list: &[String]) -> Vec<(std::net::IpAddr, u8)> {
    list.iter()
        .filter_map(|cidr| parse_cidr(cidr).ok())
        .collect()
}

/// `addr/prefix` (a bare address means a single host). The one CIDR parser: the
/// configuration checks with it and the gateway builds its blocks with it.
pub fn parse_cidr(text: &str) -> Result<(std::net::IpAddr, u8), String> {
    let (addr, prefix) = match text.split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (text, None),
    };
    let addr: std::net::IpAddr = addr
        .parse()
        .map_err(|_| format!("{text:?} is not an IP address or CIDR block"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(prefix) => prefix
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(|| format!("{text:?} has an invalid prefix length"))?,
    };
    Ok((addr, prefix))
}

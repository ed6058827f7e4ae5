//! Checks that need more than one key (or more than a type), and secret resolution.
//!
//! Every problem is collected with its key path, so one load reports all of them.

use super::duration::Millis;
use super::env::Env;
use super::error::Problem;
use super::model::*;
use super::secrets::{resolve, resolve_hash};
use super::target::{TargetUrl, split_host_port};
use crate::provider::entry::EntryDefaults;
use crate::provider::text::parse_line;
use proxypool_core::{ClientId, Protocol};
use std::collections::HashSet;
use std::path::Path;

/// Quota operations a client may have limits for.
pub const QUOTA_OPERATIONS: &[&str] = &["extract"];

struct Check<'a> {
    problems: Vec<Problem>,
    base_dir: &'a Path,
    env: &'a Env,
}

impl Check<'_> {
    fn at(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            env_var: None,
            message: message.into(),
        });
    }

    fn require(&mut self, ok: bool, path: impl Into<String>, message: &str) {
        if !ok {
            self.at(path, message);
        }
    }

    fn duration(&mut self, path: &str, value: Millis, min: Millis, max: Millis) {
        if value < min || value > max {
            self.at(
                path,
                format!("must be between {min} and {max}, not {value}"),
            );
        }
    }
}

/// Validates `config` in place, filling resolved secrets and parsed URLs.
pub(crate) fn validate(config: &mut Config, base_dir: &Path, env: &Env) -> Vec<Problem> {
    let mut c = Check {
        problems: Vec::new(),
        base_dir,
        env,
    };
    store(&mut c, &mut config.store);
    quota(&mut c, &mut config.quota);
    tuning(&mut c, config);
    worker_tokens(&mut c, &mut config.worker_tokens);
    let policy_ids = policies(&mut c, &config.policies);
    let upstream_ids = upstreams(&mut c, &mut config.upstreams, config.checker.timeout);
    clients(&mut c, &mut config.clients, &upstream_ids, &policy_ids);
    c.problems
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
    match resolve(
        store.password_env.as_deref(),
        store.password_file.as_deref(),
        c.base_dir,
        c.env,
    ) {
        Ok(password) => store.password = password,
        Err(message) => c.at("store.password_env", message),
    }
    if store.kind == StoreKind::Memory && store.password.is_some() {
        c.at("store.password_env", "the memory store takes no password");
    }
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

fn quota(c: &mut Check<'_>, quota: &mut QuotaConfig) {
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
    match resolve(
        quota.password_env.as_deref(),
        quota.password_file.as_deref(),
        c.base_dir,
        c.env,
    ) {
        Ok(password) => quota.password = password,
        Err(message) => c.at("quota.password_env", message),
    }
    if !matches!(quota.kind, QuotaKind::Postgres { .. }) && quota.password.is_some() {
        c.at(
            "quota.password_env",
            "only a postgres quota takes a password",
        );
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
        o.renew_before < o.lease && o.renew_before > o.interval,
        "ownership.renew_before",
        "must be shorter than ownership.lease and longer than ownership.interval (or leases lapse between rounds)",
    );
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
        match resolve_hash(
            token.token_hash.as_ref(),
            token.token_env.as_deref(),
            token.token_file.as_deref(),
            &owner,
            c.base_dir,
            c.env,
        ) {
            Ok(Some(hash)) => token.hash = Some(hash),
            Ok(None) => c.at(
                format!("{path}.token_env"),
                "set one of token_hash, token_env or token_file",
            ),
            Err(message) => c.at(format!("{path}.token_env"), message),
        }
    }
}

fn policies(c: &mut Check<'_>, policies: &[PolicyConfig]) -> HashSet<String> {
    let mut ids = HashSet::new();
    for (i, policy) in policies.iter().enumerate() {
        let path = format!("policies[{i}]");
        if policy.id.trim().is_empty() || !ids.insert(policy.id.clone()) {
            c.at(format!("{path}.id"), "must be present and unique");
        }
        if policy.hard_lockout == Some(Millis(0)) {
            c.at(format!("{path}.hard_lockout"), "must be at least 1ms");
        }
        let options = proxypool_throttle::EngineOptions::default();
        if let Err(e) = proxypool_throttle::BucketLimits::from_policy(
            &policy.id,
            &policy.to_throttle(),
            &options,
        ) {
            c.at(path, e.to_string());
        }
    }
    ids
}

impl PolicyConfig {
    /// The throttle crate's form of this policy.
    pub fn to_throttle(&self) -> proxypool_throttle::Policy {
        let mut policy = proxypool_throttle::Policy::new(self.requests_per_second, self.burst)
            .with_id(self.id.clone());
        if let Some(lockout) = self.hard_lockout {
            policy = policy.with_hard_lockout(lockout.as_duration());
        }
        if let Some(max) = self.max_soft_violations {
            policy = policy.with_max_soft_violations(max);
        }
        policy
    }
}

fn upstreams(
    c: &mut Check<'_>,
    upstreams: &mut [UpstreamConfig],
    check_timeout: Millis,
) -> HashSet<proxypool_core::UpstreamId> {
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
            match resolve(
                creds.password_env.as_deref(),
                creds.password_file.as_deref(),
                c.base_dir,
                c.env,
            ) {
                Ok(Some(password)) => creds.password = Some(password),
                Ok(None) => c.at(
                    format!("{cpath}.password_env"),
                    "set password_env or password_file",
                ),
                Err(message) => c.at(format!("{cpath}.password_env"), message),
            }
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
                Some(url) => {
                    if let Err(message) = TargetUrl::parse(url) {
                        c.at(format!("{path}.url"), message);
                    }
                }
            }
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
            match resolve(
                p.authorization_env.as_deref(),
                p.authorization_file.as_deref(),
                c.base_dir,
                c.env,
            ) {
                Ok(value) => p.authorization = value,
                Err(message) => c.at(format!("{path}.authorization_env"), message),
            }
        }
        ProviderKind::Static => {
            c.require(
                p.url.is_none() && p.format.is_none(),
                format!("{path}.url"),
                "a static provider takes no url or format",
            );
            c.require(
                p.authorization_env.is_none() && p.authorization_file.is_none(),
                format!("{path}.authorization_env"),
                "a static provider takes no authorization",
            );
            c.require(
                !p.proxies.is_empty(),
                format!("{path}.proxies"),
                "a static provider needs at least one proxy",
            );
            let defaults = EntryDefaults {
                protocol: Protocol::Http,
                region: None,
                carrier: None,
                credentials: None,
            };
            for (j, entry) in p.proxies.iter().enumerate() {
                let epath = format!("{path}.proxies[{j}]");
                match parse_line(entry, &defaults) {
                    Some(Ok(candidate)) if candidate.credentials.is_some() => c.at(
                        epath,
                        "credentials may not be written inline; use the upstream's [credentials]",
                    ),
                    Some(Ok(_)) => {}
                    Some(Err(reason)) => {
                        c.at(epath, format!("not a proxy entry ({})", reason.as_str()))
                    }
                    None => c.at(epath, "empty entry"),
                }
            }
        }
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
    upstream_ids: &HashSet<proxypool_core::UpstreamId>,
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
        match resolve_hash(
            client.api_token_hash.as_ref(),
            client.api_token_env.as_deref(),
            client.api_token_file.as_deref(),
            &format!("api_token:{}", client.id),
            c.base_dir,
            c.env,
        ) {
            Ok(hash) => client.api_token = hash,
            Err(message) => c.at(format!("{path}.api_token_env"), message),
        }
        match resolve_hash(
            client.gateway_password_hash.as_ref(),
            client.gateway_password_env.as_deref(),
            client.gateway_password_file.as_deref(),
            &format!("gateway_password:{}", client.id),
            c.base_dir,
            c.env,
        ) {
            Ok(hash) => client.gateway_password = hash,
            Err(message) => c.at(format!("{path}.gateway_password_env"), message),
        }
        let has_api = client.api_token_hash.is_some()
            || client.api_token_env.is_some()
            || client.api_token_file.is_some();
        let has_gateway = client.gateway_password_hash.is_some()
            || client.gateway_password_env.is_some()
            || client.gateway_password_file.is_some();
        c.require(
            has_api || has_gateway,
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
    }
}

/// `addr/prefix` (a bare address means a single host).
pub fn parse_cidr(text: &str) -> Result<(std::net::IpAddr, u8), String> {
    let (addr, prefix) = text.split_once('/').unwrap_or((text, ""));
    let addr: std::net::IpAddr = addr
        .parse()
        .map_err(|_| format!("{text:?} is not an IP address or CIDR block"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = if prefix.is_empty() {
        max
    } else {
        prefix
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(|| format!("{text:?} has an invalid prefix length"))?
    };
    Ok((addr, prefix))
}

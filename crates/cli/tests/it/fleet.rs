//! The gateway fleet end to end, as an operator runs it: two `proxypool controller`
//! processes on a private Redis and PostgreSQL, three `proxypool gateway` processes
//! (`gw-a`, `gw-b`, `gw-c`, each with `[gateway.fleet]`), and HAProxy in TCP mode spreading
//! fresh connections round-robin over the gateways' HTTP listeners and, in a second
//! frontend, over their SOCKS5 listeners. Every request below is one `curl` process, so one
//! fresh connection through HAProxy, landing on whichever gateway is next.
//!
//! 1. Sticky sessions hold fleet-wide: every session keeps one exit over HTTP, `CONNECT` and
//!    SOCKS5, the sessions are owned by more than one gateway, and the others relayed.
//! 2. A rotation key (`-rotate-4`) advances once per request fleet-wide.
//! 3. A gateway killed with SIGKILL (HAProxy is told nothing; its health checks find out):
//!    sessions of the live owners keep their exits; those of the dead one answer
//!    `X-Proxypool-Session: reassigned` once and then keep their new exit; no request hangs.
//! 4. Requests without a key fail no more after the kill than before (none).
//!
//! Which gateway owns a session is read from its exit: the gateways hold disjoint proxies,
//! and each one's exits are learned first from requests sent to it directly without a key
//! (those are served where they land).

use crate::common::exposition::total;
use crate::common::split::{
    FleetPorts, fleet_controller_config, fleet_gateway_config, migrate_quota,
};
use crate::common::{
    Proc, Scratch, curl, curl_or_skip, eventually, free_port, gateway_admin_header,
    gateway_proxies, sim_upstream, sim_vendor,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PROXIES: usize = 12;
const GATEWAYS: [&str; 3] = ["gw-a", "gw-b", "gw-c"];
const SESSIONS: usize = 10;
const PER_SESSION: usize = 20;
const UNKEYED: usize = 50;
/// The longest one request may take, client retries included: the hop's timeouts (connect
/// 1 s, answer 3 s) and one retry on the next owner fit well inside it.
const BOUND: Duration = Duration::from_secs(6);
const PASSWORD: &str = "acme-gateway-password";

const ENV: [(&str, &str); 6] = [
    ("WORKER_TOKEN_A", "fleet-worker-token-a"),
    ("WORKER_TOKEN_B", "fleet-worker-token-b"),
    ("WORKER_TOKEN_C", "fleet-worker-token-c"),
    ("ACME_TOKEN", "acme-api-token-0001"),
    ("ACME_PASSWORD", PASSWORD),
    ("QUOTA_PASSWORD", "quota-role-password"),
];

/// How a request reaches the origin through a proxy listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// An absolute-form GET to the HTTP listener.
    Http,
    /// A `CONNECT` tunnel through the HTTP listener, then a GET inside it.
    Connect,
    /// A SOCKS5 `CONNECT`, then a GET inside it.
    Socks5,
}

const MODES: [Mode; 3] = [Mode::Http, Mode::Connect, Mode::Socks5];

/// The listeners a request is sent to: HAProxy's frontends or one gateway's own.
#[derive(Debug, Clone, Copy)]
struct Entry {
    http: u16,
    socks5: u16,
}

/// What one request got.
#[derive(Debug, Clone)]
struct Answer {
    exit: String,
    /// `X-Proxypool-Session` (absent over SOCKS5, which has no headers).
    session: Option<String>,
    took: Duration,
}

/// One GET of `origin` through `entry` as `user`, on a fresh connection. A connection
/// the balancer could not hand to a gateway (refused, or closed before any answer) is
/// tried again, up to three times, as a real client would; anything else is the answer.
fn fetch(entry: Entry, origin: &str, mode: Mode, user: &str) -> Result<Answer, String> {
    let started = Instant::now();
    let proxy = format!("http://{user}:{PASSWORD}@127.0.0.1:{}", entry.http);
    let socks = format!("127.0.0.1:{}", entry.socks5);
    let credentials = format!("{user}:{PASSWORD}");
    let mut args = vec!["-sS", "-i", "--max-time", "5"];
    match mode {
        Mode::Http => args.extend(["-x", proxy.as_str()]),
        Mode::Connect => args.extend(["-p", "-x", proxy.as_str()]),
        Mode::Socks5 => args.extend([
            "--socks5-hostname",
            socks.as_str(),
            "--proxy-user",
            credentials.as_str(),
        ]),
    }
    args.push(origin);
    let mut tries = 0;
    loop {
        tries += 1;
        let output = Command::new("curl")
            .args(&args)
            .output()
            .expect("curl runs");
        let code = output.status.code().unwrap_or(-1);
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        // 7: refused; 52: closed without a reply; 97: the SOCKS5 handshake cut off.
        if matches!(code, 7 | 52 | 97) && tries < 3 {
            continue;
        }
        let took = started.elapsed();
        if code != 0 {
            return Err(format!(
                "{mode:?} as {user}: curl {code} after {tries} tries, {took:?}: {} {text}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let (head, body) = text.rsplit_once("\r\n\r\n").unwrap_or(("", &text));
        let session = head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("x-proxypool-session")
                .then(|| value.trim().to_owned())
        });
        let echo: Value = serde_json::from_str(body)
            .map_err(|_| format!("{mode:?} as {user}: not the origin's answer: {text}"))?;
        let exit = echo["exit"]
            .as_str()
            .ok_or_else(|| format!("{mode:?} as {user}: no exit in {text}"))?
            .to_owned();
        return Ok(Answer {
            exit,
            session,
            took,
        });
    }
}

/// One gateway of the fleet and, while it runs, its process.
struct Member {
    name: &'static str,
    ports: FleetPorts,
    process: Option<Proc>,
}

impl Member {
    fn admin(&self) -> String {
        format!("127.0.0.1:{}", self.ports.admin)
    }

    fn entry(&self) -> Entry {
        Entry {
            http: self.ports.http,
            socks5: self.ports.socks5,
        }
    }

    /// Its `/metrics` text (empty when it does not answer).
    fn metrics(&self) -> String {
        let [flag, header] = gateway_admin_header();
        let (code, body) = curl(&[
            "-f",
            &flag,
            &header,
            &format!("http://{}/metrics", self.admin()),
        ]);
        if code == 0 { body } else { String::new() }
    }

    fn metric(&self, name: &str, with: &[&str]) -> f64 {
        total(&self.metrics(), name, with)
    }

    fn kill(&mut self) {
        let mut process = self.process.take().expect("running");
        process.signal("KILL");
        process.wait(Duration::from_secs(10));
    }
}

/// HAProxy in the foreground, killed on drop.
struct Balancer {
    child: Child,
    front: Entry,
    stats: u16,
    stderr: PathBuf,
}

/// The HAProxy binary (Debian installs it in /usr/sbin, off some users' PATH); `None`
/// (the test skips) when it is not installed, a failure under `CI=true`.
fn haproxy_or_skip() -> Option<&'static str> {
    let found = ["haproxy", "/usr/sbin/haproxy"]
        .into_iter()
        .find(|program| {
            Command::new(program)
                .arg("-v")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "haproxy is required under CI (scripts/test.sh installs it)"
        );
        eprintln!("\n*** SKIPPED: haproxy is not installed (scripts/test.sh installs it) ***\n");
    }
    found
}

impl Balancer {
    /// TCP round-robin over `members`' HTTP listeners and, in a second frontend, their
    /// SOCKS5 listeners; a connect check every 500 ms takes a dead server out, and a
    /// connection that finds one dead before that is dispatched to another.
    fn start(program: &str, dir: &Path, members: &[Member]) -> Balancer {
        let front = Entry {
            http: free_port(),
            socks5: free_port(),
        };
        let stats = free_port();
        let servers = |port: fn(&FleetPorts) -> u16| {
            members
                .iter()
                .map(|m| format!("  server {} 127.0.0.1:{}\n", m.name, port(&m.ports)))
                .collect::<String>()
        };
        let config = format!(
            "global\n  maxconn 4096\n\
             defaults\n  mode tcp\n  timeout connect 1s\n  timeout client 30s\n  timeout server 30s\n  retries 2\n  option redispatch\n\
             frontend http_in\n  bind 127.0.0.1:{http}\n  default_backend http_gateways\n\
             frontend socks_in\n  bind 127.0.0.1:{socks}\n  default_backend socks_gateways\n\
             backend http_gateways\n  balance roundrobin\n  option tcp-check\n  default-server check inter 500ms fall 2 rise 1\n{http_servers}\
             backend socks_gateways\n  balance roundrobin\n  option tcp-check\n  default-server check inter 500ms fall 2 rise 1\n{socks_servers}\
             listen stats\n  mode http\n  bind 127.0.0.1:{stats}\n  stats enable\n  stats uri /stats\n",
            http = front.http,
            socks = front.socks5,
            http_servers = servers(|p| p.http),
            socks_servers = servers(|p| p.socks5),
        );
        let file = dir.join("haproxy.cfg");
        std::fs::write(&file, config).unwrap();
        let stderr = dir.join("haproxy.stderr");
        let child = Command::new(program)
            .args(["-f", file.to_str().unwrap(), "-db"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("haproxy starts");
        Balancer {
            child,
            front,
            stats,
            stderr,
        }
    }

    /// `(backend, server) -> status` (`UP`, `DOWN`, ...) from HAProxy's statistics.
    fn statuses(&self) -> BTreeMap<(String, String), String> {
        let (code, csv) = curl(&[&format!("http://127.0.0.1:{}/stats;csv", self.stats)]);
        let mut statuses = BTreeMap::new();
        if code != 0 {
            return statuses;
        }
        let mut lines = csv.lines();
        let header: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let Some(column) = header.iter().position(|c| *c == "status") else {
            return statuses;
        };
        for line in lines {
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() > column && fields[0].ends_with("_gateways") {
                statuses.insert(
                    (fields[0].to_owned(), fields[1].to_owned()),
                    fields[column].to_owned(),
                );
            }
        }
        statuses
    }

    /// Whether `server` has `status` in both backends.
    fn server_is(&self, server: &str, status: &str) -> bool {
        let statuses = self.statuses();
        let of_server: Vec<&String> = statuses
            .iter()
            .filter(|((_, s), _)| s == server)
            .map(|(_, v)| v)
            .collect();
        of_server.len() == 2 && of_server.iter().all(|s| s.starts_with(status))
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            eprintln!("haproxy's stderr:\n{log}");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `UNKEYED` requests without a key through `front`, the modes in turn: the failures.
fn unkeyed(front: Entry, origin: &str) -> Vec<String> {
    (0..UNKEYED)
        .filter_map(|i| match fetch(front, origin, MODES[i % 3], "acme") {
            Ok(answer) if answer.took < BOUND => None,
            Ok(answer) => Some(format!("took {:?}", answer.took)),
            Err(e) => Some(e),
        })
        .collect()
}

/// `n` requests per session, in parallel over the sessions (one after the other within
/// each), the first over HTTP and then the modes in turn: each session's answers in order.
fn session_rounds(front: Entry, origin: &str, n: usize) -> Vec<Vec<Answer>> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..SESSIONS)
            .map(|s| {
                scope.spawn(move || {
                    let user = format!("acme-session-fleet{s}");
                    (0..n)
                        .map(|i| {
                            let answer = fetch(front, origin, MODES[i % 3], &user)
                                .unwrap_or_else(|e| panic!("request {i} of session {s}: {e}"));
                            assert!(
                                answer.took < BOUND,
                                "request {i} of session {s} took {:?}",
                                answer.took
                            );
                            answer
                        })
                        .collect()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// The one exit of a session's answers (it fails when there are several).
fn one_exit(session: usize, answers: &[Answer]) -> String {
    let exits: BTreeSet<&str> = answers.iter().map(|a| a.exit.as_str()).collect();
    assert_eq!(exits.len(), 1, "session {session} left through {exits:?}");
    answers[0].exit.clone()
}

/// The `X-Proxypool-Session` values of the answers that carry one, after the first `skip`.
fn outcomes(answers: &[Answer], skip: usize) -> BTreeSet<&str> {
    answers
        .iter()
        .skip(skip)
        .filter_map(|a| a.session.as_deref())
        .collect()
}

#[test]
fn three_gateways_behind_haproxy_share_sessions_and_rotation_and_survive_a_killed_member() {
    if !curl_or_skip() {
        return;
    }
    let Some(haproxy) = haproxy_or_skip() else {
        return;
    };
    let Some(redis) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let Some(pg) = proxypool_testkit::private_postgres_or_skip() else {
        return;
    };
    let admin_url = pg.create_database("proxypool_split").unwrap();
    let (_runtime, sim) = sim_vendor(PROXIES);
    let upstream = sim_upstream(&sim);
    let origin = sim.origin().url("/");
    let scratch = Scratch::new("fleet");
    let mut env: Vec<(&str, &str)> = ENV.to_vec();
    env.push(("PG_ADMIN_URL", admin_url.as_str()));

    // Two controllers on one store: either answers the gateways and lists the fleet.
    let controls = [free_port(), free_port()];
    let configs: Vec<String> = controls
        .iter()
        .enumerate()
        .map(|(i, control)| {
            let file = scratch.write(
                &format!("ctl-{i}.toml"),
                &fleet_controller_config(
                    &redis,
                    pg.port(),
                    *control,
                    free_port(),
                    PROXIES,
                    &upstream,
                ),
            );
            file.to_str().unwrap().to_owned()
        })
        .collect();
    migrate_quota(&configs[0], &env);
    let _controllers: Vec<Proc> = configs
        .iter()
        .enumerate()
        .map(|(i, config)| {
            Proc::start(
                &format!("ctl-{i}"),
                &["controller", "--config", config],
                &env,
                &scratch.path,
            )
        })
        .collect();

    // Three members; gw-b lists the controllers the other way round.
    let mut members: Vec<Member> = GATEWAYS
        .iter()
        .map(|&name| {
            let ports = FleetPorts::free();
            let order = if name == "gw-b" {
                [controls[1], controls[0]]
            } else {
                controls
            };
            let file = scratch.write(
                &format!("{name}.toml"),
                &fleet_gateway_config(name, &order, ports, &sim),
            );
            let process = Proc::start(
                name,
                &["gateway", "--config", file.to_str().unwrap()],
                &env,
                &scratch.path,
            );
            Member {
                name,
                ports,
                process: Some(process),
            }
        })
        .collect();
    let share = (PROXIES / GATEWAYS.len()) as u64;
    let ready = eventually(
        "each gateway holds its share of the proxies and sees a fleet of 3",
        Duration::from_secs(90),
        || {
            members.iter().all(|m| {
                gateway_proxies(&m.admin()) == share
                    && m.metric("proxypool_gateway_fleet_members", &[]) == 3.0
            })
        },
    );
    eprintln!("fleet of 3 ready after {ready:?}");

    let balancer = Balancer::start(haproxy, &scratch.path, &members);
    eventually(
        "HAProxy sees every gateway up",
        Duration::from_secs(30),
        || GATEWAYS.iter().all(|g| balancer.server_is(g, "UP")),
    );
    let front = balancer.front;

    // Each gateway's own exits, from unkeyed requests sent to it directly.
    let mut owner_of_exit: BTreeMap<String, &'static str> = BTreeMap::new();
    for member in &members {
        let mut exits = BTreeSet::new();
        eventually(
            &format!("{}'s {share} exits seen", member.name),
            Duration::from_secs(30),
            || {
                if let Ok(answer) = fetch(member.entry(), &origin, Mode::Http, "acme") {
                    exits.insert(answer.exit);
                }
                exits.len() as u64 == share
            },
        );
        for exit in exits {
            let previous = owner_of_exit.insert(exit.clone(), member.name);
            assert!(previous.is_none(), "{exit} through two gateways");
        }
    }

    // Unkeyed traffic before the kill: served where it lands, none fails.
    let failed_before = unkeyed(front, &origin);
    assert!(
        failed_before.is_empty(),
        "before the kill: {failed_before:#?}"
    );

    // 1. Sessions: one exit each, whichever gateway each connection lands on.
    let rounds = session_rounds(front, &origin, PER_SESSION);
    let mut exit_of_session = Vec::new();
    let mut owner_of_session = Vec::new();
    for (s, answers) in rounds.iter().enumerate() {
        let exit = one_exit(s, answers);
        // A first use is `new`, or `reassigned` when the key's owner changed while the
        // fleet formed (the owner cannot tell a moved key it never pinned from a fresh one).
        assert!(
            matches!(answers[0].session.as_deref(), Some("new" | "reassigned")),
            "session {s}: {answers:?}"
        );
        assert_eq!(
            outcomes(answers, 1),
            BTreeSet::from(["pinned"]),
            "session {s}: {answers:?}"
        );
        let owner = *owner_of_exit
            .get(&exit)
            .unwrap_or_else(|| panic!("session {s}'s exit {exit} is no gateway's"));
        exit_of_session.push(exit);
        owner_of_session.push(owner);
    }
    let owners: BTreeSet<&str> = owner_of_session.iter().copied().collect();
    eprintln!("sessions' owners: {owner_of_session:?}");
    assert!(
        owners.len() >= 2,
        "every session on one gateway: {owners:?}"
    );
    let relayed: f64 = members
        .iter()
        .map(|m| m.metric("proxypool_gateway_fleet_relayed_total", &[]))
        .sum();
    assert!(relayed > 0.0, "no request was relayed");
    let served: f64 = members
        .iter()
        .map(|m| m.metric("proxypool_gateway_fleet_served_total", &[]))
        .sum();
    eprintln!("{relayed} requests relayed, {served} served for a peer");
    for kind in ["http", "connect", "socks5"] {
        let label = format!("kind=\"{kind}\"");
        let relayed: f64 = members
            .iter()
            .map(|m| {
                m.metric(
                    "proxypool_gateway_fleet_relayed_total",
                    &[label.as_str(), "outcome=\"ok\""],
                )
            })
            .sum();
        assert!(relayed > 0.0, "no {kind} request was relayed");
    }

    // 2. A rotation key moves once per request fleet-wide: 12 requests, 3 runs of 4.
    let rotated: Vec<String> = (0..12)
        .map(|i| {
            fetch(front, &origin, Mode::Http, "acme-rotate-4")
                .unwrap_or_else(|e| panic!("rotation request {i}: {e}"))
                .exit
        })
        .collect();
    for (run, four) in rotated.chunks(4).enumerate() {
        assert!(
            four.iter().all(|e| *e == four[0]),
            "run {run} of 4 changed exits: {rotated:?}"
        );
    }
    assert!(
        rotated[0] != rotated[4] && rotated[4] != rotated[8],
        "the rotation did not move every 4 requests: {rotated:?}"
    );
    let rotation_owners: BTreeSet<Option<&&str>> =
        rotated.iter().map(|e| owner_of_exit.get(e)).collect();
    assert_eq!(rotation_owners.len(), 1, "one owner picks: {rotated:?}");

    // 3. Kill the gateway that owns the most sessions; HAProxy is told nothing.
    let victim = *owners
        .iter()
        .max_by_key(|o| owner_of_session.iter().filter(|x| x == o).count())
        .unwrap();
    let index = members.iter().position(|m| m.name == victim).unwrap();
    members[index].kill();
    eprintln!("killed {victim}");
    let after = session_rounds(front, &origin, 6);
    for (s, answers) in after.iter().enumerate() {
        let exit = one_exit(s, answers);
        if owner_of_session[s] == victim {
            assert_eq!(
                answers[0].session.as_deref(),
                Some("reassigned"),
                "session {s} of the dead gateway: {answers:?}"
            );
            assert_eq!(
                outcomes(answers, 1),
                BTreeSet::from(["pinned"]),
                "session {s}: {answers:?}"
            );
        } else {
            assert_eq!(
                exit, exit_of_session[s],
                "session {s} of a live gateway moved"
            );
            assert_eq!(
                outcomes(answers, 0),
                BTreeSet::from(["pinned"]),
                "session {s}: {answers:?}"
            );
        }
    }

    // 4. Unkeyed traffic after the kill fails no more than before: not at all.
    let failed_after = unkeyed(front, &origin);
    assert!(failed_after.is_empty(), "after the kill: {failed_after:#?}");
    eventually(
        "HAProxy marks the dead gateway down",
        Duration::from_secs(10),
        || balancer.server_is(victim, "DOWN"),
    );
    drop(balancer);
    drop(members);
    drop(redis);
    drop(pg);
}

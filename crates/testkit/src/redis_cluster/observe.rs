//! Looking at the cluster: what every live node says (`CLUSTER INFO`, `CLUSTER NODES`, its
//! replication link), whether they all agree, and the poll that looks until they do and a
//! condition holds, or fails with every node's log tail.

use std::time::{Duration, Instant};

use crate::error::{Result, TestkitError};
use crate::redis::{RespConnection, RespValue};

use super::topology::View;
use super::{CLUSTER_SLOTS, POLL_INTERVAL, RedisCluster};

/// What one live node said when the guard looked.
#[derive(Debug)]
pub(super) struct Report {
    pub(super) port: u16,
    pub(super) state_ok: bool,
    pub(super) view: View,
    /// For a node that is a replica in its own eyes: whether its replication link is up.
    pub(super) link_up: Option<bool>,
}

/// One look at every live node.
#[derive(Debug)]
pub(super) struct Observation {
    pub(super) reports: Vec<Report>,
    /// Live nodes that did not answer, and why.
    pub(super) silent: Vec<(u16, String)>,
}

pub(super) fn text_reply(value: RespValue, what: &str) -> std::result::Result<String, String> {
    value
        .as_text()
        .ok_or_else(|| format!("{what} answered {value:?}"))
}

pub(super) fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
}

pub(super) fn look_at(port: u16) -> std::result::Result<Report, String> {
    let mut connection =
        RespConnection::connect("127.0.0.1", port).map_err(|error| error.to_string())?;
    let mut ask = |args: &[&str]| {
        let reply = connection
            .command(args)
            .map_err(|error| format!("{}: {error}", args.join(" ")))?;
        text_reply(reply, &args.join(" "))
    };
    let info = ask(&["CLUSTER", "INFO"])?;
    let view = View::parse(port, &ask(&["CLUSTER", "NODES"])?)?;
    let myself_replica = view
        .by_port(port)
        .is_some_and(|line| !line.primary && line.primary_id.is_some());
    let link_up = if myself_replica {
        let replication = ask(&["INFO", "replication"])?;
        Some(field(&replication, "master_link_status") == Some("up"))
    } else {
        None
    };
    Ok(Report {
        port,
        state_ok: field(&info, "cluster_state") == Some("ok"),
        view,
        link_up,
    })
}

impl Observation {
    /// The view all live nodes share, or why there is none: every live node answered, says
    /// `cluster_state:ok`, agrees with the others on the owner of every slot (all 16384
    /// covered) and on the role (and primary) of every live node, and every replica among
    /// them has its replication link up.
    pub(super) fn agreed(&self, live: &[u16]) -> std::result::Result<&View, String> {
        if let Some((port, why)) = self.silent.first() {
            return Err(format!("node {port} did not answer: {why}"));
        }
        let first = self
            .reports
            .first()
            .ok_or_else(|| "no live node to ask".to_owned())?;
        for report in &self.reports {
            if !report.state_ok {
                return Err(format!(
                    "node {} says cluster_state is not ok; {}",
                    report.port,
                    report.view.summary()
                ));
            }
            if report.link_up == Some(false) {
                return Err(format!(
                    "replica {} has not synced with its primary yet",
                    report.port
                ));
            }
            if report.view.slot_map() != first.view.slot_map() {
                return Err(format!(
                    "nodes disagree on the slots: {} sees {}, {} sees {}",
                    first.port,
                    first.view.summary(),
                    report.port,
                    report.view.summary()
                ));
            }
            for &port in live {
                let (theirs, ours) = (report.view.role_of(port), first.view.role_of(port));
                if theirs != ours {
                    return Err(format!(
                        "nodes disagree on node {port}: {} sees {ours:?}, {} sees {theirs:?}",
                        first.port, report.port
                    ));
                }
            }
        }
        let covered = first.view.covered_slots();
        if covered != usize::from(CLUSTER_SLOTS) {
            return Err(format!(
                "{covered} of {CLUSTER_SLOTS} slots covered; {}",
                first.view.summary()
            ));
        }
        Ok(&first.view)
    }
}

impl RedisCluster {
    pub(super) fn observe(&self) -> Observation {
        let mut observation = Observation {
            reports: Vec::new(),
            silent: Vec::new(),
        };
        for port in self.live_ports() {
            match look_at(port) {
                Ok(report) => observation.reports.push(report),
                Err(why) => observation.silent.push((port, why)),
            }
        }
        observation
    }

    /// Looks at the cluster every [`POLL_INTERVAL`] until the live nodes agree (see
    /// [`Observation::agreed`]) and `check` accepts their shared view, or `timeout` passes.
    pub(super) fn poll<T>(
        &self,
        waiting_for: &str,
        timeout: Duration,
        mut check: impl FnMut(&View, &[u16]) -> std::result::Result<T, String>,
    ) -> Result<(T, View)> {
        let started = Instant::now();
        loop {
            let live = self.live_ports();
            let observation = self.observe();
            let last_seen = match observation.agreed(&live) {
                Ok(view) => match check(view, &live) {
                    Ok(value) => return Ok((value, view.clone())),
                    Err(why) => why,
                },
                Err(why) => why,
            };
            if started.elapsed() >= timeout {
                return Err(TestkitError::ClusterNotReady {
                    waiting_for: waiting_for.to_owned(),
                    waited: started.elapsed(),
                    last_seen,
                    log_tails: self.log_tails(),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// `CLUSTER NODES` of the live node that knows the latest configuration epoch.
    pub(super) fn freshest_view(&self) -> Result<View> {
        let mut freshest: Option<View> = None;
        let mut failures = Vec::new();
        for port in self.live_ports() {
            let answer = RespConnection::connect("127.0.0.1", port)
                .and_then(|mut connection| connection.command(&["CLUSTER", "NODES"]))
                .map_err(|error| error.to_string())
                .and_then(|reply| text_reply(reply, "CLUSTER NODES"))
                .and_then(|text| View::parse(port, &text));
            match answer {
                Ok(view)
                    if freshest
                        .as_ref()
                        .is_none_or(|best| view.freshness() > best.freshness()) =>
                {
                    freshest = Some(view);
                }
                Ok(_) => {}
                Err(why) => failures.push(format!("{port}: {why}")),
            }
        }
        freshest.ok_or_else(|| TestkitError::Cluster {
            message: format!(
                "no live node answered CLUSTER NODES ({})",
                failures.join("; ")
            ),
        })
    }
}

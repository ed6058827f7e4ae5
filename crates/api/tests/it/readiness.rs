//! `GET /readyz` under load, over real sockets: however many probes arrive, the stores
//! see at most one check at a time and about one per second (counted by a quota wrapper),
//! the result keeps its meaning (503 naming the store that is down), and a flood from one
//! address is refused by the per-IP shield while `/healthz` is not.

use crate::common::*;
use async_trait::async_trait;
use proxypool_api::ShieldSettings;
use proxypool_quota::{
    Charge, InvalidCommand, OperationLimits, QuotaCommand, QuotaDecision, QuotaPort, SettleOutcome,
    Settlement,
};
use proxypool_throttle::Policy;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts the readiness reads that reach the quota; each takes a while, so concurrent
/// probes overlap with it, and it can be switched to "down".
#[derive(Debug)]
struct CountingQuota {
    inner: Arc<dyn QuotaPort>,
    ready_calls: AtomicUsize,
    down: AtomicBool,
}

#[async_trait]
impl QuotaPort for CountingQuota {
    async fn consume(
        &self,
        command: &QuotaCommand,
        limits: OperationLimits,
    ) -> Result<QuotaDecision, InvalidCommand> {
        self.inner.consume(command, limits).await
    }

    async fn settle(
        &self,
        charge: &Charge,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, InvalidCommand> {
        self.inner.settle(charge, settlement).await
    }

    async fn ready(&self) -> bool {
        self.ready_calls.fetch_add(1, Ordering::SeqCst);
        // The stimulus: a check that takes a while, so that concurrent probes overlap it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        !self.down.load(Ordering::SeqCst) && self.inner.ready().await
    }
}

async fn server(policy: Policy) -> (TestServer, Arc<CountingQuota>) {
    let quota = Quota::new(QuotaKind::Memory).await;
    let counting = Arc::new(CountingQuota {
        inner: quota.port(),
        ready_calls: AtomicUsize::new(0),
        down: AtomicBool::new(false),
    });
    let setup = Setup {
        shield: ShieldSettings {
            policy,
            ..ShieldSettings::default()
        },
        quota_port: Some(counting.clone()),
        limits: one_address_limits(),
        ..Setup::default()
    }
    .with_quota(quota_config(1000));
    (TestServer::start(setup, quota).await, counting)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_probes_share_one_store_check_per_second() {
    let (server, quota) = server(Policy::new(100_000.0, 100_000.0)).await;
    let server = Arc::new(server);
    let started = Instant::now();
    // 100 at once: one check serves them all.
    let statuses = {
        let server = server.clone();
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let server = server.clone();
                tokio::spawn(async move { server.get("/readyz", None).await.status })
            })
            .collect();
        let mut out = Vec::new();
        for task in tasks {
            out.push(task.await.unwrap());
        }
        out
    };
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(
        quota.ready_calls.load(Ordering::SeqCst),
        1,
        "one shared check"
    );
    // Then one after another for a while: about one check per second.
    let mut sequential = 0;
    while started.elapsed() < Duration::from_millis(2_500) {
        assert_eq!(server.get("/readyz", None).await.status, 200);
        sequential += 1;
    }
    let checks = quota.ready_calls.load(Ordering::SeqCst);
    let bound = started.elapsed().as_secs() as usize + 1;
    assert!(
        checks <= bound,
        "{checks} store checks for {} probes in {:?} (at most {bound})",
        100 + sequential,
        started.elapsed()
    );
    eprintln!(
        "{checks} checks for {} probes in {:?}",
        100 + sequential,
        started.elapsed()
    );
}

/// How long a change of the stores may take to show: the one second a result is reused,
/// the check itself, and room for a loaded machine.
const SHOWS_WITHIN: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_going_down_shows_within_a_second_with_its_name() {
    let (server, quota) = server(Policy::new(100_000.0, 100_000.0)).await;
    assert_eq!(server.get("/readyz", None).await.status, 200);
    quota.down.store(true, Ordering::SeqCst);
    let went_down = Instant::now();
    let reply = eventually_async("/readyz answered 503", SHOWS_WITHIN, async || {
        let reply = server.get("/readyz", None).await;
        (reply.status == 503).then_some(reply)
    })
    .await;
    let message = reply.assert_error(503, "unavailable");
    assert!(message.contains("quota"), "{message}");
    eprintln!("the store down showed after {:?}", went_down.elapsed());
    quota.down.store(false, Ordering::SeqCst);
    eventually_async("/readyz answered 200 again", SHOWS_WITHIN, async || {
        (server.get("/readyz", None).await.status == 200).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readyz_flood_from_one_address_is_refused_by_the_shield() {
    let (server, quota) = server(Policy::new(5.0, 10.0)).await;
    let mut refused = 0;
    for _ in 0..50 {
        match server.get("/readyz", None).await.status {
            200 => {}
            429 => refused += 1,
            other => panic!("/readyz answered {other}"),
        }
    }
    assert!(refused >= 30, "only {refused} of 50 refused");
    assert!(quota.ready_calls.load(Ordering::SeqCst) <= 2);
    // Liveness stays outside the shield.
    assert_eq!(server.get("/healthz", None).await.status, 200);
}

//! Leadership without Redis: `LeaseLeadership` over MemoryPool's `LeaseStore` in tokio's
//! paused time (every timing below is exact virtual time, not a sleep), and the singleton
//! loops parking and resuming as a term comes and goes.

use crate::common::{T0, eventually_async, parse_config, static_upstream};
use async_trait::async_trait;
use proxypool_controller::clock::Clock;
use proxypool_controller::{
    Controller, Leadership, LeaseLeadership, LeaseOptions, OpenedStore, SharedClock, SystemClock,
    Term,
};
use proxypool_core::{
    Expectation, Lease, LeaseStore, LedgerEntry, PoolError, PoolResult, StoreIdentity, StoreLedger,
    StoreMark, UnixMillis,
};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Wall-clock milliseconds that follow tokio's (paused) clock, so the store's `now` and
/// the renewer's timers move together.
#[derive(Debug)]
struct TokioClock {
    start: Instant,
}

impl Clock for TokioClock {
    fn now(&self) -> UnixMillis {
        T0 + self.start.elapsed().as_millis() as u64
    }
}

fn tokio_clock() -> SharedClock {
    Arc::new(TokioClock {
        start: Instant::now(),
    })
}

/// MemoryPool's leases behind a switch: up, down (every call fails as a store outage
/// would), or hanging (calls never answer).
#[derive(Debug)]
struct Switched {
    pool: MemoryPool,
    mode: AtomicU8,
}

const UP: u8 = 0;
const DOWN: u8 = 1;
const HANG: u8 = 2;

impl Switched {
    fn new() -> Arc<Self> {
        Arc::new(Switched {
            pool: MemoryPool::new(MemoryPoolOptions::default()),
            mode: AtomicU8::new(UP),
        })
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    async fn gate(&self) -> PoolResult<()> {
        match self.mode.load(Ordering::SeqCst) {
            UP => Ok(()),
            DOWN => Err(PoolError::store_down("test: store down")),
            _ => std::future::pending().await,
        }
    }
}

#[async_trait]
impl LeaseStore for Switched {
    async fn try_acquire(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> PoolResult<Option<Lease>> {
        self.gate().await?;
        self.pool.try_acquire(now, name, holder, ttl_ms).await
    }

    async fn release(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        token: u64,
    ) -> PoolResult<()> {
        self.gate().await?;
        self.pool.release(now, name, holder, token).await
    }

    async fn current(&self, now: UnixMillis, name: &str) -> PoolResult<Option<Lease>> {
        self.gate().await?;
        self.pool.current(now, name).await
    }
}

fn contender(store: &Arc<Switched>, clock: &SharedClock) -> LeaseLeadership {
    LeaseLeadership::start(
        store.clone(),
        clock.clone(),
        LeaseOptions::new(TTL, CALL_TIMEOUT),
    )
}

async fn leads_within(rx: &mut watch::Receiver<Option<Term>>, bound: Duration) -> Term {
    let term = tokio::time::timeout(bound, rx.wait_for(Option::is_some))
        .await
        .expect("no term within the bound")
        .unwrap();
    term.unwrap()
}

/// Counts the moments at which two watched leaderships lead at once (checked on every
/// change of any of them).
#[derive(Debug, Clone, Default)]
struct OverlapWatch {
    all: Arc<Mutex<Vec<watch::Receiver<Option<Term>>>>>,
    violations: Arc<AtomicUsize>,
}

impl OverlapWatch {
    fn add(&self, leadership: &LeaseLeadership) {
        let mut changes = leadership.watch();
        self.all.lock().unwrap().push(changes.clone());
        let me = self.clone();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                me.check();
            }
        });
    }

    fn check(&self) {
        let all = self.all.lock().unwrap();
        if all.iter().filter(|r| r.borrow().is_some()).count() > 1 {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn violations(&self) -> usize {
        self.violations.load(Ordering::SeqCst)
    }
}

#[tokio::test(start_paused = true)]
async fn one_of_two_leads_and_a_dead_leader_is_replaced_when_its_lease_ends() {
    let store = Switched::new();
    let clock = tokio_clock();
    let a = contender(&store, &clock);
    let mut a_rx = a.watch();
    let first = leads_within(&mut a_rx, Duration::from_millis(1)).await;
    let b = contender(&store, &clock);
    let mut b_rx = b.watch();

    // A minute of renewals: A keeps term 1, B never leads.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(*a_rx.borrow_and_update(), Some(first));
    assert!(!a_rx.has_changed().unwrap());
    assert!(!b_rx.has_changed().unwrap());
    let lease = store
        .pool
        .current(clock.now(), "controller")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.holder, a.holder());

    // A dies (no release): B takes over exactly when A's last renewal runs out.
    let died = Instant::now();
    drop(a);
    let term = leads_within(&mut b_rx, TTL + Duration::from_millis(10)).await;
    let takeover = died.elapsed();
    let lease_left =
        Duration::from_millis(lease.expires_at_ms - clock.now().min(lease.expires_at_ms));
    assert!(term > first, "{term:?} after {first:?}");
    assert_eq!(lease_left, Duration::ZERO);
    assert!(
        takeover >= TTL - TTL / 3 - Duration::from_millis(10) && takeover <= TTL,
        "takeover after {takeover:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_resigned_lease_is_taken_over_within_a_tenth_of_the_lease() {
    let store = Switched::new();
    let clock = tokio_clock();
    let a = contender(&store, &clock);
    let mut a_rx = a.watch();
    let first = leads_within(&mut a_rx, Duration::from_millis(1)).await;
    let b = contender(&store, &clock);
    let mut b_rx = b.watch();
    // Into A's lease, past a renewal (virtual time, like every timing here).
    tokio::time::sleep(Duration::from_millis(5_500)).await;

    // B polls every tenth of the lease while A holds it, so it sees the release at its
    // next poll instead of waiting out the remaining ~8 s of A's lease.
    let resigned = Instant::now();
    a.resign().await;
    assert_eq!(*a_rx.borrow(), None);
    let bound = TTL / 10 + Duration::from_millis(1);
    assert!(leads_within(&mut b_rx, bound).await > first);
    assert!(resigned.elapsed() <= bound, "{:?}", resigned.elapsed());
    let lease = store
        .pool
        .current(clock.now(), "controller")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.holder, b.holder());
}

/// The leader loses the store: its term ends while its lease is still live in the store
/// (so nobody else can hold it yet), and comes back when the store does.
async fn steps_down_before_the_lease_ends_when_the_store_is(mode: u8) {
    let store = Switched::new();
    let clock = tokio_clock();
    let a = contender(&store, &clock);
    let mut a_rx = a.watch();
    let first = leads_within(&mut a_rx, Duration::from_millis(1)).await;
    // A few renewals in (virtual time).
    tokio::time::sleep(Duration::from_secs(7)).await;
    let before = store
        .pool
        .current(clock.now(), "controller")
        .await
        .unwrap()
        .unwrap();

    let cut = Instant::now();
    store.set(mode);
    tokio::time::timeout(TTL, a_rx.wait_for(Option::is_none))
        .await
        .expect("the leader kept its term")
        .unwrap();
    let stepped_down = clock.now();
    // The renewer's last successful call started at or before `cut`; the term ends a
    // guard (call timeout + a tenth of the lease) before that call's lease does.
    assert!(
        cut.elapsed() <= TTL - CALL_TIMEOUT - TTL / 10,
        "{:?}",
        cut.elapsed()
    );
    let live = store
        .pool
        .current(stepped_down, "controller")
        .await
        .unwrap();
    let live = live.expect("stepped down only after the lease had lapsed");
    assert_eq!(live.holder, a.holder());
    assert!(live.expires_at_ms >= stepped_down + (CALL_TIMEOUT + TTL / 10).as_millis() as u64 - 1);
    assert!(live.expires_at_ms >= before.expires_at_ms);

    store.set(UP);
    let term = leads_within(&mut a_rx, TTL / 10 + 2 * CALL_TIMEOUT).await;
    assert_eq!(term, first, "the lease was still ours: same token");
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_store_fails_steps_down_before_its_lease_ends() {
    steps_down_before_the_lease_ends_when_the_store_is(DOWN).await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_store_hangs_steps_down_before_its_lease_ends() {
    steps_down_before_the_lease_ends_when_the_store_is(HANG).await;
}

/// The lease lives in the store's incarnation: no term before the store's identity is
/// established, and a leader whose store was replaced (another controller found it lost
/// and installed a new incarnation) steps down at its next renewal, not at its deadline.
#[tokio::test(start_paused = true)]
async fn no_term_before_the_store_is_established_and_none_once_it_is_replaced() {
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions::default()));
    pool.expect(Some(Expectation::unestablished()));
    let clock = tokio_clock();
    let leader = LeaseLeadership::start(
        pool.clone(),
        clock.clone(),
        LeaseOptions::new(TTL, CALL_TIMEOUT),
    );
    let mut term = leader.watch();
    // A whole lease's time (virtual) to have taken a term, had it been allowed to.
    tokio::time::sleep(TTL).await;
    assert_eq!(*term.borrow(), None, "led an unestablished store");

    let mark = pool
        .install_mark(clock.now(), &StoreMark::fresh(1, None).unwrap())
        .await
        .unwrap();
    pool.expect(Some(Expectation {
        identity: mark.identity.clone(),
        generation: mark.generation,
    }));
    leads_within(&mut term, TTL / 10 + CALL_TIMEOUT).await;

    pool.install_mark(clock.now(), &StoreMark::fresh(2, None).unwrap())
        .await
        .unwrap();
    let renew_every = leader.options().renew_every();
    // Well before the held lease's own deadline (a lease less its guard).
    assert!(renew_every + CALL_TIMEOUT < TTL - leader.options().guard());
    tokio::time::timeout(renew_every + CALL_TIMEOUT, term.wait_for(Option::is_none))
        .await
        .expect("kept leading a replaced store")
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn terms_grow_as_the_lease_changes_hands_and_never_overlap() {
    let store = Switched::new();
    let clock = tokio_clock();
    let overlap = OverlapWatch::default();
    let mut contenders = Vec::new();
    for _ in 0..3 {
        let c = contender(&store, &clock);
        overlap.add(&c);
        contenders.push(c);
    }
    let mut last = Term(0);
    for round in 0..4 {
        // Time (virtual) for one of them to take the lease.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let leader = contenders
            .iter()
            .position(|c| c.watch().borrow().is_some())
            .unwrap_or_else(|| panic!("nobody leads in round {round}"));
        let term = (*contenders[leader].watch().borrow()).unwrap();
        assert!(term > last, "{term:?} after {last:?}");
        last = term;
        // Alternate crashes and clean hand-overs; a fresh contender joins each time.
        if round % 2 == 0 {
            contenders[leader].abandon();
        } else {
            contenders[leader].resign().await;
        }
        contenders.remove(leader);
        let c = contender(&store, &clock);
        overlap.add(&c);
        contenders.push(c);
        // Past a lease (virtual time): a crashed leader's has run out.
        tokio::time::sleep(TTL + TTL / 10).await;
    }
    // Tokens are never below the time they were taken at (they survive a store loss).
    assert!(last.0 >= clock.now() - 4 * (TTL + TTL / 10).as_millis() as u64 - 12_000);
    assert_eq!(overlap.violations(), 0);
}

/// A leadership a test flips by hand.
#[derive(Debug)]
struct Manual {
    term: watch::Sender<Option<Term>>,
}

#[async_trait]
impl Leadership for Manual {
    fn watch(&self) -> watch::Receiver<Option<Term>> {
        self.term.subscribe()
    }
}

fn fetches(controller: &Controller) -> u64 {
    controller
        .status_board()
        .all()
        .iter()
        .map(|s| s.total_fetches)
        .sum()
}

/// In paused time (the loops pause on tokio's clock): "nothing runs for a while" is exact
/// virtual time, not a guess at how long a loaded machine needs.
#[tokio::test(start_paused = true)]
async fn the_loops_park_while_not_leading_and_resume_with_the_next_term() {
    let upstream = static_upstream("parked").replace(
        "kind = \"static\"",
        "kind = \"static\"\ninterval = \"100ms\"",
    );
    let config = parse_config(&crate::common::config_text(&upstream));
    let manual = Arc::new(Manual {
        term: watch::Sender::new(None),
    });
    let controller = Controller::with_store(
        config,
        OpenedStore {
            pool: Arc::new(MemoryPool::new(MemoryPoolOptions::default())),
            leadership: manual.clone(),
        },
        Arc::new(SystemClock),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = controller.clone().start_on(listener).unwrap();

    // Not leading: nothing runs in three of the 100 ms intervals.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fetches(&controller), 0);

    manual.term.send_replace(Some(Term(1)));
    eventually_async("rounds while leading", Duration::from_secs(5), async || {
        (fetches(&controller) >= 3).then_some(())
    })
    .await;

    // The term ends: rounds stop (the 100 ms interval would have run five in 500 ms). Paused
    // time moves on only once every task is idle, so after this any round in flight when
    // the term ended has been dropped or has finished.
    manual.term.send_replace(None);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let parked = fetches(&controller);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(fetches(&controller), parked);

    // The next term resumes them.
    manual.term.send_replace(Some(Term(2)));
    eventually_async(
        "rounds in the next term",
        Duration::from_secs(5),
        async || (fetches(&controller) > parked).then_some(()),
    )
    .await;
    running.shutdown().await;
}

/// A ledger that answers nothing until a test opens it (a PostgreSQL that is slow or down
/// when the controller starts).
#[derive(Debug)]
struct HeldLedger {
    open: watch::Sender<bool>,
    inner: proxypool_quota::MemoryLedger,
}

impl HeldLedger {
    async fn opened(&self) {
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
    }
}

#[async_trait]
impl StoreLedger for HeldLedger {
    async fn load(&self, pool: &str) -> PoolResult<Option<LedgerEntry>> {
        self.opened().await;
        self.inner.load(pool).await
    }

    async fn replace(
        &self,
        pool: &str,
        expected: Option<&str>,
        entry: &LedgerEntry,
    ) -> PoolResult<bool> {
        self.opened().await;
        self.inner.replace(pool, expected, entry).await
    }

    async fn raise_generation(
        &self,
        pool: &str,
        identity: &str,
        generation: u64,
    ) -> PoolResult<()> {
        self.opened().await;
        self.inner
            .raise_generation(pool, identity, generation)
            .await
    }
}

/// A leader whose store the guard has not established yet runs no round: each would only
/// be refused (and counted as a failure); the rounds start once the store is in place.
/// In paused time, like the test above.
#[tokio::test(start_paused = true)]
async fn the_loops_wait_for_the_store_to_be_established_even_while_leading() {
    let upstream = static_upstream("guarded").replace(
        "kind = \"static\"",
        "kind = \"static\"\ninterval = \"100ms\"",
    );
    let config = parse_config(&crate::common::config_text(&upstream));
    let manual = Arc::new(Manual {
        term: watch::Sender::new(Some(Term(1))),
    });
    let mut controller = Controller::with_store(
        config,
        OpenedStore {
            pool: Arc::new(MemoryPool::new(MemoryPoolOptions::default())),
            leadership: manual.clone(),
        },
        Arc::new(SystemClock),
    );
    let ledger = Arc::new(HeldLedger {
        open: watch::Sender::new(false),
        inner: proxypool_quota::MemoryLedger::new(),
    });
    controller.guard_store(ledger.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = controller.clone().start_on(listener).unwrap();

    // Three of the 100 ms intervals, leading, with the store not yet established.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let attempts = |c: &Controller| {
        c.status_board()
            .all()
            .iter()
            .map(|s| s.total_fetches + s.total_failures)
            .sum::<u64>()
    };
    assert_eq!(
        attempts(&controller),
        0,
        "a round ran before the store was established"
    );

    ledger.open.send_replace(true);
    eventually_async(
        "rounds once established",
        Duration::from_secs(5),
        async || (fetches(&controller) >= 2).then_some(()),
    )
    .await;
    assert_eq!(
        controller
            .status_board()
            .all()
            .iter()
            .map(|s| s.total_failures)
            .sum::<u64>(),
        0
    );
    running.shutdown().await;
}

//! Which tests of this process may run beside each other. The gateway's metrics registry
//! is process-wide (no series names its gateway), and so are the names of its I/O
//! threads: a test that reads metric values, counts threads or times a failover runs
//! [`alone`] among the tests that start gateways, and every other gateway holds a shared
//! [`GatewayPermit`] for as long as it runs (taken by [`super::Running::start`]).
//!
//! A test's body runs on its own thread (each `#[tokio::test]` blocks on it), so the
//! thread names the test: the gateways a lone test starts need no permit, and a test
//! already holding one takes more without queueing behind a waiting lone test.

use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::Duration;
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// Shared by every running gateway, held whole by a lone test; fair, so neither side
/// starves the other.
static GATE: LazyLock<Arc<RwLock<()>>> = LazyLock::new(|| Arc::new(RwLock::new(())));

/// Who holds the gate, by test thread.
static HOLDERS: Mutex<Holders> = Mutex::new(Holders {
    alone: None,
    shared: Vec::new(),
});

/// The longest a test waits for its turn: one other test at a time runs beside it
/// (two test threads), and none of them runs this long.
const LONGEST_WAIT: Duration = Duration::from_secs(300);

struct Holders {
    /// The thread of the test running alone.
    alone: Option<ThreadId>,
    /// Per test thread: its gateways' permits and the one read guard they share.
    shared: Vec<(ThreadId, usize, OwnedRwLockReadGuard<()>)>,
}

fn holders() -> MutexGuard<'static, Holders> {
    HOLDERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Held while the test runs alone: no gateway of another test runs meanwhile.
#[derive(Debug)]
#[must_use = "the test runs alone only while this lives"]
pub struct Alone {
    _gate: OwnedRwLockWriteGuard<()>,
}

impl Drop for Alone {
    fn drop(&mut self) {
        holders().alone = None;
    }
}

/// Waits until no other test's gateway runs, then keeps them out until the guard drops.
/// Call it first thing in the test, before the test starts a gateway of its own.
pub async fn alone() -> Alone {
    let me = std::thread::current().id();
    assert!(
        !holders().shared.iter().any(|(thread, ..)| *thread == me),
        "take `alone()` before the test starts a gateway"
    );
    let gate = tokio::time::timeout(LONGEST_WAIT, Arc::clone(&GATE).write_owned())
        .await
        .expect("the other tests' gateways stopped in time");
    holders().alone = Some(me);
    Alone { _gate: gate }
}

/// One running gateway's share of the process.
#[derive(Debug)]
pub struct GatewayPermit {
    thread: ThreadId,
}

impl Drop for GatewayPermit {
    fn drop(&mut self) {
        let mut holders = holders();
        if let Some(index) = holders.shared.iter().position(|h| h.0 == self.thread) {
            holders.shared[index].1 -= 1;
            if holders.shared[index].1 == 0 {
                holders.shared.swap_remove(index);
            }
        }
    }
}

/// A permit for a gateway the calling test starts; `None` when the test runs alone.
pub async fn gateway_permit() -> Option<GatewayPermit> {
    let me = std::thread::current().id();
    {
        let mut holders = holders();
        if holders.alone == Some(me) {
            return None;
        }
        if let Some(held) = holders.shared.iter_mut().find(|h| h.0 == me) {
            held.1 += 1;
            return Some(GatewayPermit { thread: me });
        }
    }
    let gate = tokio::time::timeout(LONGEST_WAIT, Arc::clone(&GATE).read_owned())
        .await
        .expect(
            "a lone test finished in time (a lone test's own gateway must start on its \
             test's thread, not in a spawned task)",
        );
    let mut holders = holders();
    match holders.shared.iter_mut().find(|h| h.0 == me) {
        Some(held) => held.1 += 1,
        None => holders.shared.push((me, 1, gate)),
    }
    Some(GatewayPermit { thread: me })
}

//! The store ledger ([`StoreLedger`]): entries load exactly as written, each write is a
//! compare-and-set on the identity (also under concurrency), the generation only rises and
//! only for the identity named, pools are independent, and bad input writes nothing.

use std::fmt::Debug;
use std::sync::Arc;

use proxypool_core::store_mark::{LedgerEntry, LossReason, Recovery, StoreLedger};
use proxypool_core::{PoolError, PoolResult};
use tokio::sync::Barrier;

use super::harness::{QuotaFactory, QuotaHarness};

/// How many writers race in the concurrency test.
const RACERS: u64 = 8;
/// How many times they race to replace the current entry: a lost update needs an unlucky
/// interleaving, so one race would rarely show it.
const ROUNDS: u64 = 16;

/// A well-formed identity (32 lowercase hex digits), distinct per `n`.
fn identity(n: u64) -> String {
    format!(
        "{:032x}",
        0x5eed_0000_0000_0000_0000_0000_0000_0000_u128 + u128::from(n)
    )
}

/// An entry without a recovery: a first incarnation, not yet installed.
fn fresh(identity: String, generation: u64) -> LedgerEntry {
    LedgerEntry {
        identity,
        generation,
        recovery: None,
        loss: None,
        installed: false,
    }
}

/// An entry after a loss: every field set.
fn recovering(identity: String, generation: u64, loss: LossReason) -> LedgerEntry {
    LedgerEntry {
        identity,
        generation,
        recovery: Some(Recovery {
            lost_at_ms: 1_700_000_000_123,
            hold_ms: 3_600_000,
        }),
        loss: Some(loss),
        installed: true,
    }
}

fn ok<T>(result: PoolResult<T>, what: &str) -> T {
    result.unwrap_or_else(|error| panic!("{what}: a healthy ledger failed: {error}"))
}

fn assert_invalid<T: Debug>(result: PoolResult<T>, what: &str) {
    match result {
        Err(PoolError::InvalidInput(_)) => {}
        other => panic!("{what}: expected InvalidInput, got {other:?}"),
    }
}

async fn load<L: StoreLedger + ?Sized>(ledger: &L, pool: &str) -> Option<LedgerEntry> {
    ok(ledger.load(pool).await, &format!("load {pool:?}"))
}

async fn replace<L: StoreLedger + ?Sized>(
    ledger: &L,
    pool: &str,
    expected: Option<&str>,
    entry: &LedgerEntry,
) -> bool {
    ok(
        ledger.replace(pool, expected, entry).await,
        &format!("replace {pool:?} expecting {expected:?}"),
    )
}

async fn raise<L: StoreLedger + ?Sized>(ledger: &L, pool: &str, identity: &str, generation: u64) {
    ok(
        ledger.raise_generation(pool, identity, generation).await,
        &format!("raise {pool:?} to {generation}"),
    );
}

/// An unknown pool has no entry; entries of every shape (no recovery, a recovery with each
/// loss, a loss without a recovery, the largest numbers, the longest pool name, upper-case
/// hex) load back field for field.
pub async fn ledger_entries_load_exactly_as_written<F: QuotaFactory>(factory: &F) {
    let harness = crate::fresh_quota!(factory);
    let ledger = harness.ledger();
    assert_eq!(load(ledger, "pool-a").await, None, "an unknown pool");
    let longest: String = (b' '..=b'~')
        .cycle()
        .take(crate::ledger::MAX_POOL_NAME)
        .map(char::from)
        .collect();
    let largest = i64::MAX.unsigned_abs();
    let entries = [
        ("pool-a".to_owned(), fresh(identity(1), 1)),
        (
            "pool-b".to_owned(),
            recovering(identity(2), 42, LossReason::Missing),
        ),
        (
            "pool-c".to_owned(),
            recovering(identity(3), 7, LossReason::Replaced),
        ),
        // An operator's forced recovery (`proxypool store recover`).
        (
            "pool-f".to_owned(),
            recovering(identity(7), 8, LossReason::Forced),
        ),
        (
            "pool-d".to_owned(),
            LedgerEntry {
                recovery: None,
                ..recovering(identity(4), 0, LossReason::RolledBack)
            },
        ),
        (
            "pool-e".to_owned(),
            LedgerEntry {
                identity: "0123456789ABCDEFabcdef0123456789".to_owned(),
                generation: largest,
                recovery: Some(Recovery {
                    lost_at_ms: largest,
                    hold_ms: largest,
                }),
                loss: Some(LossReason::RolledBack),
                installed: false,
            },
        ),
        (
            longest.clone(),
            LedgerEntry {
                installed: true,
                ..fresh(identity(6), 0)
            },
        ),
    ];
    for (pool, entry) in &entries {
        assert!(
            replace(ledger, pool, None, entry).await,
            "the first entry of {pool:?}"
        );
    }
    for (pool, entry) in &entries {
        assert_eq!(load(ledger, pool).await.as_ref(), Some(entry), "{pool:?}");
    }
    assert_eq!(harness.ledger_count().await, entries.len() as u64);
}

/// `replace(None)` over an existing entry is false and changes nothing, even with the same
/// identity.
pub async fn ledger_first_entry_is_written_once<F: QuotaFactory>(factory: &F) {
    let harness = crate::fresh_quota!(factory);
    let ledger = harness.ledger();
    let first = fresh(identity(1), 3);
    assert!(replace(ledger, "pool", None, &first).await);
    let other = recovering(identity(2), 9, LossReason::Missing);
    assert!(!replace(ledger, "pool", None, &other).await, "another one");
    let same = LedgerEntry {
        installed: true,
        generation: 4,
        ..first.clone()
    };
    assert!(
        !replace(ledger, "pool", None, &same).await,
        "the same identity"
    );
    assert_eq!(load(ledger, "pool").await, Some(first));
    assert_eq!(harness.ledger_count().await, 1);
}

/// `replace(Some(id))` writes only while the entry names `id`: a wrong or stale identity,
/// or a pool without an entry, is false and changes nothing; the current one writes every
/// field (the same identity with new fields, or a new identity).
pub async fn ledger_replace_needs_the_current_identity<F: QuotaFactory>(factory: &F) {
    let harness = crate::fresh_quota!(factory);
    let ledger = harness.ledger();
    let first = fresh(identity(1), 3);
    assert!(replace(ledger, "pool", None, &first).await);

    let second = recovering(identity(2), 10, LossReason::Replaced);
    assert!(
        !replace(ledger, "pool", Some(&identity(9)), &second).await,
        "a wrong identity"
    );
    assert_eq!(load(ledger, "pool").await.as_ref(), Some(&first));

    let installed = LedgerEntry {
        installed: true,
        generation: 5,
        ..first.clone()
    };
    assert!(replace(ledger, "pool", Some(&first.identity), &installed).await);
    assert_eq!(load(ledger, "pool").await.as_ref(), Some(&installed));

    assert!(replace(ledger, "pool", Some(&first.identity), &second).await);
    assert_eq!(load(ledger, "pool").await.as_ref(), Some(&second));

    let third = fresh(identity(3), 11);
    assert!(
        !replace(ledger, "pool", Some(&first.identity), &third).await,
        "a stale identity"
    );
    assert_eq!(load(ledger, "pool").await.as_ref(), Some(&second));

    // A recovery and a loss can be cleared again.
    let acknowledged = LedgerEntry {
        recovery: None,
        loss: None,
        ..second.clone()
    };
    assert!(replace(ledger, "pool", Some(&second.identity), &acknowledged).await);
    assert_eq!(load(ledger, "pool").await, Some(acknowledged));

    assert!(
        !replace(ledger, "no-entry", Some(&first.identity), &third).await,
        "a pool without an entry"
    );
    assert_eq!(load(ledger, "no-entry").await, None);
    assert_eq!(harness.ledger_count().await, 1);
}

/// `raise_generation` raises the generation of the identity the entry names (up to the
/// largest storable), never lowers it, ignores another identity and a pool without an
/// entry, and touches no other field.
pub async fn ledger_generation_only_rises_for_its_identity<F: QuotaFactory>(factory: &F) {
    let harness = crate::fresh_quota!(factory);
    let ledger = harness.ledger();
    let entry = recovering(identity(1), 5, LossReason::RolledBack);
    let at = |generation: u64| LedgerEntry {
        generation,
        ..entry.clone()
    };
    assert!(replace(ledger, "pool", None, &entry).await);

    raise(ledger, "pool", &entry.identity, 9).await;
    assert_eq!(load(ledger, "pool").await, Some(at(9)), "raised");
    raise(ledger, "pool", &entry.identity, 3).await;
    assert_eq!(load(ledger, "pool").await, Some(at(9)), "never lowered");
    raise(ledger, "pool", &entry.identity, 9).await;
    assert_eq!(load(ledger, "pool").await, Some(at(9)), "the same");
    raise(ledger, "pool", &identity(2), 100).await;
    assert_eq!(load(ledger, "pool").await, Some(at(9)), "another identity");
    let largest = i64::MAX.unsigned_abs();
    raise(ledger, "pool", &entry.identity, largest).await;
    assert_eq!(load(ledger, "pool").await, Some(at(largest)), "the largest");

    raise(ledger, "no-entry", &entry.identity, 50).await;
    assert_eq!(load(ledger, "no-entry").await, None);
    assert_eq!(harness.ledger_count().await, 1);
}

/// Each pool has its own entry: names differing only in case are different pools, and a
/// write or a raise on one pool never reaches another, even one naming the same identity.
pub async fn ledger_pools_are_independent<F: QuotaFactory>(factory: &F) {
    let harness = crate::fresh_quota!(factory);
    let ledger = harness.ledger();
    let a = fresh(identity(1), 1);
    let b = recovering(identity(2), 2, LossReason::Missing);
    let twin = fresh(identity(1), 1);
    assert!(replace(ledger, "pool-a", None, &a).await);
    assert!(replace(ledger, "pool-b", None, &b).await);
    assert!(replace(ledger, "twin", None, &twin).await);
    assert_eq!(
        load(ledger, "Pool-A").await,
        None,
        "names are case-sensitive"
    );
    assert!(
        replace(ledger, "Pool-A", None, &b).await,
        "another name, another entry"
    );

    // pool-b names b's identity, not a's.
    assert!(!replace(ledger, "pool-b", Some(&a.identity), &a).await);
    raise(ledger, "pool-b", &a.identity, 99).await;
    assert_eq!(load(ledger, "pool-b").await.as_ref(), Some(&b));

    raise(ledger, "pool-a", &a.identity, 99).await;
    let renewed = fresh(identity(3), 100);
    assert!(replace(ledger, "pool-a", Some(&a.identity), &renewed).await);
    assert_eq!(load(ledger, "pool-a").await.as_ref(), Some(&renewed));
    assert_eq!(
        load(ledger, "twin").await,
        Some(twin),
        "same identity, other pool"
    );
    assert_eq!(load(ledger, "pool-b").await, Some(b.clone()));
    assert_eq!(load(ledger, "Pool-A").await, Some(b));
    assert_eq!(harness.ledger_count().await, 4);
}

/// Runs one race: every entry is written by its own task at once with `expected`; exactly
/// one write wins and the stored entry is the winner's.
async fn race<L: StoreLedger + Clone + 'static>(
    ledger: &L,
    pool: &'static str,
    expected: Option<String>,
    entries: Vec<LedgerEntry>,
) -> LedgerEntry {
    let barrier = Arc::new(Barrier::new(entries.len()));
    let tasks: Vec<_> = entries
        .into_iter()
        .map(|entry| {
            let ledger = ledger.clone();
            let barrier = barrier.clone();
            let expected = expected.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let won = replace(&ledger, pool, expected.as_deref(), &entry).await;
                (won, entry)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (won, entry) = task.await.expect("a racer panicked");
        if won {
            winners.push(entry);
        }
    }
    let [winner] = winners.as_slice() else {
        panic!("expected exactly one winner expecting {expected:?}, got {winners:?}");
    };
    assert_eq!(
        load(ledger, pool).await.as_ref(),
        Some(winner),
        "the winner's entry is stored"
    );
    winner.clone()
}

/// 8 tasks race to write the first entry of a pool, then (16 times) to replace the current
/// entry, each with an entry of its own: every time exactly one wins and the stored entry
/// is the winner's.
pub async fn ledger_concurrent_replacements_have_one_winner<F: QuotaFactory>(factory: &F) {
    let harness = crate::fresh_quota!(factory);
    let ledger = harness.ledger();
    let entries = |round: u64| -> Vec<LedgerEntry> {
        (0..RACERS)
            .map(|racer| {
                let n = round * 100 + racer;
                recovering(identity(n), n, LossReason::Replaced)
            })
            .collect()
    };
    let mut current = race(ledger, "raced", None, entries(0)).await;
    for round in 1..=ROUNDS {
        current = race(ledger, "raced", Some(current.identity), entries(round)).await;
    }
    assert_eq!(harness.ledger_count().await, 1);
}

/// Pool names that are empty, too long or not printable ASCII, identities (the entry's,
/// the expected one, the one raised) that are not 32 hex digits, and numbers above
/// `i64::MAX` are input errors, and nothing is written: the store holds only the one
/// valid entry, unchanged.
pub async fn ledger_invalid_input_is_rejected_and_writes_nothing<F: QuotaFactory>(factory: &F) {
    let harness = crate::fresh_quota!(factory);
    let ledger = harness.ledger();
    let valid = fresh(identity(1), 5);
    assert!(replace(ledger, "pool", None, &valid).await);

    let too_long = "p".repeat(crate::ledger::MAX_POOL_NAME + 1);
    let bad_pools = [
        "",
        "line\nbreak",
        "nul\0",
        "tab\there",
        "del\u{7f}",
        "caf\u{e9}",
        too_long.as_str(),
    ];
    let newer = fresh(identity(2), 6);
    for pool in bad_pools {
        assert_invalid(ledger.load(pool).await, &format!("load {pool:?}"));
        assert_invalid(
            ledger.replace(pool, None, &newer).await,
            &format!("insert into {pool:?}"),
        );
        assert_invalid(
            ledger.replace(pool, Some(&valid.identity), &newer).await,
            &format!("replace in {pool:?}"),
        );
        assert_invalid(
            ledger.raise_generation(pool, &valid.identity, 7).await,
            &format!("raise in {pool:?}"),
        );
    }

    let bad_identities = [
        String::new(),
        "0".repeat(31),
        "0".repeat(33),
        "g".repeat(32),
        format!("{}-", "0".repeat(31)),
        format!("{} ", "a".repeat(31)),
        "\u{e9}".repeat(16),
    ];
    for bad in &bad_identities {
        let entry = LedgerEntry {
            identity: bad.clone(),
            ..newer.clone()
        };
        assert_invalid(
            ledger.replace("other", None, &entry).await,
            &format!("an entry named {bad:?}"),
        );
        assert_invalid(
            ledger.replace("pool", Some(&valid.identity), &entry).await,
            &format!("a replacement named {bad:?}"),
        );
        assert_invalid(
            ledger.replace("pool", Some(bad), &newer).await,
            &format!("expecting {bad:?}"),
        );
        assert_invalid(
            ledger.raise_generation("pool", bad, 7).await,
            &format!("raising {bad:?}"),
        );
    }

    let above = i64::MAX.unsigned_abs() + 1;
    for number in [above, u64::MAX] {
        let recovery = |lost_at_ms, hold_ms| LedgerEntry {
            recovery: Some(Recovery {
                lost_at_ms,
                hold_ms,
            }),
            ..newer.clone()
        };
        let entries = [
            LedgerEntry {
                generation: number,
                ..newer.clone()
            },
            recovery(number, 0),
            recovery(0, number),
        ];
        for entry in &entries {
            assert_invalid(
                ledger.replace("other", None, entry).await,
                &format!("inserting {entry:?}"),
            );
            assert_invalid(
                ledger.replace("pool", Some(&valid.identity), entry).await,
                &format!("replacing with {entry:?}"),
            );
        }
        assert_invalid(
            ledger
                .raise_generation("pool", &valid.identity, number)
                .await,
            &format!("raising to {number}"),
        );
    }

    assert_eq!(load(ledger, "pool").await, Some(valid), "unchanged");
    assert_eq!(load(ledger, "other").await, None);
    assert_eq!(
        harness.ledger_count().await,
        1,
        "invalid input wrote an entry"
    );
}

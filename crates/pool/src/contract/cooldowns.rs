//! Contract: CooldownStore (the merge rule of `proxypool_core::cooldown`, checked against
//! `merge_cooldowns` itself; session feedback; extracted proxies given back) and
//! extraction with `for_domain`.

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::cooldown::{
    MAX_COOLDOWN_CHANGES, MAX_COOLDOWNS_PER_PROXY, MAX_PROJECT_SCOPES_PER_PROXY,
    MAX_SESSION_FEEDBACK,
};
use proxypool_core::cooldown_merge::merge_cooldowns;
use proxypool_core::{
    ActivityPool, CooldownChange, CooldownReport, CooldownStore, Domain, DomainCooldown, DueQuery,
    ExtractMode, ExtractRequest, PoolError, ProxyId, ProxyStatus, Reporter, ReturnOutcome,
    SessionFeedback, UnixMillis, Verdict,
};
use std::collections::BTreeSet;

fn domain(name: &str) -> Domain {
    Domain::new(name).unwrap()
}

fn entry(proxy: &ProxyId, name: &str, until: u64, strikes: u32, forget: u64) -> DomainCooldown {
    DomainCooldown {
        project: None,
        proxy_id: proxy.clone(),
        domain: domain(name),
        until_ms: T0 + until,
        strikes,
        forget_at_ms: T0 + forget,
    }
}

fn set(proxy: &ProxyId, name: &str, until: u64, strikes: u32, forget: u64) -> CooldownChange {
    CooldownChange::Set(entry(proxy, name, until, strikes, forget))
}

fn clear(proxy: &ProxyId, name: &str) -> CooldownChange {
    CooldownChange::Clear {
        project: None,
        proxy_id: proxy.clone(),
        domain: domain(name),
    }
}

/// What `merge_cooldowns` makes of `batches` applied one after another at `now`.
fn reference(batches: &[&[CooldownChange]], now: UnixMillis) -> Vec<DomainCooldown> {
    let mut stored = Vec::new();
    for batch in batches {
        let refs: Vec<&CooldownChange> = batch.iter().collect();
        merge_cooldowns(&mut stored, &refs, now);
    }
    stored
}

async fn cooldowns<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    proxy: &ProxyId,
) -> Vec<DomainCooldown> {
    pool.cooldowns_of(now, std::slice::from_ref(proxy))
        .await
        .unwrap()
}

fn for_domain(client_name: &str, count: u32, mode: ExtractMode, name: &str) -> ExtractRequest {
    let mut request = extract_request(client_name, count, mode);
    request.for_domain = Some(domain(name));
    request
}

fn extracted_ids(response: &proxypool_core::ExtractResponse) -> BTreeSet<ProxyId> {
    response.proxies.iter().map(|p| p.id.clone()).collect()
}

pub async fn cooldowns_merge_is_order_free_and_replay_changes_nothing<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 2).await;
    let (a, b) = (&ids[0], &ids[1]);
    // Each field's maximum comes from a different change.
    let forward = [
        set(a, "shop.test", 5_000, 1, 9_000),
        set(a, "shop.test", 3_000, 4, 8_000),
        set(a, "shop.test", 1_000, 2, 12_000),
    ];
    let backward: Vec<CooldownChange> = forward
        .iter()
        .rev()
        .map(|c| match c {
            CooldownChange::Set(e) => CooldownChange::Set(DomainCooldown {
                proxy_id: b.clone(),
                ..e.clone()
            }),
            other => other.clone(),
        })
        .collect();
    let report = pool.apply_cooldowns(T0 + 1, &forward).await.unwrap();
    assert_eq!(
        report,
        CooldownReport {
            applied: 3,
            unknown: 0
        }
    );
    pool.apply_cooldowns(T0 + 1, &backward).await.unwrap();

    let on_a = cooldowns(&pool, T0 + 2, a).await;
    assert_eq!(on_a, vec![entry(a, "shop.test", 5_000, 4, 12_000)]);
    assert_eq!(on_a, reference(&[&forward], T0 + 1));
    let on_b = cooldowns(&pool, T0 + 2, b).await;
    assert_eq!(on_b, vec![entry(b, "shop.test", 5_000, 4, 12_000)]);

    // A replayed batch (a resent report) changes nothing, nor does an older entry.
    pool.apply_cooldowns(T0 + 3, &forward).await.unwrap();
    pool.apply_cooldowns(T0 + 3, &[set(a, "shop.test", 10, 1, 20)])
        .await
        .unwrap();
    assert_eq!(cooldowns(&pool, T0 + 4, a).await, on_a);
}

pub async fn cooldowns_clear_drops_only_that_domain<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    let p = &ids[0];
    pool.apply_cooldowns(
        T0,
        &[
            set(p, "a.test", 1_000, 1, 5_000),
            set(p, "b.test", 1_000, 1, 5_000),
        ],
    )
    .await
    .unwrap();
    let report = pool
        .apply_cooldowns(T0 + 1, &[clear(p, "a.test"), clear(p, "never.test")])
        .await
        .unwrap();
    assert_eq!(report.applied, 2);
    assert_eq!(
        cooldowns(&pool, T0 + 2, p).await,
        vec![entry(p, "b.test", 1_000, 1, 5_000)]
    );
    // Within one batch the order holds: a set then a clear of one domain clears it.
    pool.apply_cooldowns(
        T0 + 3,
        &[set(p, "c.test", 1_000, 1, 5_000), clear(p, "c.test")],
    )
    .await
    .unwrap();
    assert_eq!(
        cooldowns(&pool, T0 + 4, p).await,
        vec![entry(p, "b.test", 1_000, 1, 5_000)]
    );
}

pub async fn cooldowns_bound_per_proxy_drops_what_the_reference_drops<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    let p = &ids[0];
    // Twenty domains; forget times repeat, so the tie by domain decides too.
    let all: Vec<CooldownChange> = (0..20u64)
        .map(|i| {
            set(
                p,
                &format!("d{:02}.test", 19 - i),
                1_000,
                1,
                10_000 + (i % 7) * 100,
            )
        })
        .collect();
    let (first, second) = all.split_at(9);
    pool.apply_cooldowns(T0, first).await.unwrap();
    pool.apply_cooldowns(T0, second).await.unwrap();
    let stored = cooldowns(&pool, T0 + 1, p).await;
    assert_eq!(stored.len(), MAX_COOLDOWNS_PER_PROXY);
    assert_eq!(stored, reference(&[first, second], T0));
    // Dropped: the three forgotten soonest, then of the next forget time the highest
    // domain (ties go by domain).
    let kept: BTreeSet<String> = stored.iter().map(|e| e.domain.to_string()).collect();
    for dropped in ["d19.test", "d12.test", "d05.test", "d18.test"] {
        assert!(
            !kept.contains(dropped),
            "{dropped} must be dropped: {kept:?}"
        );
    }
    assert!(kept.contains("d04.test") && kept.contains("d11.test"));
    // A later, longer-remembered domain pushes out the next one to be forgotten.
    let newcomer = [set(p, "zz.test", 1_000, 1, 20_000)];
    pool.apply_cooldowns(T0 + 2, &newcomer).await.unwrap();
    assert_eq!(
        cooldowns(&pool, T0 + 3, p).await,
        reference(&[first, second, &newcomer], T0 + 2)
    );
}

pub async fn cooldowns_on_unknown_proxies_are_ignored_and_counted<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    let unknown = candidate_id(99);
    let report = pool
        .apply_cooldowns(
            T0,
            &[
                set(&unknown, "a.test", 1_000, 1, 5_000),
                set(&ids[0], "a.test", 1_000, 1, 5_000),
                clear(&unknown, "b.test"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        report,
        CooldownReport {
            applied: 1,
            unknown: 2
        }
    );
    assert!(cooldowns(&pool, T0 + 1, &unknown).await.is_empty());
    // Not kept for later either: the proxy arriving afterwards starts clean.
    pool.upsert(T0 + 2, batch("acme", vec![candidate(99)]))
        .await
        .unwrap();
    assert!(cooldowns(&pool, T0 + 3, &unknown).await.is_empty());
    assert_eq!(cooldowns(&pool, T0 + 3, &ids[0]).await.len(), 1);
}

pub async fn cooldowns_invalid_batch_changes_nothing<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    let p = &ids[0];
    let backwards = pool
        .apply_cooldowns(
            T0,
            &[
                set(p, "a.test", 1_000, 1, 5_000),
                set(p, "b.test", 5_000, 1, 1_000),
            ],
        )
        .await;
    assert!(
        matches!(backwards, Err(PoolError::InvalidInput(_))),
        "{backwards:?}"
    );
    let too_many: Vec<CooldownChange> = (0..=MAX_COOLDOWN_CHANGES)
        .map(|_| set(p, "a.test", 1_000, 1, 5_000))
        .collect();
    let over = pool.apply_cooldowns(T0, &too_many).await;
    assert!(matches!(over, Err(PoolError::InvalidInput(_))), "{over:?}");
    assert!(cooldowns(&pool, T0 + 1, p).await.is_empty());
}

pub async fn cooldowns_are_forgotten_at_forget_at<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    let p = &ids[0];
    pool.apply_cooldowns(T0, &[set(p, "a.test", 1_000, 5, 5_000)])
        .await
        .unwrap();
    assert_eq!(cooldowns(&pool, T0 + 4_999, p).await.len(), 1);
    assert!(cooldowns(&pool, T0 + 5_000, p).await.is_empty());
    // Gone means gone: a new ban after the forget time does not inherit the old strikes,
    // even before any sweep ran.
    pool.apply_cooldowns(T0 + 6_000, &[set(p, "a.test", 7_000, 1, 8_000)])
        .await
        .unwrap();
    assert_eq!(
        cooldowns(&pool, T0 + 6_001, p).await,
        vec![entry(p, "a.test", 7_000, 1, 8_000)]
    );
    // And a sweep past the forget time leaves nothing behind for the proxy.
    pool.sweep(T0 + 8_000, 100).await.unwrap();
    assert!(cooldowns(&pool, T0 + 8_000, p).await.is_empty());
    pool.apply_cooldowns(T0 + 8_001, &[set(p, "b.test", 8_500, 1, 9_000)])
        .await
        .unwrap();
    assert_eq!(
        cooldowns(&pool, T0 + 8_002, p).await,
        vec![entry(p, "b.test", 8_500, 1, 9_000)]
    );
}

pub async fn cooldowns_of_lists_by_proxy_in_the_given_order_then_domain<F: PoolFactory>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 3).await;
    let (a, b, none) = (&ids[0], &ids[1], &ids[2]);
    pool.apply_cooldowns(
        T0,
        &[
            set(a, "zeta.test", 1_000, 1, 5_000),
            set(b, "omega.test", 1_000, 1, 5_000),
            set(a, "alpha.test", 1_000, 1, 5_000),
            set(b, "beta.test", 1_000, 1, 5_000),
        ],
    )
    .await
    .unwrap();
    let listed = pool
        .cooldowns_of(T0 + 1, &[b.clone(), none.clone(), a.clone()])
        .await
        .unwrap();
    let order: Vec<(ProxyId, String)> = listed
        .iter()
        .map(|e| (e.proxy_id.clone(), e.domain.to_string()))
        .collect();
    assert_eq!(
        order,
        vec![
            (b.clone(), "beta.test".to_owned()),
            (b.clone(), "omega.test".to_owned()),
            (a.clone(), "alpha.test".to_owned()),
            (a.clone(), "zeta.test".to_owned()),
        ]
    );
    assert!(pool.cooldowns_of(T0 + 1, &[]).await.unwrap().is_empty());
}

pub async fn cooldowns_go_with_the_record<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    let p = &ids[0];
    // Remembered far longer than the proxy lives.
    pool.apply_cooldowns(T0, &[set(p, "a.test", 1_000, 3, 3_600_000)])
        .await
        .unwrap();
    let expired = T0 + TTL_MS;
    assert!(
        cooldowns(&pool, expired, p).await.is_empty(),
        "an expired record has no cooldowns"
    );
    loop {
        if !pool.sweep(expired, 100).await.unwrap().more_pending {
            break;
        }
    }
    assert_eq!(pool.footprint().await.unwrap().records, 0);
    // The same proxy listed again is a new lifetime: nothing carried over.
    pool.upsert(expired + 1, batch("acme", vec![candidate(1)]))
        .await
        .unwrap();
    assert!(cooldowns(&pool, expired + 2, p).await.is_empty());
    mark_healthy(&pool, expired + 2, std::slice::from_ref(p)).await;
    let out = pool
        .extract(
            expired + 3,
            for_domain("c1", 1, ExtractMode::AllOrNothing, "a.test"),
        )
        .await
        .unwrap();
    assert_eq!(extracted_ids(&out.response), BTreeSet::from([p.clone()]));

    // Without a sweep too: the vendor listing the proxy again after its lifetime ended
    // starts a new lifetime, clean.
    pool.upsert(expired + 4, batch("acme", vec![candidate(2)]))
        .await
        .unwrap();
    let second = candidate_id(2);
    pool.apply_cooldowns(
        expired + 5,
        &[CooldownChange::Set(DomainCooldown {
            project: None,
            proxy_id: second.clone(),
            domain: domain("a.test"),
            until_ms: expired + 1_000,
            strikes: 2,
            forget_at_ms: expired + 3_600_000,
        })],
    )
    .await
    .unwrap();
    let relisted = expired + 4 + TTL_MS;
    pool.upsert(relisted, batch("acme", vec![candidate(2)]))
        .await
        .unwrap();
    assert!(cooldowns(&pool, relisted + 1, &second).await.is_empty());
}

fn feedback(id: &str, session: &str, expires_at: UnixMillis) -> SessionFeedback {
    SessionFeedback {
        project: None,
        id: id.to_owned(),
        client: client("c1"),
        session: session.to_owned(),
        domain: domain("shop.test"),
        verdict: Verdict::Banned,
        ttl_ms: None,
        expires_at_ms: expires_at,
    }
}

fn feedback_ids(list: &[SessionFeedback]) -> Vec<String> {
    list.iter().map(|f| f.id.clone()).collect()
}

pub async fn session_feedback_is_deduped_ordered_and_expires<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    // Arrival order, not expiry order, is the order.
    pool.add_session_feedback(T0, feedback("f1", "s1", T0 + 3_000))
        .await
        .unwrap();
    pool.add_session_feedback(T0 + 1, feedback("f2", "s2", T0 + 1_000))
        .await
        .unwrap();
    pool.add_session_feedback(T0 + 2, feedback("f3", "s3", T0 + 2_000))
        .await
        .unwrap();
    // The same id again is a no-op, whatever it carries.
    let mut again = feedback("f1", "other", T0 + 9_000);
    again.verdict = Verdict::Ok;
    pool.add_session_feedback(T0 + 3, again).await.unwrap();
    // Feedback already expired when it arrives is not kept.
    pool.add_session_feedback(T0 + 4, feedback("late", "s4", T0 + 4))
        .await
        .unwrap();

    let live = pool.session_feedback(T0 + 5, 10).await.unwrap();
    assert_eq!(feedback_ids(&live), ["f1", "f2", "f3"]);
    assert_eq!(live[0], feedback("f1", "s1", T0 + 3_000));
    let first_two = pool.session_feedback(T0 + 5, 2).await.unwrap();
    assert_eq!(feedback_ids(&first_two), ["f1", "f2"]);
    assert!(pool.session_feedback(T0 + 5, 0).await.unwrap().is_empty());

    assert_eq!(
        feedback_ids(&pool.session_feedback(T0 + 1_000, 10).await.unwrap()),
        ["f1", "f3"]
    );
    assert_eq!(
        feedback_ids(&pool.session_feedback(T0 + 2_999, 10).await.unwrap()),
        ["f1"]
    );
    pool.sweep(T0 + 3_000, 100).await.unwrap();
    assert!(
        pool.session_feedback(T0 + 3_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Once expired (and swept), the id may be used afresh.
    pool.add_session_feedback(T0 + 3_001, feedback("f1", "s9", T0 + 5_000))
        .await
        .unwrap();
    let fresh = pool.session_feedback(T0 + 3_002, 10).await.unwrap();
    assert_eq!(fresh, vec![feedback("f1", "s9", T0 + 5_000)]);
}

pub async fn session_feedback_keeps_the_newest_within_its_bound<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let total = MAX_SESSION_FEEDBACK + 2;
    for i in 0..total {
        pool.add_session_feedback(T0 + i as u64, feedback(&format!("f{i}"), "s", T0 + 60_000))
            .await
            .unwrap();
    }
    let kept = pool
        .session_feedback(T0 + total as u64, usize::MAX)
        .await
        .unwrap();
    assert_eq!(kept.len(), MAX_SESSION_FEEDBACK);
    assert_eq!(kept[0].id, "f2", "the two oldest were dropped");
    assert_eq!(kept.last().unwrap().id, format!("f{}", total - 1));
}

/// Extracts one proxy for `client_name`; returns its id and the extraction's id.
async fn extract_one<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    client_name: &str,
) -> (ProxyId, proxypool_core::ExtractionId) {
    let out = pool
        .extract(
            now,
            extract_request(client_name, 1, ExtractMode::AllOrNothing),
        )
        .await
        .unwrap();
    (out.response.proxies[0].id.clone(), out.response.id.clone())
}

pub async fn may_report_answers_unknown_and_foreign_proxies_alike<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 2).await;
    let (held, _) = extract_one(&pool, T0 + 10, "c1").await;
    let spare = ids.iter().find(|id| **id != held).unwrap().clone();
    for (who, proxy, expected) in [
        // The holder of an extraction, and anyone on a proxy nobody extracted.
        ("c1", &held, Reporter::Holder),
        ("c1", &spare, Reporter::Unheld { lease_epoch: None }),
        ("c2", &spare, Reporter::Unheld { lease_epoch: None }),
        // Another client's extracted proxy and a proxy the pool does not hold: alike.
        ("c2", &held, Reporter::No),
        ("c1", &candidate_id(99), Reporter::No),
    ] {
        assert_eq!(
            pool.may_report(T0 + 20, &client(who), proxy).await,
            Ok(expected),
            "{who} {proxy}"
        );
    }
    // A record past its hard expiry is not the pool's any more.
    assert_eq!(
        pool.may_report(T0 + TTL_MS, &client("c1"), &spare).await,
        Ok(Reporter::No)
    );
    assert_eq!(
        pool.may_report(T0 + TTL_MS, &client("c1"), &held).await,
        Ok(Reporter::No)
    );
}

pub async fn return_extracted_only_by_the_holder_and_never_handed_out_again<F: PoolFactory>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 3).await;
    let (held, extraction) = extract_one(&pool, T0 + 10, "c1").await;
    let spare: Vec<ProxyId> = ids.iter().filter(|id| **id != held).cloned().collect();

    // Another client, an unknown proxy, a proxy nobody extracted: NotFound, no change.
    for (who, proxy) in [
        ("c2", held.clone()),
        ("c1", candidate_id(99)),
        ("c1", spare[0].clone()),
    ] {
        let refused = pool.return_extracted(T0 + 20, &client(who), &proxy).await;
        assert_eq!(refused, Err(PoolError::NotFound), "{who} {proxy}");
    }
    assert_eq!(
        find_record(&pool, T0 + 20, &spare[0]).await.unwrap().status,
        ProxyStatus::Available
    );
    let before = pool
        .get_extraction(T0 + 20, &client("c1"), &extraction)
        .await
        .unwrap();
    assert!(!before.proxies[0].returned);

    assert_eq!(
        pool.return_extracted(T0 + 40, &client("c1"), &held).await,
        Ok(ReturnOutcome::Returned)
    );
    // Still EXTRACTED: not checked, so no passing check can make it AVAILABLE again.
    let due = pool
        .due_for_check(
            T0 + 50,
            DueQuery {
                limit: 10,
                recheck_after_ms: 0,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        due.iter().map(|r| r.id.clone()).collect::<BTreeSet<_>>(),
        spare.iter().cloned().collect::<BTreeSet<_>>()
    );
    // Given back once; the client no longer holds it.
    assert_eq!(
        pool.return_extracted(T0 + 60, &client("c1"), &held).await,
        Err(PoolError::NotFound)
    );
    // The stored response shows it returned, without its credentials.
    let stored = pool
        .get_extraction(T0 + 60, &client("c1"), &extraction)
        .await
        .unwrap();
    assert_eq!(extracted_ids(&stored), BTreeSet::from([held.clone()]));
    assert!(stored.proxies[0].returned && stored.proxies[0].password.is_none());

    // The other two go, then nothing: the returned one is nobody's.
    let out = pool
        .extract(T0 + 70, extract_request("c3", 3, ExtractMode::Partial))
        .await
        .unwrap();
    assert_eq!(
        extracted_ids(&out.response),
        spare.iter().cloned().collect::<BTreeSet<_>>()
    );
}

pub async fn extract_for_domain_skips_proxies_cooling_for_it<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 5).await;
    let cooling = [&ids[0], &ids[1], &ids[4]];
    let mut changes: Vec<CooldownChange> = cooling
        .iter()
        .map(|p| set(p, "a.test", 1_000, 1, 20_000))
        .collect();
    // Remembered but no longer cooling: usable for the domain.
    changes.push(set(&ids[2], "a.test", 50, 2, 20_000));
    // Cooling, but for another domain.
    changes.push(set(&ids[3], "b.test", 1_000, 1, 20_000));
    pool.apply_cooldowns(T0, &changes).await.unwrap();

    let short = pool
        .extract(
            T0 + 100,
            for_domain("c1", 3, ExtractMode::AllOrNothing, "a.test"),
        )
        .await;
    assert_eq!(
        short.unwrap_err(),
        PoolError::InsufficientInventory {
            requested: 3,
            matching: 2
        }
    );
    let out = pool
        .extract(
            T0 + 100,
            for_domain("c1", 5, ExtractMode::Partial, "a.test"),
        )
        .await
        .unwrap();
    assert_eq!(
        extracted_ids(&out.response),
        BTreeSet::from([ids[2].clone(), ids[3].clone()]),
        "the all-or-nothing shortfall took nothing; partial skips the cooling ones"
    );
    // For another domain the cooling proxies serve as usual.
    let other = pool
        .extract(
            T0 + 100,
            for_domain("c2", 2, ExtractMode::AllOrNothing, "b.test"),
        )
        .await
        .unwrap();
    assert_eq!(other.response.returned, 2);
    let left: ProxyId = ids
        .iter()
        .find(|id| !extracted_ids(&other.response).contains(*id) && cooling.contains(id))
        .cloned()
        .unwrap();
    let none = pool
        .extract(
            T0 + 999,
            for_domain("c3", 1, ExtractMode::Partial, "a.test"),
        )
        .await
        .unwrap();
    assert_eq!(none.response.returned, 0);
    // Once the cooldown ends, the domain may have it.
    let after = pool
        .extract(
            T0 + 1_000,
            for_domain("c3", 1, ExtractMode::AllOrNothing, "a.test"),
        )
        .await
        .unwrap();
    assert_eq!(extracted_ids(&after.response), BTreeSet::from([left]));
}

fn scoped(change: CooldownChange, project: &str) -> CooldownChange {
    let project = Some(proxypool_core::ProjectId::new(project).unwrap());
    match change {
        CooldownChange::Set(entry) => CooldownChange::Set(DomainCooldown { project, ..entry }),
        CooldownChange::Clear {
            proxy_id, domain, ..
        } => CooldownChange::Clear {
            proxy_id,
            domain,
            project,
        },
    }
}

pub async fn cooldowns_of_each_scope_are_merged_bounded_and_cleared_apart<F: PoolFactory>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    let p = &ids[0];
    let first = [
        set(p, "shop.test", 5_000, 1, 60_000),
        scoped(set(p, "shop.test", 9_000, 2, 60_000), "acme"),
        scoped(set(p, "shop.test", 7_000, 1, 60_000), "beta"),
    ];
    pool.apply_cooldowns(T0, &first).await.unwrap();
    // A flood of one project's reports on other domains fills that project's scope only.
    let flood: Vec<CooldownChange> = (0..MAX_COOLDOWNS_PER_PROXY + 8)
        .map(|i| {
            scoped(
                set(p, &format!("f{i:02}.test"), 1_000, 1, 10_000 + i as u64),
                "beta",
            )
        })
        .collect();
    pool.apply_cooldowns(T0 + 1, &flood).await.unwrap();
    // beta's `ok` on shop.test clears beta's entry only.
    let beta_ok = [scoped(clear(p, "shop.test"), "beta")];
    pool.apply_cooldowns(T0 + 2, &beta_ok).await.unwrap();

    let stored = cooldowns(&pool, T0 + 3, p).await;
    assert_eq!(stored, reference(&[&first, &flood, &beta_ok], T0 + 2));
    let on_shop: Vec<Option<&str>> = stored
        .iter()
        .filter(|e| e.domain == domain("shop.test"))
        .map(|e| e.project.as_ref().map(|p| p.as_str()))
        .collect();
    assert_eq!(
        on_shop,
        vec![None, Some("acme")],
        "shared first, then by project"
    );
    let beta_kept = stored
        .iter()
        .filter(|e| e.project.as_ref().is_some_and(|p| p.as_str() == "beta"))
        .count();
    // beta's scope was full (its shop.test entry and the latest-forgotten flood entries)
    // before its `ok` took one out.
    assert_eq!(beta_kept, MAX_COOLDOWNS_PER_PROXY - 1);
    // A shared `ok` clears the shared entry and leaves acme's.
    pool.apply_cooldowns(T0 + 4, &[clear(p, "shop.test")])
        .await
        .unwrap();
    let left: Vec<String> = cooldowns(&pool, T0 + 5, p)
        .await
        .into_iter()
        .filter(|e| e.domain == domain("shop.test"))
        .map(|e| e.project.map(|p| p.to_string()).unwrap_or_default())
        .collect();
    assert_eq!(left, vec!["acme".to_owned()]);
}

/// A flood of reports in many project scopes on one proxy (one batch, then one more scope
/// at a time) leaves the shared entry and at most [`MAX_PROJECT_SCOPES_PER_PROXY`] project
/// scopes, the ones the reference keeps: those remembered longest.
pub async fn cooldowns_project_scopes_per_proxy_are_bounded_as_the_reference_bounds_them<
    F: PoolFactory,
>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    let p = &ids[0];
    let scopes = MAX_PROJECT_SCOPES_PER_PROXY + 4;
    let mut flood = vec![set(p, "shop.test", 5_000, 1, 20_000)];
    for i in 0..scopes {
        // Two domains per scope; scope i is remembered until 30_000 + i.
        for name in ["shop.test", "other.test"] {
            let forget = 30_000 + i as u64;
            flood.push(scoped(set(p, name, 5_000, 1, forget), &format!("p{i:02}")));
        }
    }
    pool.apply_cooldowns(T0, &flood).await.unwrap();
    // One more scope, remembered longest of all, in a batch of its own.
    let late = [scoped(set(p, "shop.test", 5_000, 1, 40_000), "late")];
    pool.apply_cooldowns(T0 + 1, &late).await.unwrap();

    let stored = cooldowns(&pool, T0 + 2, p).await;
    assert_eq!(stored, reference(&[&flood, &late], T0 + 1));
    let kept: BTreeSet<Option<String>> = stored
        .iter()
        .map(|e| e.project.as_ref().map(|p| p.to_string()))
        .collect();
    let mut expected: BTreeSet<Option<String>> = (scopes - MAX_PROJECT_SCOPES_PER_PROXY + 1
        ..scopes)
        .map(|i| Some(format!("p{i:02}")))
        .collect();
    expected.insert(Some("late".to_owned()));
    expected.insert(None);
    assert_eq!(
        kept, expected,
        "the shared scope and the longest remembered"
    );
    assert_eq!(stored.len(), 1 + 1 + 2 * (MAX_PROJECT_SCOPES_PER_PROXY - 1));
}

pub async fn extract_for_domain_honours_shared_cooldowns_and_the_client_s_project_s<
    F: PoolFactory,
>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 3).await;
    // ids[0]: cooling for beta only; ids[1]: shared; ids[2]: none.
    let changes = [
        scoped(set(&ids[0], "a.test", 1_000, 1, 20_000), "beta"),
        set(&ids[1], "a.test", 1_000, 1, 20_000),
    ];
    pool.apply_cooldowns(T0, &changes).await.unwrap();
    // A beta client skips beta's report and the shared one; an acme client is not bound
    // by beta's report, only by the shared one.
    for (client, project, expected) in [("b1", "beta", &ids[2]), ("a1", "acme", &ids[0])] {
        let mut request = for_domain(client, 3, ExtractMode::Partial, "a.test");
        request.project = Some(proxypool_core::ProjectId::new(project).unwrap());
        let out = pool.extract(T0 + 100, request).await.unwrap();
        assert_eq!(
            extracted_ids(&out.response),
            BTreeSet::from([expected.clone()]),
            "a client of {project}"
        );
    }
}

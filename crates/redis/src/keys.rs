//! Key names the Rust side needs; the scripts build the rest from the same base.
//!
//! Every key is `{prefix}:{<tag>}:v3:<identity>:{name}`, where `<tag>` is the key's shard
//! group: `activity` for the first (the home group, and the only one of a pool in one
//! group), `activity.<n>` for the others (`group_tags`). One hash tag per group, so on a
//! Redis Cluster a group is one slot and every script, which touches one group, stays
//! atomic; the groups' tags are chosen so their slots fall in distinct ranges.
//! Keys carry ids and digests only, never a credential. `<identity>` is the store's current
//! incarnation (`proxypool_core::store_mark`), named by the one key outside it, the mark
//! `{prefix}:{activity}:v3:mark` (HASH: identity, generation, and during a recovery lost_at
//! and hold; no TTL). A new incarnation (after a loss, or an operator's forced recovery)
//! thus starts with an empty keyspace, atomically for every caller, while the abandoned
//! one lapses by its TTLs. A pool that checks no identity (tests, tools) uses
//! `{prefix}:{activity}:v3:` itself as its base.
//!
//! `v3` is the layout version. A process only reads keys of its own version, so a release
//! that changes the layout bumps it: after such an upgrade the new processes start with an
//! empty pool (the vendors refill it within one fetch interval) while the old keys lapse
//! by their TTLs. Version 2 (after the unversioned first layout) replaced the `available`
//! and per-filter sorted sets by one candidate index per filter combination and stores
//! proxy ids as 16 bytes in the per-proxy keys; version 3 put the pool under the store's
//! identity, added the record's issue time and withheld-until fields and `withheld`.
//!
//! `<bin id>` is the proxy id's 16 bytes, `<id>` its 32 hex digits.
//!
//! ```text
//! records                 HASH  bin id -> record, id field empty (credentials live only here)
//! withheld                ZSET  bin id -> withheld until      (records a recovery withholds)
//! expiry                  ZSET  bin id -> hard expiry             (every record)
//! checks                  ZSET  bin id -> check class + since     (checkable records)
//! cand:<p>/<u>/<r>/<c>    ZSET  bin id -> usable_until            (AVAILABLE, unowned; one
//!                               index per protocol, upstream, region, carrier; '' = none)
//! candidates              ZSET  <head bin id><p>/<u>/<r>/<c> -> the head's usable_until
//!                               (exactly the non-empty candidate indexes, each named with
//!                               its highest member, so the registry is in merge order)
//! candidate-heads         HASH  <p>/<u>/<r>/<c> -> bin id of that index's highest member
//! owners                  HASH  id -> assignment
//! extracted-by            HASH  id -> client an extraction handed it to and that still
//!                               holds it (EXTRACTED)
//! given-back              HASH  id -> client that gave it back (EXTRACTED, withheld until
//!                               its hard expiry or the vendor's new generation of it)
//! lease-epoch             HASH  id -> epoch of its latest lease since it last entered the
//!                               pool, what feedback tickets are bound to (not EXTRACTED)
//! owner-expiry            ZSET  id -> lease_until
//! drain-tickets           HASH  id -> drain epoch           (draining assignments)
//! owned:<u>               ZSET  id -> lease_until           (assigned, per upstream)
//! worker-owned:<w>        ZSET  id -> lease_until           (serving, per worker)
//! worker-draining:<w>     ZSET  id -> lease_until           (draining, per worker)
//! epoch                   STRING global ownership epoch (INCR)
//! inventory               HASH  <u> -> un-extracted, <u>:<status> -> records by status,
//!                               <u>:slots -> sum of max_sessions of unowned candidates
//! worker-sessions         HASH  worker -> session;        worker-session-expiry  ZSET
//! worker-snapshots        HASH  worker -> issued snapshot; worker-snapshot-expiry ZSET
//! worker-runtime          HASH  worker -> runtime report;  worker-runtime-expiry  ZSET
//! idem:<extraction id>    STRING stored extraction response (PX);  idem-expiry ZSET
//! idem:<id>:<token>       STRING one group's part of an extraction over several groups,
//!                               taken under the claim <token> (PX; idem-expiry)
//! xclaim:<extraction id>  HASH  token, client, digest: the claim of an extraction over
//!                               several groups while its parts are taken (in its anchor
//!                               group, beside its stored response; PX)
//! op:<digest>             STRING stored upsert result (PX);        op-expiry   ZSET
//! keys                    SET   names of the dynamic ownership index keys (footprint/sweeps)
//! leases                  HASH  lease name -> holder, token, acquired_at, expires_at
//! lease-tokens            HASH  lease name -> last fencing token (no TTL: tokens only grow,
//!                               and never below the time they are issued at)
//! worker-modes            HASH  worker -> mode, since        (cordoned or draining only)
//! admin-calls             HASH  client\tkey -> worker, mode, since (a keyed mode change's
//!                               answer);  admin-calls-end ZSET client\tkey -> held until
//! provider-status         HASH  upstream -> provider status (JSON, the leader's reconciler)
//! usage-seen:<w>          HASH  client\tupstream -> a gateway's last accounted totals
//! usage-total:<c>         HASH  upstream\tkind -> amount (kept a year after the last use)
//! usage-m:<c> usage-h:<c> HASH  period\tupstream\tkind -> amount (pruned to an hour / a day)
//! cooldowns              HASH  id -> its cooldowns, one line per domain (live records)
//! cooldown-forget        ZSET  id -> earliest forget_at of its cooldowns (for sweeps)
//! session-feedback       HASH  feedback id -> session feedback (JSON)
//! session-feedback-order ZSET  feedback id -> arrival number (session-feedback-seq, INCR)
//! session-feedback-expiry ZSET feedback id -> expires_at
//! snapshot-versions      HASH  worker -> counter of writes that may change its snapshot
//!                               (HINCRBY in the shared helpers); '*feedback' -> counter of
//!                               session feedback; '*floor:<w>' -> the highest counter value
//!                               of <w> its journal forgot (present once <w> had a journal).
//!                               Lives as long as the epoch.
//! snapshot-journal:<w>   ZSET  id -> the value of <w>'s counter at the proxy's latest
//!                               change (at most `SNAPSHOT_JOURNAL_CAP` ids, the lowest
//!                               trimmed; a slack past its latest change)
//! ticket-key             STRING the key of the gateways' feedback tickets (64 hex digits;
//!                               made once by `ticket_key.lua`, SET NX; kept with the pool
//!                               state and 30 days past its last read)
//! ```
//!
//! No `unique` (unique-key digest -> proxy id) or `idkeys` (proxy id -> digest) hashes
//! are kept: core defines the proxy id *as* the unique-key digest
//! (`proxy_id_for`), so both would map every id to itself. `records` is keyed by it
//! directly, and sorted-set ties break by id exactly as MemoryPool's ordered sets do.
//! Worker and upstream ids appear in key names as they are: both are validated to a
//! key-safe alphabet without braces.

use proxypool_core::{ExtractionId, UpstreamId};
use sha2::{Digest, Sha256};

/// The key layout version, part of every key name (see the module doc).
const LAYOUT_VERSION: &str = "v3";

/// The hash tag of the home group (the first), the one of a pool kept in one group.
pub(crate) const HOME_TAG: &str = "activity";

/// The number of hash slots of a Redis Cluster.
const SLOTS: usize = 16_384;

/// The hash tags of `groups` shard groups: `activity`, then `activity.<n>` with the
/// smallest `n` whose slot lies in the next of `groups` equal slot ranges (counting on from
/// the home tag's range), so a cluster whose primaries split the slots evenly, as
/// `redis-cli --cluster create` does, serves each group from another primary while there
/// are no more groups than primaries.
pub(crate) fn group_tags(groups: usize) -> Vec<String> {
    let range = |tag: &str| slot(tag) * groups / SLOTS;
    let home = range(HOME_TAG);
    let mut tags = vec![HOME_TAG.to_owned()];
    for i in 1..groups {
        let wanted = (home + i) % groups;
        let tag = (0..)
            .map(|n| format!("{HOME_TAG}.{n}"))
            .find(|tag| range(tag) == wanted)
            .expect("every slot range holds some tag");
        tags.push(tag);
    }
    tags
}

/// The cluster hash slot of a key whose whole name is its hash tag.
pub(crate) fn slot(tag: &str) -> usize {
    usize::from(crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes())) % SLOTS
}

/// The base of a group that checks no identity: `{prefix}:{<tag>}:v3:`.
pub(crate) fn base(prefix: &str, tag: &str) -> String {
    format!("{prefix}:{{{tag}}}:{LAYOUT_VERSION}:")
}

/// The base of the incarnation `identity`: `{prefix}:{<tag>}:v3:<identity>:`.
pub(crate) fn incarnation_base(prefix: &str, tag: &str, identity: &str) -> String {
    format!("{}{identity}:", base(prefix, tag))
}

/// The group's copy of the store's mark: `{prefix}:{<tag>}:v3:mark`.
pub(crate) fn mark(prefix: &str, tag: &str) -> String {
    format!("{}mark", base(prefix, tag))
}

/// Where an extraction's response is stored (the extraction id is already a digest of the
/// client and its idempotency key or request id).
pub(crate) fn extraction(id: &ExtractionId) -> String {
    format!("idem:{id}")
}

/// Where the claim of an extraction over several groups is kept (its anchor group), while
/// its parts are taken.
pub(crate) fn extraction_claim(id: &ExtractionId) -> String {
    format!("xclaim:{id}")
}

/// Where one group keeps its part of the extraction `id` taken under the claim `token`.
pub(crate) fn extraction_part(id: &ExtractionId, token: &str) -> String {
    format!("idem:{id}:{token}")
}

/// Where an upsert operation's result is stored; `chunk` names one chunk of the batch.
pub(crate) fn operation(upstream: &UpstreamId, operation_id: &str, chunk: Option<usize>) -> String {
    let chunk = chunk.map(|c| c.to_string()).unwrap_or_default();
    let mut hasher = Sha256::new();
    for part in [upstream.as_str(), operation_id, chunk.as_str()] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("op:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_tags_start_at_home_and_fall_in_distinct_slot_ranges() {
        assert_eq!(group_tags(1), vec![HOME_TAG.to_owned()]);
        // The slot Redis documents for a known key: CRC16("123456789") = 0x31C3.
        assert_eq!(slot("123456789"), 0x31C3);
        for groups in [2, 3, 5, 8] {
            let tags = group_tags(groups);
            assert_eq!(tags.len(), groups);
            assert_eq!(tags[0], HOME_TAG);
            let mut ranges: Vec<usize> = tags.iter().map(|t| slot(t) * groups / SLOTS).collect();
            ranges.sort_unstable();
            ranges.dedup();
            assert_eq!(ranges.len(), groups, "{tags:?}");
        }
    }

    #[test]
    fn keys_share_one_hash_tag_and_hide_operation_ids() {
        assert_eq!(base("pp", HOME_TAG), "pp:{activity}:v3:");
        assert_eq!(mark("pp", HOME_TAG), "pp:{activity}:v3:mark");
        assert_eq!(
            incarnation_base("pp", HOME_TAG, "ab"),
            "pp:{activity}:v3:ab:"
        );
        let upstream = UpstreamId::new("acme").unwrap();
        let whole = operation(&upstream, "fetch-42", None);
        assert!(whole.starts_with("op:") && !whole.contains("fetch"));
        assert_ne!(whole, operation(&upstream, "fetch-42", Some(0)));
        assert_ne!(
            operation(&upstream, "fetch-42", Some(1)),
            operation(&upstream, "fetch-42", Some(0))
        );
    }
}

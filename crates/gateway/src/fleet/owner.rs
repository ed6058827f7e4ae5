//! Which member owns a key: rendezvous (highest random weight) hashing over the members
//! of the current list that this gateway has not found unreachable.
//!
//! Each member scores `mix64(fnv1a64(client id, '\0', table key) ^ seed)`, its seed being
//! `fnv1a64(worker id)` ([`super::view`]), and the highest score owns the key (a tie, which
//! needs a 64-bit collision, goes to the lower worker id). Every gateway holding the same
//! list picks the same owner without a word to anyone; a member that leaves moves only the
//! keys it owned, each to the member that scored second; hashing by worker id alone (not
//! the pin) gives a member restarted under its id exactly its keys back. The hash is
//! spelled out (FNV-1a, the splitmix64 finaliser), never the standard library's hasher,
//! so processes and versions agree; the tests pin its values.
//!
//! A member a hop could not reach is left out locally until its mark expires
//! ([`Owners::mark_unreachable`]): the key goes to the next member in rendezvous order,
//! which is who every gateway falls to, and who the controllers' list agrees on once the
//! dead member's session lapses.
//!
//! Moved keys: when the key's owner in one of the lists this gateway remembers is not the
//! member serving it now, the serving member has no pin for it although the key had one
//! elsewhere; the request says so (`moved`) and its session answers `reassigned`, not
//! `new`.

use super::view::{FleetView, Member, fnv1a64};
use proxypool_core::{ClientId, LockExt, WorkerId};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a keyed request is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Here: this gateway owns the key, or no fleet is in force (off, this gateway not in
    /// the list with its pin yet, or alone). `moved`: the key's owner in a remembered
    /// list was another member.
    Local { moved: bool },
    /// At `member`; `moved`: the key's owner in a remembered list was another member.
    Remote { member: Member, moved: bool },
}

/// Members found unreachable, with when (monotonic milliseconds) each mark ends, and how
/// long replaced member lists count for moved keys.
#[derive(Debug)]
pub(crate) struct Owners {
    unreachable: Mutex<HashMap<WorkerId, u64>>,
    remember_ms: AtomicU64,
}

impl Default for Owners {
    fn default() -> Self {
        Owners::new()
    }
}

impl Owners {
    pub(crate) fn new() -> Self {
        Owners {
            unreachable: Mutex::default(),
            remember_ms: AtomicU64::new(u64::MAX),
        }
    }

    /// Leaves `worker` out of ownership here until `until_mono_ms`.
    pub(crate) fn mark_unreachable(&self, worker: &WorkerId, until_mono_ms: u64) {
        // One entry per member ever marked: bounded by the configured workers.
        let mut marks = self.unreachable.lock_or_recover();
        let until = marks.entry(worker.clone()).or_insert(until_mono_ms);
        *until = (*until).max(until_mono_ms);
    }

    /// Whether `worker` is marked unreachable at `mono_now`.
    pub(crate) fn is_unreachable(&self, worker: &WorkerId, mono_now: u64) -> bool {
        self.unreachable
            .lock_or_recover()
            .get(worker)
            .is_some_and(|until| *until > mono_now)
    }

    /// Where the key (`client`, `key`: [`crate::routing::rotation::fleet_key`]) is served.
    pub(crate) fn choose(
        &self,
        view: &FleetView,
        client: &ClientId,
        key: &str,
        mono_now: u64,
        held_here: impl Fn() -> bool,
    ) -> Choice {
        self.choose_skipping(view, client, key, None, mono_now, held_here)
    }

    /// How long a replaced member list still counts for moved keys (a key unused for
    /// longer than `sessions.max_minutes` has no pin anywhere to miss); unbounded until
    /// set.
    pub(crate) fn remember_lists_for(&self, ms: u64) {
        self.remember_ms.store(ms, Ordering::Relaxed);
    }

    /// The owner of `key` once `failed` did not answer (it is skipped whether or not its
    /// mark has been set yet).
    pub(crate) fn next_after(
        &self,
        view: &FleetView,
        client: &ClientId,
        key: &str,
        failed: &WorkerId,
        mono_now: u64,
        held_here: impl Fn() -> bool,
    ) -> Choice {
        self.choose_skipping(view, client, key, Some(failed), mono_now, held_here)
    }

    /// The owner among the reachable members (this gateway when keys are not shared), and
    /// whether the key moved: its owner in a remembered list (one this gateway relayed
    /// under) or among every listed member was another. A key that was this gateway's
    /// moved only if it holds a pin for it (`held_here`), so a new key is not called moved.
    fn choose_skipping(
        &self,
        view: &FleetView,
        client: &ClientId,
        key: &str,
        failed: Option<&WorkerId>,
        mono_now: u64,
        held_here: impl Fn() -> bool,
    ) -> Choice {
        let current = view.current();
        let me = view.me();
        let my_pin = view.my_pin();
        let relaying_now = relaying(&current.list, me, my_pin);
        let hash = key_hash(client, key);
        let reachable = |member: &&Member| {
            member.worker == *me
                || (Some(&member.worker) != failed
                    && !self.is_unreachable(&member.worker, mono_now))
        };
        let owner = relaying_now
            .then(|| owner_of(hash, current.list.iter().filter(reachable)))
            .flatten();
        let owner_worker = owner.map_or(me, |owner| &owner.worker);
        // Lists replaced longer ago than a session lives are no longer a key's past.
        let remember_ms = self.remember_ms.load(Ordering::Relaxed);
        let history = view.history();
        let now = proxypool_core::clock::monotonic_ms();
        let moved = history
            .iter()
            .filter(|(_, replaced_ms)| now.saturating_sub(*replaced_ms) <= remember_ms)
            .filter(|(list, _)| relaying(&list.list, me, my_pin))
            .filter_map(|(list, _)| owner_of(hash, list.list.iter()))
            .chain(
                relaying_now
                    .then(|| owner_of(hash, current.list.iter()))
                    .flatten(),
            )
            .any(|previous| {
                previous.worker != *owner_worker && (previous.worker != *me || held_here())
            });
        match owner {
            Some(owner) if owner.worker != *me => Choice::Remote {
                member: owner.clone(),
                moved,
            },
            _ => Choice::Local { moved },
        }
    }
}

/// Whether keys are shared at all: the list holds this gateway with its current pin (so
/// its peers can know it) and at least one other member.
fn relaying(members: &[Member], me: &WorkerId, my_pin: &str) -> bool {
    members.len() >= 2
        && members
            .iter()
            .any(|member| member.worker == *me && member.pin_hex == my_pin)
}

/// The hash of a key: FNV-1a over the client id, a NUL and the table key (a client id
/// has no NUL, so no two (client, key) pairs hash the same input).
pub(crate) fn key_hash(client: &ClientId, key: &str) -> u64 {
    let client = client.as_str();
    let mut input = Vec::with_capacity(client.len() + 1 + key.len());
    input.extend_from_slice(client.as_bytes());
    input.push(0);
    input.extend_from_slice(key.as_bytes());
    fnv1a64(&input)
}

/// The splitmix64 finaliser: spreads FNV's weak low bits over the whole score.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The member scoring highest for the key of `hash` (ties to the lower worker id).
fn owner_of<'a>(hash: u64, members: impl Iterator<Item = &'a Member>) -> Option<&'a Member> {
    members.max_by(|a, b| {
        mix64(hash ^ a.seed)
            .cmp(&mix64(hash ^ b.seed))
            .then_with(|| b.worker.cmp(&a.worker))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::fleet::FleetMember;

    fn pin_hex(worker: &str) -> String {
        format!("{:064x}", fnv1a64(worker.as_bytes()))
    }

    fn listed(workers: &[&str]) -> Vec<FleetMember> {
        workers
            .iter()
            .map(|worker| FleetMember {
                worker: WorkerId::new(worker).unwrap(),
                address: format!("{worker}.internal:7443"),
                spki_sha256: pin_hex(worker),
                since_ms: 1,
            })
            .collect()
    }

    /// The view of member `me` holding the list `workers`.
    fn view_of(me: &str, workers: &[&str]) -> FleetView {
        let view = FleetView::new(WorkerId::new(me).unwrap(), pin_hex(me));
        view.replace(listed(workers));
        view
    }

    fn client(id: &str) -> ClientId {
        ClientId::new(id).unwrap()
    }

    /// The worker serving `key` of `client` as `view`'s gateway sees it.
    fn served_by(owners: &Owners, view: &FleetView, client: &ClientId, key: &str) -> String {
        match owners.choose(view, client, key, 0, || false) {
            Choice::Local { .. } => view.me().to_string(),
            Choice::Remote { member, .. } => member.worker.to_string(),
        }
    }

    #[test]
    fn the_hash_and_the_owners_are_pinned() {
        // Computed apart from this code (FNV-1a 64 and splitmix64 as published): a change
        // of either would move every key of a fleet running two versions.
        assert_eq!(key_hash(&client("alice"), "s1"), 0x3603_8279_6b07_d689);
        assert_eq!(mix64(0), 0);
        assert_eq!(mix64(1), 0x5692_161d_100b_05e5);
        let all = ["gw-a", "gw-b", "gw-c", "gw-d"];
        let expected = [
            ("alice", "s1", "gw-a"),
            ("alice", "s4", "gw-c"),
            ("alice", "~n3", "gw-c"),
            ("alice", "~t30000", "gw-d"),
            ("bob", "s1", "gw-c"),
            ("bob", "s2", "gw-d"),
            ("bob", "~n3", "gw-a"),
        ];
        let owners = Owners::new();
        for me in all {
            let view = view_of(me, &all);
            for (who, key, owner) in expected {
                assert_eq!(
                    served_by(&owners, &view, &client(who), key),
                    owner,
                    "{who} {key} at {me}"
                );
            }
        }
        // Without gw-d its keys go to the next in order; the others stay.
        let view = view_of("gw-a", &all[..3]);
        assert_eq!(
            served_by(&owners, &view, &client("alice"), "~t30000"),
            "gw-c"
        );
        assert_eq!(served_by(&owners, &view, &client("alice"), "s1"), "gw-a");
    }

    #[test]
    fn every_member_agrees_and_a_leaving_member_moves_only_its_keys() {
        let all = ["gw-a", "gw-b", "gw-c", "gw-d", "gw-e"];
        let owners = Owners::new();
        let views: Vec<FleetView> = all.iter().map(|me| view_of(me, &all)).collect();
        let without_c: Vec<&str> = all.iter().copied().filter(|w| *w != "gw-c").collect();
        let after = view_of("gw-a", &without_c);
        let alice = client("alice");
        let (mut moved, mut owned_by_c) = (0, 0);
        let mut per_member = std::collections::HashMap::new();
        for n in 0..10_000 {
            let key = format!("s{n}");
            let owner = served_by(&owners, &views[0], &alice, &key);
            for view in &views[1..] {
                assert_eq!(served_by(&owners, view, &alice, &key), owner, "{key}");
            }
            *per_member.entry(owner.clone()).or_insert(0) += 1;
            let now = served_by(&owners, &after, &alice, &key);
            if owner == "gw-c" {
                owned_by_c += 1;
                assert_ne!(now, "gw-c");
            } else {
                assert_eq!(now, owner, "{key} stays where it was");
            }
            moved += usize::from(now != owner);
        }
        assert_eq!(moved, owned_by_c, "only gw-c's keys move");
        for (member, count) in per_member {
            assert!(
                (1_500..2_500).contains(&count),
                "{member} owns {count} of 10000"
            );
        }
    }

    #[test]
    fn an_unreachable_member_is_skipped_until_its_mark_ends() {
        let all = ["gw-a", "gw-b", "gw-c", "gw-d"];
        let view = view_of("gw-b", &all);
        let owners = Owners::new();
        let alice = client("alice");
        // alice's "~t30000" is gw-d's, then gw-c's.
        let d = WorkerId::new("gw-d").unwrap();
        owners.mark_unreachable(&d, 1_000);
        assert!(owners.is_unreachable(&d, 999));
        match owners.choose(&view, &alice, "~t30000", 999, || false) {
            Choice::Remote { member, moved } => {
                assert_eq!(member.worker.as_str(), "gw-c");
                assert!(moved, "the key had another owner: reassigned, not new");
            }
            other => panic!("{other:?}"),
        }
        assert!(!owners.is_unreachable(&d, 1_000));
        assert_eq!(
            owners.choose(&view, &alice, "~t30000", 1_000, || false),
            Choice::Remote {
                member: view.current().list[3].clone(),
                moved: false
            }
        );
        // The next owner after a failure, whatever the mark.
        let fresh = Owners::new();
        match fresh.next_after(&view, &alice, "~t30000", &d, 0, || false) {
            Choice::Remote { member, .. } => assert_eq!(member.worker.as_str(), "gw-c"),
            other => panic!("{other:?}"),
        }
        // This gateway itself is never skipped: alice's "s1" is gw-a's.
        let at_a = view_of("gw-a", &all);
        fresh.mark_unreachable(at_a.me(), u64::MAX);
        assert_eq!(
            fresh.choose(&at_a, &alice, "s1", 0, || false),
            Choice::Local { moved: false }
        );
    }

    #[test]
    fn local_without_a_fleet_in_force() {
        let owners = Owners::new();
        let alice = client("alice");
        // Alone in the list, or not listed yet, or listed with another pin.
        let alone = view_of("gw-a", &["gw-a"]);
        assert_eq!(
            owners.choose(&alone, &alice, "s4", 0, || false),
            Choice::Local { moved: false }
        );
        let unlisted = view_of("gw-e", &["gw-a", "gw-c"]);
        assert_eq!(
            owners.choose(&unlisted, &alice, "s4", 0, || false),
            Choice::Local { moved: false }
        );
        let restarted = FleetView::new(WorkerId::new("gw-a").unwrap(), "0".repeat(64));
        restarted.replace(listed(&["gw-a", "gw-c"]));
        assert_eq!(
            owners.choose(&restarted, &alice, "s4", 0, || false),
            Choice::Local { moved: false }
        );
        let empty = FleetView::new(WorkerId::new("gw-a").unwrap(), pin_hex("gw-a"));
        assert_eq!(
            owners.choose(&empty, &alice, "s4", 0, || false),
            Choice::Local { moved: false }
        );
    }

    #[test]
    fn a_key_whose_owner_changed_is_moved_while_the_old_list_is_remembered() {
        let alice = client("alice");
        let owners = Owners::new();
        // "~t30000" is gw-c's among a, b, c and gw-d's once d joins.
        let view = view_of("gw-a", &["gw-a", "gw-b", "gw-c"]);
        view.replace(listed(&["gw-a", "gw-b", "gw-c", "gw-d"]));
        match owners.choose(&view, &alice, "~t30000", 0, || false) {
            Choice::Remote { member, moved } => {
                assert_eq!(member.worker.as_str(), "gw-d");
                assert!(moved);
            }
            other => panic!("{other:?}"),
        }
        // A key that stayed with its owner did not move.
        match owners.choose(&view, &alice, "s4", 0, || false) {
            Choice::Remote { member, moved } => {
                assert_eq!(member.worker.as_str(), "gw-c");
                assert!(!moved);
            }
            other => panic!("{other:?}"),
        }
        // A key that moved here, from another member: reassigned here too.
        let at_d = view_of("gw-d", &["gw-a", "gw-b", "gw-c", "gw-d"]);
        assert_eq!(
            owners.choose(&at_d, &alice, "~t30000", 0, || false),
            Choice::Local { moved: false }
        );
        let joined = view_of("gw-c", &["gw-a", "gw-b", "gw-c"]);
        joined.replace(listed(&["gw-a", "gw-b", "gw-c", "gw-d"]));
        match owners.choose(&joined, &alice, "~t30000", 0, || false) {
            Choice::Remote { member, moved } => {
                assert_eq!(member.worker.as_str(), "gw-d");
                // It was gw-c's own key: moved only if gw-c held a session under it.
                assert!(!moved, "a key gw-c never pinned is new to gw-d");
            }
            other => panic!("{other:?}"),
        }
        match owners.choose(&joined, &alice, "~t30000", 0, || true) {
            Choice::Remote { moved, .. } => assert!(moved, "gw-c's session moved"),
            other => panic!("{other:?}"),
        }
        // Once lists are forgotten after a session's longest life, nothing moved.
        owners.remember_lists_for(0);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(
            owners.choose(&view, &alice, "~t30000", 0, || true),
            Choice::Remote {
                member: view.current().list[3].clone(),
                moved: false
            }
        );
    }

    #[test]
    fn a_fleet_shrunk_to_this_gateway_still_knows_what_moved() {
        let alice = client("alice");
        let owners = Owners::new();
        let view = view_of("gw-a", &["gw-a", "gw-b"]);
        let theirs = (0..100)
            .map(|n| format!("s{n}"))
            .find(|key| served_by(&owners, &view, &alice, key) == "gw-b")
            .expect("one of 100 keys is gw-b's");
        let mine = (0..100)
            .map(|n| format!("s{n}"))
            .find(|key| served_by(&owners, &view, &alice, key) == "gw-a")
            .expect("one of 100 keys is gw-a's");
        view.replace(listed(&["gw-a"]));
        assert_eq!(
            owners.choose(&view, &alice, &theirs, 0, || false),
            Choice::Local { moved: true },
            "gw-b left: its key is reassigned here"
        );
        assert_eq!(
            owners.choose(&view, &alice, &mine, 0, || true),
            Choice::Local { moved: false },
            "a key that was here all along did not move"
        );
    }

    #[test]
    fn lists_this_gateway_did_not_relay_under_are_no_key_s_past() {
        let alice = client("alice");
        let owners = Owners::new();
        // Started while the list did not hold it yet, then listed beside gw-b.
        let view = view_of("gw-a", &["gw-b"]);
        view.replace(listed(&["gw-a", "gw-b"]));
        for n in 0..50 {
            let key = format!("s{n}");
            let moved = match owners.choose(&view, &alice, &key, 0, || false) {
                Choice::Local { moved } | Choice::Remote { moved, .. } => moved,
            };
            assert!(!moved, "{key}: a new key is not reassigned");
        }
    }
}

//! The view's rules: malformed pins left out, versions and history, lookups, the hash
//! pinned to known values, and coalesced refresh requests.

use super::*;
use proxypool_core::fleet::FleetMember;

fn pin_hex(byte: u8) -> String {
    format!("{byte:02x}").repeat(32)
}

fn member(worker: &str, byte: u8) -> FleetMember {
    FleetMember {
        worker: WorkerId::new(worker).unwrap(),
        address: format!("{worker}.internal:7443"),
        spki_sha256: pin_hex(byte),
        since_ms: 1_000,
    }
}

fn view() -> FleetView {
    FleetView::new(WorkerId::new("gw-a").unwrap(), pin_hex(0xaa))
}

fn workers(members: &Members) -> Vec<&str> {
    members.list.iter().map(|m| m.worker.as_str()).collect()
}

#[test]
fn fnv1a64_matches_the_published_values() {
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
}

#[test]
fn replace_keeps_well_formed_members_sorted_with_their_seed() {
    let view = view();
    assert_eq!(view.current().version, 0);
    assert!(view.current().list.is_empty());
    let mut upper = member("gw-c", 0xcc);
    upper.spki_sha256 = upper.spki_sha256.to_uppercase();
    let mut short = member("gw-d", 0xdd);
    short.spki_sha256.truncate(10);
    view.replace(vec![
        member("gw-b", 0xbb),
        upper,
        short,
        member("gw-a", 0xaa),
    ]);
    let current = view.current();
    assert_eq!(
        workers(&current),
        ["gw-a", "gw-b"],
        "bad pins left out, sorted"
    );
    assert_eq!(current.version, 1);
    let b = &current.list[1];
    assert_eq!(b.pin, [0xbb; 32]);
    assert_eq!(b.pin_hex, pin_hex(0xbb));
    assert_eq!(b.seed, fnv1a64(b"gw-b"));
    assert_eq!(
        (b.address.as_str(), b.since_ms),
        ("gw-b.internal:7443", 1_000)
    );
    assert!(view.history().is_empty(), "the empty start is no list seen");
}

#[test]
fn versions_move_on_change_and_history_keeps_the_last_eight() {
    let view = view();
    view.replace(vec![member("gw-a", 0xaa)]);
    view.replace(vec![member("gw-a", 0xaa)]);
    assert_eq!(
        view.current().version,
        1,
        "the same list again is no new version"
    );
    assert!(view.history().is_empty());
    for n in 0..10u8 {
        view.replace(vec![member("gw-a", 0xaa), member(&format!("gw-{n}"), n)]);
    }
    assert_eq!(view.current().version, 11);
    let history = view.history();
    assert_eq!(history.len(), HISTORY);
    let versions: Vec<u64> = history.iter().map(|(list, _)| list.version).collect();
    assert_eq!(
        versions,
        (3..=10).collect::<Vec<_>>(),
        "oldest first, the newest kept"
    );
    assert!(history.windows(2).all(|w| w[0].1 <= w[1].1));
    assert_eq!(workers(&history[7].0), ["gw-8", "gw-a"]);
}

#[test]
fn lookups_by_pin_and_whether_i_am_listed() {
    let view = view();
    assert!(!view.includes_me());
    view.replace(vec![member("gw-a", 0x01), member("gw-b", 0xbb)]);
    assert!(
        !view.includes_me(),
        "listed with an old pin: not yet known as I am"
    );
    assert_eq!(
        view.member_by_pin(&[0xbb; 32]).map(|m| m.worker),
        Some(WorkerId::new("gw-b").unwrap())
    );
    assert_eq!(view.member_by_pin(&[0xcc; 32]), None);
    view.replace(vec![member("gw-a", 0xaa), member("gw-b", 0xbb)]);
    assert!(view.includes_me());
    assert_eq!(
        (view.me().as_str(), view.my_pin()),
        ("gw-a", pin_hex(0xaa).as_str())
    );
}

/// Counts the refresh requests the control loop would see.
fn count_requests(view: &Arc<FleetView>) -> Arc<AtomicU64> {
    let count = Arc::new(AtomicU64::new(0));
    let (view, seen) = (Arc::clone(view), Arc::clone(&count));
    tokio::spawn(async move {
        loop {
            view.refresh_wanted().await;
            seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    count
}

#[tokio::test(start_paused = true)]
async fn refresh_requests_are_coalesced_and_waits_bounded() {
    let view = Arc::new(view());
    let requests = count_requests(&view);
    let started = Instant::now();
    view.refresh_now(Duration::from_millis(100)).await;
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(100),
        "nothing came: the bound"
    );
    view.refresh_now(Duration::from_millis(100)).await;
    tokio::task::yield_now().await;
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "within 250 ms: one request"
    );
    // A millisecond past the spacing: the view counts whole milliseconds.
    tokio::time::sleep_until(started + REFRESH_EVERY + Duration::from_millis(1)).await;
    view.refresh_now(Duration::from_millis(100)).await;
    tokio::task::yield_now().await;
    assert_eq!(
        requests.load(Ordering::SeqCst),
        2,
        "250 ms on: a new request"
    );
}

#[tokio::test(start_paused = true)]
async fn refresh_now_returns_with_the_next_list() {
    let view = Arc::new(view());
    let answering = Arc::clone(&view);
    tokio::spawn(async move {
        answering.refresh_wanted().await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        answering.replace(vec![member("gw-b", 0xbb)]);
    });
    let started = Instant::now();
    view.refresh_now(Duration::from_secs(1)).await;
    assert_eq!(started.elapsed(), Duration::from_millis(30));
    assert_eq!(workers(&view.current()), ["gw-b"]);
}

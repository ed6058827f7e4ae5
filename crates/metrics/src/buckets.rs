//! Bucket bounds per histogram family. A family's bounds are chosen by the role that
//! records it ([`set_buckets`], next to its `describe_histogram!`), because the right
//! range depends on what is measured: a Redis call takes tenths of a millisecond, a
//! tunnel lives for minutes. A family nobody chose gets [`DEFAULT_BUCKETS`].
//!
//! The choice is process-wide (family names are global in one exposition) and read when a
//! series is first created, so it must be made before the family's first handle.

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock};

/// Upper bounds (seconds) for a family nobody chose bounds for: 0.5 ms to 10 s covers an
/// API request, an upstream dial and a store call alike.
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Calls that usually take well under a millisecond (an activity-pool or quota store on
/// the same network): 0.1 ms to 2.5 s.
pub const STORE_CALL_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Work that crosses the internet and may run into its timeouts (a vendor list fetch, a
/// health check through a proxy): 10 ms to a minute.
pub const REMOTE_CALL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
];

/// Most bounds one family may have: every bound is a series line on every scrape.
pub const MAX_BUCKETS: usize = 32;

static CHOSEN: RwLock<BTreeMap<String, &'static [f64]>> = RwLock::new(BTreeMap::new());

/// Chooses the bucket upper bounds of the histogram family `family` (the `+Inf` bucket is
/// always added). Series of the family created afterwards use them; call it before the
/// family's first handle, where the family is described.
///
/// # Panics
///
/// When `bounds` is empty, longer than [`MAX_BUCKETS`], not strictly ascending or not
/// finite: a programming error, caught by the first test that describes the family.
pub fn set_buckets(family: &str, bounds: &'static [f64]) {
    assert!(
        !bounds.is_empty() && bounds.len() <= MAX_BUCKETS,
        "{family}: 1 to {MAX_BUCKETS} bucket bounds"
    );
    assert!(
        bounds.iter().all(|b| b.is_finite()) && bounds.windows(2).all(|w| w[0] < w[1]),
        "{family}: bucket bounds must be finite and strictly ascending"
    );
    CHOSEN
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(family.to_owned(), bounds);
}

/// The bounds of `family`: its chosen ones, else [`DEFAULT_BUCKETS`].
pub(crate) fn buckets_of(family: &str) -> &'static [f64] {
    CHOSEN
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(family)
        .copied()
        .unwrap_or(DEFAULT_BUCKETS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_gets_its_chosen_bounds_and_others_the_default() {
        set_buckets("t_buckets_chosen_seconds", &[1.0, 60.0]);
        assert_eq!(buckets_of("t_buckets_chosen_seconds"), &[1.0, 60.0]);
        assert_eq!(buckets_of("t_buckets_other_seconds"), DEFAULT_BUCKETS);
    }

    #[test]
    #[should_panic(expected = "strictly ascending")]
    fn bounds_out_of_order_are_refused() {
        set_buckets("t_buckets_bad_seconds", &[2.0, 1.0]);
    }

    #[test]
    #[should_panic(expected = "1 to 32")]
    fn no_bounds_are_refused() {
        set_buckets("t_buckets_empty_seconds", &[]);
    }
}

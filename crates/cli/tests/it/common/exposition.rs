//! Scraping `/metrics` and reading the Prometheus text it returns, for the tests that
//! check what a running process exports.

use super::curl;
use std::collections::{BTreeMap, BTreeSet};

/// `GET url`; the body, or `None` when it did not answer.
pub fn scrape(url: &str) -> Option<String> {
    let (code, body) = curl(&["-f", url]);
    (code == 0).then_some(body)
}

/// The families a scrape declares (its `# TYPE` lines).
pub fn families(text: &str) -> BTreeSet<String> {
    types(text).into_keys().collect()
}

/// The families a scrape declares, with their type (`counter`, `gauge`, `histogram`...).
pub fn types(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_owned(), kind.trim().to_owned()))
        .collect()
}

/// Every sample of `name` (exactly that name, not its `_bucket`/`_sum` siblings) as
/// (label text, value).
pub fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let labels = match series.strip_prefix(name)? {
                "" => "",
                rest if rest.starts_with('{') => rest,
                _ => return None,
            };
            Some((labels.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The sum of the samples of `name` whose labels contain every one of `with`.
pub fn total(text: &str, name: &str, with: &[&str]) -> f64 {
    samples(text, name)
        .iter()
        .filter(|(labels, _)| with.iter().all(|w| labels.contains(w)))
        .map(|(_, v)| v)
        .sum()
}

/// How many ownership rounds the leading controller whose `/metrics` is at `url` ran: each
/// round asks the store for assignable proxies once, and nothing else does. 0 when it does
/// not answer (or never led).
pub fn ownership_rounds(url: &str) -> f64 {
    scrape(url).map_or(0.0, |text| {
        total(
            &text,
            "proxypool_controller_store_duration_seconds_count",
            &["call=\"assignable\""],
        )
    })
}

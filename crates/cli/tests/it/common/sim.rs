//! `proxypool sim` as the tests run it: a real process with rotation off, started and
//! read up to the end of its banner, and the banner's `label   value   (comment)` lines.

use super::{Proc, Scratch};
use std::time::Duration;

/// Starts `proxypool sim` with `proxies` proxies that never rotate, and waits for its
/// banner (the last line says how to stop it).
pub fn start_sim(scratch: &Scratch, proxies: usize) -> Proc {
    let proxies = proxies.to_string();
    let mut sim = Proc::start(
        "sim",
        &["sim", "--proxies", &proxies, "--proxy-ttl", "0"],
        &[],
        &scratch.path,
    );
    sim.read_until(Duration::from_secs(20), |line| line == "Stop with Ctrl-C.");
    sim
}

/// The value after `label` on a banner line (`  label   value   (comment)`).
pub fn banner_field<'a>(lines: &'a [String], label: &str) -> &'a str {
    lines
        .iter()
        .find_map(|line| line.trim_start().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no {label:?} in {lines:#?}"))
}

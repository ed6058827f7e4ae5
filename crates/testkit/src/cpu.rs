//! CPU time of a process from `/proc`, for benchmarks that report CPU per operation (the
//! steadier number on a shared machine): user + system time of `/proc/<pid>/stat` in
//! clock ticks, and the tick rate to turn them into time.

use std::time::Duration;

/// User + system CPU time of process `pid` (a number, or `"self"`) in clock ticks
/// (`/proc/<pid>/stat`, fields 14 and 15); `None` when it cannot be read (not Linux, or
/// the process is gone).
pub fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100, Linux's value, if it cannot be asked).
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100)
}

/// User + system CPU time of process `pid` (see [`cpu_ticks`]).
pub fn cpu_time(pid: &str) -> Option<Duration> {
    let ticks = cpu_ticks(pid)?;
    Some(Duration::from_nanos(
        ticks * 1_000_000_000 / clock_ticks_per_second(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_used_some_cpu_and_a_missing_one_none() {
        let spin = std::time::Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0);
        }
        assert!(cpu_ticks("self").unwrap() > 0);
        assert!(cpu_time("self").unwrap() >= Duration::from_millis(10));
        assert_eq!(cpu_ticks("0"), None);
    }
}

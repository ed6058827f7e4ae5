//! Process metrics, read from `/proc` when `/metrics` is rendered (never sampled in the
//! background): `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_open_fds`, `process_start_time_seconds`. Where `/proc` is missing (not
//! Linux) or a file cannot be read, that metric is left out rather than reported as 0.

use crate::render::number;
use std::fmt::Write as _;

/// `USER_HZ`: the unit of the tick counts in `/proc/self/stat`. The kernel reports them
/// in `USER_HZ`, which is 100 on every architecture Linux supports today (reading
/// `sysconf` would need `libc` and `unsafe`).
const TICKS_PER_SECOND: f64 = 100.0;

/// Appends the process families to `out`.
pub(crate) fn render(out: &mut String) {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|text| Stat::parse(&text));
    if let Some(stat) = &stat {
        family(
            out,
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            (stat.utime + stat.stime) as f64 / TICKS_PER_SECOND,
        );
    }
    if let Some(rss) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|text| resident_bytes(&text))
    {
        family(
            out,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            rss as f64,
        );
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        // The directory handle itself is one of the entries: not counted.
        let open = entries.count().saturating_sub(1);
        family(
            out,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            open as f64,
        );
    }
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|text| boot_time(&text));
    if let (Some(stat), Some(boot)) = (&stat, boot) {
        family(
            out,
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since the Unix epoch in seconds.",
            boot as f64 + stat.starttime as f64 / TICKS_PER_SECOND,
        );
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    let _ = writeln!(out, "{name} {}", number(value));
}

/// The fields of `/proc/self/stat` used here (in clock ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    utime: u64,
    stime: u64,
    starttime: u64,
}

impl Stat {
    /// The command name (field 2) is in parentheses and may hold spaces and `)`, so the
    /// fields are counted from the last `)`: field 3 (state) is the first after it.
    fn parse(text: &str) -> Option<Stat> {
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Field n (1-based, as in proc(5)) is fields[n - 3].
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Stat {
            utime: field(14)?,
            stime: field(15)?,
            starttime: field(22)?,
        })
    }
}

/// `VmRSS:   1234 kB` in `/proc/self/status` (in kB whatever the page size).
fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `btime <seconds>` in `/proc/stat`: when the machine booted.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let line = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 7000 1000 300 18446744073709551615";
        assert_eq!(
            Stat::parse(line),
            Some(Stat {
                utime: 250,
                stime: 50,
                starttime: 7000
            })
        );
        assert_eq!(Stat::parse("42 (truncated"), None);
    }

    #[test]
    fn status_and_stat_lines_parse() {
        assert_eq!(
            resident_bytes("Name:\tx\nVmRSS:\t  2048 kB\nThreads: 3\n"),
            Some(2048 * 1024)
        );
        assert_eq!(resident_bytes("Name:\tx\n"), None);
        assert_eq!(
            boot_time("cpu 1 2 3\nbtime 1700000000\nprocesses 5\n"),
            Some(1_700_000_000)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reports_all_four() {
        let mut out = String::new();
        render(&mut out);
        let value = |name: &str| -> f64 {
            let prefix = format!("{name} ");
            out.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("{name} missing: {out}"))
                .parse()
                .unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 1_000_000.0);
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_cpu_seconds_total") >= 0.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(
            started <= now + 1.0 && started > now - 3600.0,
            "{started} vs {now}"
        );
        assert!(out.contains("# TYPE process_cpu_seconds_total counter\n"));
    }
}

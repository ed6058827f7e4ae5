//! The Prometheus text exposition format (version 0.0.4): one `# HELP` and `# TYPE` per
//! family (a described family without series yet shows just those two lines), families
//! and series in a stable order (by name, then by label set), label values escaped,
//! histogram buckets cumulative in ascending `le` order ending at `+Inf`.

use crate::recorder::{Registry, read};
use crate::redact::Scope;
use metrics::Key;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

/// One family: its type and its series' lines by label set (a histogram's lines stay in
/// the order they were made).
type Families = BTreeMap<String, (&'static str, BTreeMap<String, Vec<String>>)>;

/// The exposition of the series `scope` shows (a family left without series keeps its help
/// and type).
pub(crate) fn render(registry: &Registry, scope: Scope) -> String {
    let help = read(&registry.help).clone();
    let mut families: Families = BTreeMap::new();
    let mut add = |key: &Key, kind: &'static str, lines: Vec<String>| {
        families
            .entry(sanitize(key.name()))
            .or_insert_with(|| (kind, BTreeMap::new()))
            .1
            .insert(labels(key, None), lines);
    };
    for (key, value) in copy(&registry.counters, scope) {
        let value = value.load(Ordering::Relaxed);
        let line = format!("{}{} {value}", sanitize(key.name()), labels(&key, None));
        add(&key, "counter", vec![line]);
    }
    for (key, value) in copy(&registry.gauges, scope) {
        let value = number(f64::from_bits(value.load(Ordering::Relaxed)));
        let line = format!("{}{} {value}", sanitize(key.name()), labels(&key, None));
        add(&key, "gauge", vec![line]);
    }
    for (key, histogram) in copy(&registry.histograms, scope) {
        let name = sanitize(key.name());
        let mut lines = Vec::with_capacity(histogram.bounds.len() + 3);
        let mut cumulative = 0;
        for (bound, count) in histogram.bounds.iter().zip(&histogram.buckets) {
            cumulative += count.load(Ordering::Relaxed);
            let le = number(*bound);
            lines.push(format!(
                "{name}_bucket{} {cumulative}",
                labels(&key, Some(&le))
            ));
        }
        // Read after the buckets: a value recorded in between makes the count at least
        // the last bucket, never less (`+Inf` must not fall below a finite bucket).
        let count = histogram.count.load(Ordering::Relaxed).max(cumulative);
        let sum = number(f64::from_bits(histogram.sum_bits.load(Ordering::Relaxed)));
        lines.push(format!(
            "{name}_bucket{} {count}",
            labels(&key, Some("+Inf"))
        ));
        lines.push(format!("{name}_sum{} {sum}", labels(&key, None)));
        lines.push(format!("{name}_count{} {count}", labels(&key, None)));
        add(&key, "histogram", lines);
    }
    // A described family with no series yet is rendered with its help and type and no
    // samples, so a scrape shows every family a role exports from its start (an error
    // counter that never fired included).
    for (name, (kind, _)) in &help {
        families
            .entry(sanitize(name))
            .or_insert_with(|| (kind, BTreeMap::new()));
    }
    let mut out = String::new();
    for (name, (kind, series)) in families {
        if let Some((_, text)) = help.get(&name) {
            let _ = writeln!(out, "# HELP {name} {}", escape_help(text));
        }
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for line in series.into_values().flatten() {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// Copies out the series `scope` shows, so no lock is held while formatting.
fn copy<T>(map: &RwLock<HashMap<Key, Arc<T>>>, scope: Scope) -> Vec<(Key, Arc<T>)> {
    read(map)
        .iter()
        .filter(|(key, _)| scope.shows(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// A sample value as Prometheus spells it (`+Inf`, `-Inf`, `NaN`; integers without `.0`).
pub(crate) fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value == f64::INFINITY {
        "+Inf".to_owned()
    } else if value == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        value.to_string()
    }
}

/// `{a="1",b="2"}` in the order the caller gave the labels (plus `le` last for a
/// bucket), or nothing without labels. Each call site names its labels in one order, so
/// one label set is one series.
fn labels(key: &Key, le: Option<&str>) -> String {
    let mut pairs: Vec<(String, &str)> = key
        .labels()
        .map(|label| (sanitize(label.key()), label.value()))
        .collect();
    if let Some(le) = le {
        pairs.push(("le".to_owned(), le));
    }
    if pairs.is_empty() {
        return String::new();
    }
    let body: Vec<String> = pairs
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape_label(value)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// A label value: backslash, double quote and line feed are escaped.
pub(crate) fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A help text: backslash and line feed are escaped (quotes are fine there).
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A metric or label name: anything outside `[a-zA-Z0-9_:]` becomes `_`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::recorder::TextRecorder;

    fn rendered(record: impl FnOnce()) -> String {
        let recorder = TextRecorder::new();
        metrics::with_local_recorder(&recorder, record);
        super::render(&recorder.registry, crate::redact::Scope::Everything)
    }

    #[test]
    fn counters_and_gauges_render_with_help_and_type_once_per_family() {
        let text = rendered(|| {
            metrics::describe_counter!(
                "t_requests_total",
                "Requests by route.\nSecond line \\ end"
            );
            metrics::counter!("t_requests_total", "status" => "200", "route" => "/v1/x")
                .increment(2);
            metrics::counter!("t_requests_total", "status" => "200", "route" => "/v1/x")
                .increment(1);
            metrics::counter!("t_requests_total", "status" => "503", "route" => "/v1/x")
                .increment(1);
            metrics::describe_gauge!("t_open", "Open.");
            metrics::gauge!("t_open").set(2.5);
            metrics::gauge!("t_whole").set(3.0);
            metrics::gauge!("t_inf").set(f64::INFINITY);
            metrics::describe_counter!("t_never_total", "Never.");
        });
        assert_eq!(
            text.matches("# TYPE t_requests_total counter\n").count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("# HELP t_requests_total Requests by route.\\nSecond line \\\\ end\n"),
            "{text}"
        );
        // Labels in the caller's order; one line per label set, summed.
        assert!(
            text.contains("t_requests_total{status=\"200\",route=\"/v1/x\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("t_requests_total{status=\"503\",route=\"/v1/x\"} 1\n"));
        assert!(text.contains("# HELP t_open Open.\n# TYPE t_open gauge\nt_open 2.5\n"));
        assert!(text.contains("t_whole 3\n"), "{text}");
        assert!(text.contains("t_inf +Inf\n"), "{text}");
        // Described, never recorded: help and type, no sample.
        assert!(
            text.contains("# HELP t_never_total Never.\n# TYPE t_never_total counter\n# "),
            "{text}"
        );
        assert!(!text.contains("\nt_never_total"), "{text}");
        // Families in name order, help before type before samples.
        let a = text.find("# HELP t_open").unwrap();
        let b = text.find("# HELP t_requests_total").unwrap();
        assert!(a < b, "{text}");
        assert!(text.find("# TYPE t_open").unwrap() > a);
    }

    #[test]
    fn label_values_are_escaped() {
        let text = rendered(|| {
            metrics::counter!("t_escaped_total", "value" => "a\"b\\c\nd").increment(1);
        });
        assert!(
            text.contains("t_escaped_total{value=\"a\\\"b\\\\c\\nd\"} 1\n"),
            "{text}"
        );
        // The raw line feed did not split the sample.
        assert!(!text.contains("\nd\""), "{text}");
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_inf() {
        let text = rendered(|| {
            let h = metrics::histogram!("t_seconds", "call" => "x");
            h.record(0.0001); // first bucket
            h.record(0.003); // le=0.005
            h.record(0.003);
            h.record(0.7); // le=1
            h.record(20.0); // only +Inf
        });
        let buckets: Vec<(String, u64)> = text
            .lines()
            .filter(|l| l.starts_with("t_seconds_bucket"))
            .map(|l| {
                let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap();
                let n = l.rsplit(' ').next().unwrap().parse().unwrap();
                (le.to_owned(), n)
            })
            .collect();
        assert_eq!(buckets.len(), crate::DEFAULT_BUCKETS.len() + 1, "{text}");
        assert_eq!(buckets[0], ("0.0005".to_owned(), 1));
        let at = |le: &str| buckets.iter().find(|(b, _)| b == le).unwrap().1;
        assert_eq!(at("0.0025"), 1);
        assert_eq!(at("0.005"), 3);
        assert_eq!(at("0.5"), 3);
        assert_eq!(at("1"), 4);
        assert_eq!(at("10"), 4);
        assert_eq!(buckets.last().unwrap(), &("+Inf".to_owned(), 5));
        assert!(
            buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "not cumulative: {buckets:?}"
        );
        assert!(text.contains("# TYPE t_seconds histogram\n"), "{text}");
        assert!(text.contains("t_seconds_count{call=\"x\"} 5\n"), "{text}");
        assert!(
            text.contains("t_seconds_sum{call=\"x\"} 20.7061\n"),
            "{text}"
        );
        assert!(text.contains("t_seconds_bucket{call=\"x\",le=\"+Inf\"} 5\n"));
    }

    #[test]
    fn a_family_with_chosen_bounds_renders_those_and_counts_a_value_on_a_bound_in_it() {
        crate::set_buckets("t_tunnel_seconds", &[1.0, 60.0, 3600.0]);
        let text = rendered(|| {
            let h = metrics::histogram!("t_tunnel_seconds");
            h.record(0.2);
            h.record(60.0); // on a bound: le is inclusive
            h.record(7200.0);
        });
        let bucket_lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("t_tunnel_seconds_bucket"))
            .collect();
        assert_eq!(
            bucket_lines,
            [
                "t_tunnel_seconds_bucket{le=\"1\"} 1",
                "t_tunnel_seconds_bucket{le=\"60\"} 2",
                "t_tunnel_seconds_bucket{le=\"3600\"} 2",
                "t_tunnel_seconds_bucket{le=\"+Inf\"} 3",
            ],
            "{text}"
        );
    }
}

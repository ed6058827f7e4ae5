//! PromQL as the shipped observability files write it (the Grafana dashboard's panels, the
//! Prometheus alert rules), checked against what a running `proxypool dev` exports.
//!
//! A dashboard or a rules file is only text: nothing else notices when a metric it queries
//! is renamed or dropped, its panels go blank and its alerts never fire. [`parse_promql`]
//! pulls the metric names, label names and typed calls out of an expression;
//! [`dev_scrape_after_traffic`] starts `dev`, sends traffic through every path and scrapes
//! its `/metrics` until every queried family has a sample; [`assert_exported`] names every
//! metric that is not exported, every counter function on a gauge and every label no sample
//! carries.

use super::exposition::{samples, scrape, types};
use super::{
    Proc, Scratch, curl, exit_via_http, exit_via_socks5, extract_one, poll_until, start_dev,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Families that get their first series only when something fails or is denied: in a
/// healthy `dev` they are declared (`# TYPE`) but have no sample, so only their
/// declaration is checked.
pub const SILENT_UNTIL_FAILURE: &[&str] = &[
    "proxypool_api_quota_denials_total",
    "proxypool_api_quota_settlements_total",
    "proxypool_api_policy_denials_total",
    "proxypool_api_rate_limited_total",
    "proxypool_api_overload_total",
    "proxypool_gateway_upstream_failures_total",
    "proxypool_gateway_target_failures_total",
    "proxypool_gateway_destination_denials_total",
    "proxypool_controller_store_errors_total",
];

/// Labels Prometheus attaches at scrape time (`job`, `instance`) or that come with a
/// histogram's buckets (`le`): never on the exporter's plain samples.
pub const SCRAPE_LABELS: [&str; 3] = ["job", "instance", "le"];

/// PromQL functions and aggregation operators: an identifier followed by `(` must be one
/// of these (a misspelled function fails here instead of in Grafana or Prometheus).
const FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "avg",
    "avg_over_time",
    "bottomk",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "count",
    "count_over_time",
    "count_values",
    "day_of_month",
    "day_of_week",
    "days_in_month",
    "delta",
    "deriv",
    "exp",
    "floor",
    "group",
    "histogram_quantile",
    "hour",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "max",
    "max_over_time",
    "min",
    "min_over_time",
    "minute",
    "month",
    "predict_linear",
    "quantile",
    "quantile_over_time",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sort",
    "sort_desc",
    "sqrt",
    "stddev",
    "stddev_over_time",
    "stdvar",
    "stdvar_over_time",
    "sum",
    "sum_over_time",
    "time",
    "timestamp",
    "topk",
    "vector",
    "year",
];

/// Keywords that take a label list in parentheses.
const GROUPING: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Other keywords (binary operators, modifiers, literals).
const KEYWORDS: [&str; 8] = [
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
];

/// Functions whose range-vector argument must be a counter (or a histogram's series).
const COUNTER_FUNCTIONS: [&str; 3] = ["rate", "irate", "increase"];

/// What one PromQL expression refers to.
#[derive(Debug, Default, PartialEq)]
pub struct Parsed {
    /// Metric names, as written (`_bucket` and all).
    pub metrics: Vec<String>,
    /// Label names in matchers and in `by`/`without`/`on`/`ignoring` lists.
    pub labels: BTreeSet<String>,
    /// (function, the first metric inside its call) for the functions that care what
    /// kind of metric they get.
    pub calls: Vec<(String, String)>,
}

/// Extracts metric names, label names and typed calls from a PromQL expression, with
/// Grafana's `$variables` ignored. String literals, range and subquery brackets and
/// numbers (durations included) are skipped; an identifier is a function when `(`
/// follows, a label list's keyword, another keyword, or else a metric name.
pub fn parse_promql(expr: &str) -> Result<Parsed, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut parsed = Parsed::default();
    let mut pending: Vec<String> = Vec::new();
    let mut in_matcher = false;
    let mut i = 0;
    let ident_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':';
    let ident_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let read_ident = |i: &mut usize| {
        let start = *i;
        while *i < chars.len() && ident_char(chars[*i]) {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>()
    };
    let next_non_space = |mut i: usize| {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        i
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => {
                i += 1;
                while i < chars.len() && chars[i] != c {
                    // Backquoted strings have no escapes.
                    i += if chars[i] == '\\' && c != '`' { 2 } else { 1 };
                }
                if i >= chars.len() {
                    return Err(format!("unterminated string in {expr:?}"));
                }
                i += 1;
            }
            '[' => {
                let close = chars[i..].iter().position(|&c| c == ']');
                i += close.ok_or_else(|| format!("unclosed [ in {expr:?}"))? + 1;
            }
            '{' => {
                in_matcher = true;
                i += 1;
            }
            '}' => {
                in_matcher = false;
                i += 1;
            }
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    let close = chars[i..].iter().position(|&c| c == '}');
                    i += close.ok_or_else(|| format!("unclosed ${{ in {expr:?}"))? + 1;
                } else {
                    read_ident(&mut i);
                }
            }
            c if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                // A number or a duration (`5m`, `1e3`, `0.99`).
                while i < chars.len() && (ident_char(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
            }
            c if ident_start(c) => {
                let ident = read_ident(&mut i);
                if in_matcher {
                    parsed.labels.insert(ident);
                    continue;
                }
                let after = next_non_space(i);
                let opens = chars.get(after) == Some(&'(');
                if GROUPING.contains(&ident.as_str()) {
                    if opens {
                        let close = chars[after..].iter().position(|&c| c == ')');
                        let close = after
                            + close.ok_or_else(|| format!("unclosed {ident}( in {expr:?}"))?;
                        let list: String = chars[after + 1..close].iter().collect();
                        for label in list.split(',').map(str::trim).filter(|l| !l.is_empty()) {
                            parsed.labels.insert(label.to_owned());
                        }
                        i = close + 1;
                    }
                } else if KEYWORDS.contains(&ident.as_str()) {
                    // An operator, a modifier or a literal: nothing to record.
                } else if opens || grouped_next(&chars[after..]) {
                    if !FUNCTIONS.contains(&ident.as_str()) {
                        return Err(format!("unknown function {ident}() in {expr:?}"));
                    }
                    if COUNTER_FUNCTIONS.contains(&ident.as_str()) || ident == "histogram_quantile"
                    {
                        pending.push(ident);
                    }
                } else {
                    for function in pending.drain(..) {
                        parsed.calls.push((function, ident.clone()));
                    }
                    parsed.metrics.push(ident);
                }
            }
            _ => i += 1,
        }
    }
    if let Some(function) = pending.first() {
        return Err(format!("{function}() of no metric in {expr:?}"));
    }
    Ok(parsed)
}

/// Whether `rest` starts with `by` or `without`: `sum by (x) (...)`, an aggregation
/// that puts its grouping before its argument.
fn grouped_next(rest: &[char]) -> bool {
    let word: String = rest
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
        .collect();
    word == "by" || word == "without"
}

/// One expression (of a dashboard panel or variable, or of an alert rule) and where it is.
#[derive(Debug)]
pub struct Query {
    /// The panel's title, `variable NAME` or the alert's name.
    pub place: String,
    pub parsed: Parsed,
}

/// The family a queried name belongs to: a histogram's `_bucket`, `_sum` and `_count`
/// belong to the histogram; anything else is its own family. `None` when the scrape
/// declares neither.
pub fn family_of<'a>(name: &'a str, declared: &BTreeMap<String, String>) -> Option<&'a str> {
    if declared.contains_key(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let base = name.strip_suffix(suffix)?;
        (declared.get(base).map(String::as_str) == Some("histogram")).then_some(base)
    })
}

/// Everything wrong between the queries and a scrape, one line each: a metric not
/// exported, a counter function on something other than a counter, a quantile of
/// something other than a histogram's buckets, a label no sample of the expression's
/// metrics carries.
pub fn problems(queries: &[Query], scrape: &str) -> Vec<String> {
    let declared = types(scrape);
    let mut problems = Vec::new();
    for query in queries {
        let place = &query.place;
        for metric in &query.parsed.metrics {
            if family_of(metric, &declared).is_none() {
                problems.push(format!("{place}: {metric} is not exported"));
            }
        }
        for (function, metric) in &query.parsed.calls {
            let Some(family) = family_of(metric, &declared) else {
                continue;
            };
            let kind = declared[family].as_str();
            let fine = if function == "histogram_quantile" {
                kind == "histogram" && metric.ends_with("_bucket")
            } else {
                kind == "counter" || (kind == "histogram" && family != metric)
            };
            if !fine {
                problems.push(format!("{place}: {function}() of {metric}, a {kind}"));
            }
        }
        // Labels can only be checked against samples, and a family silent until its
        // first failure has none.
        let series: Vec<String> = query
            .parsed
            .metrics
            .iter()
            .flat_map(|m| samples(scrape, m))
            .map(|(labels, _)| labels)
            .collect();
        if series.is_empty() {
            continue;
        }
        for label in &query.parsed.labels {
            let pattern = format!("{label}=\"");
            let carried = series.iter().any(|labels| {
                labels
                    .trim_start_matches('{')
                    .split(',')
                    .any(|pair| pair.starts_with(&pattern))
            });
            if !SCRAPE_LABELS.contains(&label.as_str()) && !carried {
                problems.push(format!(
                    "{place}: no sample of {:?} has the label {label}",
                    query.parsed.metrics
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// The queried families that have no sample yet (apart from [`SILENT_UNTIL_FAILURE`]).
pub fn unsampled(queries: &[Query], scrape: &str) -> Vec<String> {
    let declared = types(scrape);
    let families: BTreeSet<&str> = queries
        .iter()
        .flat_map(|q| &q.parsed.metrics)
        .filter_map(|m| family_of(m, &declared))
        .collect();
    families
        .into_iter()
        .filter(|family| !SILENT_UNTIL_FAILURE.contains(family))
        .filter(|family| {
            let name = match declared[*family].as_str() {
                "histogram" => format!("{family}_count"),
                _ => (*family).to_owned(),
            };
            samples(scrape, &name).is_empty()
        })
        .map(str::to_owned)
        .collect()
}

/// Starts `dev` (no rotation, so the pool holds still) under `scratch`, sends traffic
/// through every path so the request, byte, dial, extraction and quota families have
/// samples and their labels can be checked (HTTP forwards and SOCKS5 through the gateway, a
/// CONNECT tunnel, one extraction through the client API), then scrapes its `/metrics`
/// until every family `queries` names has a sample, or 60 s pass (the controller's loops
/// and its 2 s gauges need a round or two). Returns the running `dev` and the last scrape.
pub fn dev_scrape_after_traffic(scratch: &Scratch, queries: &[Query]) -> (Proc, String) {
    let (dev, banner) = start_dev("dev", scratch, &["--proxy-ttl", "0"]);
    for _ in 0..3 {
        exit_via_http(&banner, "dev");
        exit_via_socks5(&banner, "dev");
    }
    let proxy = format!("http://dev:{}@{}", banner.password(), banner.http());
    let (code, body) = curl(&["-p", "-x", &proxy, banner.origin()]);
    assert_eq!(code, 0, "a CONNECT tunnel through the gateway: {body}");
    let extraction = extract_one(&banner);
    assert_eq!(extraction["returned"], 1, "{extraction}");

    let url = format!("{}/metrics", banner.api());
    // The last scrape, sampled or not: `assert_exported` names what is missing.
    let mut text = String::new();
    poll_until(Duration::from_secs(60), || {
        text = scrape(&url).unwrap_or_default();
        unsampled(queries, &text).is_empty().then_some(())
    });
    (dev, text)
}

/// Fails, naming every problem, unless every family `queries` uses is exported by the
/// scrape `text`, with the right type and labels, and has a sample. `what` names the file
/// the queries come from.
pub fn assert_exported(what: &str, queries: &[Query], text: &str) {
    let problems = problems(queries, text);
    assert!(
        problems.is_empty(),
        "{what} does not match what dev exports:\n  {}\n\nscrape:\n{text}",
        problems.join("\n  ")
    );
    let unsampled = unsampled(queries, text);
    assert!(
        unsampled.is_empty(),
        "{what}: no samples within 60 s for {unsampled:?}\n\nscrape:\n{text}"
    );
}

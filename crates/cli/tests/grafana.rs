//! The Grafana dashboard `deploy/grafana/proxypool.json` against what proxypool exports.
//!
//! A dashboard is only JSON: nothing else notices when a metric it queries is renamed or
//! dropped, its panels just go blank. So this test reads every PromQL expression of every
//! panel (and of the template variables), extracts the metric names, and compares them
//! with a scrape of a running `proxypool dev` that has served gateway traffic and one
//! extraction. It also checks the dashboard's shape (valid JSON, every panel on the
//! `${datasource}` variable, a unit and a description on every panel) and that `rate()`,
//! `increase()` and `histogram_quantile()` are applied to counters and histogram buckets.

mod common;

use common::exposition::{samples, scrape, types};
use common::{Scratch, curl, curl_or_skip, exit_via_http, exit_via_socks5, start_dev};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/grafana/proxypool.json"
);

/// The data-source variable every panel must use (a fixed uid would only work in the
/// Grafana it was exported from).
const DATASOURCE: &str = "${datasource}";

/// The rows, in order.
const ROWS: [&str; 5] = ["Overview", "Gateway", "Controller", "Quota", "Usage"];

/// Families that get their first series only when something fails or is denied: in a
/// healthy `dev` they are declared (`# TYPE`) but have no sample, so only their
/// declaration is checked.
const SILENT_UNTIL_FAILURE: &[&str] = &[
    "proxypool_api_quota_denials_total",
    "proxypool_api_quota_settlements_total",
    "proxypool_api_policy_denials_total",
    "proxypool_api_rate_limited_total",
    "proxypool_api_overload_total",
    "proxypool_gateway_upstream_failures_total",
    "proxypool_gateway_destination_denials_total",
    "proxypool_controller_store_errors_total",
];

/// Labels Prometheus attaches at scrape time (`job`, `instance`) or that come with a
/// histogram's buckets (`le`): never on the exporter's plain samples.
const SCRAPE_LABELS: [&str; 3] = ["job", "instance", "le"];

/// PromQL functions and aggregation operators: an identifier followed by `(` must be one
/// of these (a misspelled function fails here instead of in Grafana).
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
struct Parsed {
    /// Metric names, as written (`_bucket` and all).
    metrics: Vec<String>,
    /// Label names in matchers and in `by`/`without`/`on`/`ignoring` lists.
    labels: BTreeSet<String>,
    /// (function, the first metric inside its call) for the functions that care what
    /// kind of metric they get.
    calls: Vec<(String, String)>,
}

/// Extracts metric names, label names and typed calls from a PromQL expression, with
/// Grafana's `$variables` ignored. String literals, range and subquery brackets and
/// numbers (durations included) are skipped; an identifier is a function when `(`
/// follows, a label list's keyword, another keyword, or else a metric name.
fn parse_promql(expr: &str) -> Result<Parsed, String> {
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

/// One expression of the dashboard and where it is.
#[derive(Debug)]
struct Query {
    /// The panel's title, or `variable NAME`.
    place: String,
    parsed: Parsed,
}

/// Reads the dashboard and checks its shape: valid JSON, the five rows, the
/// `${datasource}`, `job` and `instance` variables, a 10 s refresh, and on every panel the
/// data-source variable, a unit, a description and at least one query. Returns every
/// expression, parsed.
fn read_dashboard(text: &str) -> Result<Vec<Query>, String> {
    let dashboard: Value =
        serde_json::from_str(text).map_err(|e| format!("the dashboard is not JSON: {e}"))?;
    if dashboard["refresh"] != "10s" {
        return Err(format!("refresh is {}, not 10s", dashboard["refresh"]));
    }
    if !dashboard["schemaVersion"].is_u64() {
        return Err("no schemaVersion".to_owned());
    }
    let variables = dashboard["templating"]["list"]
        .as_array()
        .ok_or("no templating list")?;
    let variable = |name: &str| variables.iter().find(|v| v["name"] == name);
    match variable("datasource") {
        Some(v) if v["type"] == "datasource" && v["query"] == "prometheus" => {}
        _ => return Err("no Prometheus data-source variable named datasource".to_owned()),
    }
    let mut queries = Vec::new();
    for name in ["job", "instance"] {
        let v = variable(name).ok_or_else(|| format!("no {name} variable"))?;
        let place = format!("variable {name}");
        uses_datasource(&place, &v["datasource"])?;
        // `label_values(SELECTOR, LABEL)`: only the selector names metrics.
        let query = v["query"]["query"].as_str().or(v["query"].as_str());
        let selector = query
            .and_then(|q| q.strip_prefix("label_values("))
            .and_then(|q| q.rsplit_once(',').map(|(selector, _)| selector))
            .ok_or_else(|| format!("{place}: not label_values(SELECTOR, LABEL): {query:?}"))?;
        let parsed = parse_promql(selector).map_err(|e| format!("{place}: {e}"))?;
        queries.push(Query { place, parsed });
    }

    let mut panels = Vec::new();
    flatten(&dashboard["panels"], &mut panels);
    let rows: Vec<&str> = panels
        .iter()
        .filter(|p| p["type"] == "row")
        .filter_map(|p| p["title"].as_str())
        .collect();
    if rows != ROWS {
        return Err(format!("rows are {rows:?}, not {ROWS:?}"));
    }
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let place = panel["title"].as_str().unwrap_or("(untitled)").to_owned();
        uses_datasource(&place, &panel["datasource"])?;
        if panel["fieldConfig"]["defaults"]["unit"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            return Err(format!("panel {place:?} has no unit"));
        }
        if panel["description"].as_str().is_none_or(str::is_empty) {
            return Err(format!("panel {place:?} has no description"));
        }
        let targets = panel["targets"].as_array().map_or(&[][..], Vec::as_slice);
        if targets.is_empty() {
            return Err(format!("panel {place:?} has no query"));
        }
        for target in targets {
            if !target["datasource"].is_null() {
                uses_datasource(&place, &target["datasource"])?;
            }
            let expr = target["expr"]
                .as_str()
                .filter(|e| !e.trim().is_empty())
                .ok_or_else(|| format!("panel {place:?} has a query without expr"))?;
            let parsed = parse_promql(expr).map_err(|e| format!("panel {place:?}: {e}"))?;
            if parsed.metrics.is_empty() {
                return Err(format!("panel {place:?}: {expr:?} queries no metric"));
            }
            queries.push(Query {
                place: place.clone(),
                parsed,
            });
        }
    }
    Ok(queries)
}

/// Every panel, rows and the panels nested in collapsed rows included.
fn flatten<'a>(panels: &'a Value, out: &mut Vec<&'a Value>) {
    for panel in panels.as_array().into_iter().flatten() {
        out.push(panel);
        flatten(&panel["panels"], out);
    }
}

/// Whether `datasource` is the data-source variable (as an object or a plain string).
fn uses_datasource(place: &str, datasource: &Value) -> Result<(), String> {
    let uid = datasource["uid"].as_str().or(datasource.as_str());
    match uid {
        Some(DATASOURCE) => Ok(()),
        None => Err(format!("{place:?} has no datasource")),
        Some(other) => Err(format!(
            "{place:?} uses datasource {other:?}, not {DATASOURCE}"
        )),
    }
}

/// The family a queried name belongs to: a histogram's `_bucket`, `_sum` and `_count`
/// belong to the histogram; anything else is its own family. `None` when the scrape
/// declares neither.
fn family_of<'a>(name: &'a str, declared: &BTreeMap<String, String>) -> Option<&'a str> {
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
fn problems(queries: &[Query], scrape: &str) -> Vec<String> {
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
fn unsampled(queries: &[Query], scrape: &str) -> Vec<String> {
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

fn dashboard_text() -> String {
    std::fs::read_to_string(DASHBOARD).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"))
}

#[test]
fn every_family_the_dashboard_queries_is_exported_by_a_running_dev() {
    let queries = read_dashboard(&dashboard_text()).unwrap_or_else(|e| panic!("{e}"));
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("grafana");
    let (mut dev, banner) = start_dev("dev", &scratch, &["--proxy-ttl", "0"]);
    // Traffic first, so the request, byte, dial, extraction and quota families have
    // samples and their labels can be checked: HTTP forwards, a CONNECT tunnel, SOCKS5,
    // and one extraction through the client API.
    for _ in 0..3 {
        exit_via_http(&banner, "dev");
        exit_via_socks5(&banner, "dev");
    }
    let proxy = format!("http://dev:{}@{}", banner.password(), banner.http());
    let (code, body) = curl(&["-p", "-x", &proxy, banner.origin()]);
    assert_eq!(code, 0, "a CONNECT tunnel through the gateway: {body}");
    let (code, body) = curl(&[
        "-H",
        &format!("Authorization: Bearer {}", banner.token()),
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"count":1}"#,
        &format!("{}/v1/extractions", banner.api()),
    ]);
    assert_eq!(code, 0, "the extraction: {body}");
    let extraction: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(extraction["returned"], 1, "{body}");

    // The controller's loops (fetch, check, sweep) and its 2 s gauges need a round or
    // two before every family has a sample: poll with a deadline.
    let url = format!("{}/metrics", banner.api());
    let deadline = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = scrape(&url).unwrap_or_default();
        if unsampled(&queries, &text).is_empty() || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let problems = problems(&queries, &text);
    assert!(
        problems.is_empty(),
        "the dashboard does not match what dev exports:\n  {}\n\nscrape:\n{text}",
        problems.join("\n  ")
    );
    let unsampled = unsampled(&queries, &text);
    assert!(
        unsampled.is_empty(),
        "no samples within 60 s for {unsampled:?}\n\nscrape:\n{text}"
    );

    dev.signal("TERM");
    assert_eq!(dev.wait(Duration::from_secs(30)).code(), Some(0));
}

#[test]
fn promql_metric_names_are_extracted_without_functions_labels_or_variables() {
    let parsed = parse_promql(
        r#"histogram_quantile(0.99, sum by (call, le) (rate(a_seconds_bucket{port="x}y", call=~"$call"}[$__rate_interval])))"#,
    )
    .unwrap();
    assert_eq!(parsed.metrics, ["a_seconds_bucket"]);
    assert_eq!(
        parsed.labels,
        ["call", "le", "port"].map(str::to_owned).into()
    );
    assert_eq!(
        parsed.calls,
        [
            (
                "histogram_quantile".to_owned(),
                "a_seconds_bucket".to_owned()
            ),
            ("rate".to_owned(), "a_seconds_bucket".to_owned())
        ]
    );

    let parsed = parse_promql(
        "time() - max by (instance) (b_start{job=~\"${job}\"}) and on (instance) (c_leader == 1) offset 5m",
    )
    .unwrap();
    assert_eq!(parsed.metrics, ["b_start", "c_leader"]);
    assert!(parsed.calls.is_empty());

    let parsed =
        parse_promql("clamp(1 - sum(increase(d_total[1h:5m])) / sum(rate(e_total[5m])), 0, 1)")
            .unwrap();
    assert_eq!(parsed.metrics, ["d_total", "e_total"]);
    assert_eq!(parsed.calls.len(), 2);

    // An aggregation with its grouping first is a function, not a metric.
    let parsed = parse_promql("sum without (a) (g_total) / sum by (b) (h_total)").unwrap();
    assert_eq!(parsed.metrics, ["g_total", "h_total"]);
    assert!(parse_promql("summ by (a) (g_total)").is_err());

    assert!(
        parse_promql("rat(f_total[5m])").is_err(),
        "unknown function"
    );
    assert!(
        parse_promql("rate(f_total{a=\"b}[5m])").is_err(),
        "open string"
    );
}

#[test]
fn a_dashboard_that_is_not_json_or_has_a_panel_without_datasource_is_refused() {
    let text = dashboard_text();
    read_dashboard(&text).unwrap_or_else(|e| panic!("{e}"));

    let truncated = &text[..text.len() / 2];
    let error = read_dashboard(truncated).unwrap_err();
    assert!(error.contains("not JSON"), "{error}");

    let mut dashboard: Value = serde_json::from_str(&text).unwrap();
    let panel = dashboard["panels"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["type"] != "row")
        .unwrap();
    let title = panel["title"].as_str().unwrap().to_owned();
    panel.as_object_mut().unwrap().remove("datasource");
    let error = read_dashboard(&dashboard.to_string()).unwrap_err();
    assert!(
        error.contains(&title) && error.contains("no datasource"),
        "{error}"
    );

    panel_of(&mut dashboard, &title)["datasource"] = serde_json::json!({"uid": "abc123"});
    let error = read_dashboard(&dashboard.to_string()).unwrap_err();
    assert!(error.contains("abc123"), "{error}");
}

fn panel_of<'a>(dashboard: &'a mut Value, title: &str) -> &'a mut Value {
    dashboard["panels"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["title"] == title)
        .unwrap()
}

#[test]
fn a_missing_family_a_rate_of_a_gauge_and_an_unknown_label_are_named() {
    let scrape = "\
# TYPE x_total counter
x_total{outcome=\"ok\"} 3
# TYPE y_open gauge
y_open 1
# TYPE z_seconds histogram
z_seconds_bucket{call=\"a\",le=\"+Inf\"} 1
z_seconds_sum{call=\"a\"} 0.1
z_seconds_count{call=\"a\"} 1
";
    let query = |expr: &str| Query {
        place: "p".to_owned(),
        parsed: parse_promql(expr).unwrap(),
    };
    let fine = [
        query("sum by (outcome) (rate(x_total{job=~\"$job\"}[5m]))"),
        query("y_open"),
        query("histogram_quantile(0.5, sum by (call, le) (rate(z_seconds_bucket[5m])))"),
        query("sum(rate(z_seconds_sum[5m])) / sum(rate(z_seconds_count[5m]))"),
    ];
    assert_eq!(problems(&fine, scrape), Vec::<String>::new());
    assert_eq!(unsampled(&fine, scrape), Vec::<String>::new());

    let wrong = [
        query("rate(x_totl[5m])"),
        query("rate(y_open[5m])"),
        query("histogram_quantile(0.5, rate(z_seconds_sum[5m]))"),
        query("x_bucket"),
        query("sum by (outcom) (x_total)"),
    ];
    assert_eq!(
        problems(&wrong, scrape),
        [
            "p: histogram_quantile() of z_seconds_sum, a histogram",
            "p: no sample of [\"x_total\"] has the label outcom",
            "p: rate() of y_open, a gauge",
            "p: x_bucket is not exported",
            "p: x_totl is not exported",
        ]
    );
    let declared_only = "# TYPE x_total counter\n";
    assert_eq!(
        unsampled(&[query("x_total")], declared_only),
        ["x_total"],
        "a declared family without samples is reported as unsampled"
    );
}

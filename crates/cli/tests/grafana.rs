//! The Grafana dashboard `deploy/grafana/proxypool.json` against what proxypool exports.
//!
//! A dashboard is only JSON: nothing else notices when a metric it queries is renamed or
//! dropped, its panels just go blank. So this test reads every PromQL expression of every
//! panel (and of the template variables), extracts the metric names, and compares them
//! with a scrape of a running `proxypool dev` that has served gateway traffic and one
//! extraction (`common::promql`). It also checks the dashboard's shape (valid JSON, every
//! panel on the `${datasource}` variable, a unit and a description on every panel) and that
//! `rate()`, `increase()` and `histogram_quantile()` are applied to counters and histogram
//! buckets.

mod common;

use common::promql::{
    Query, assert_exported, dev_scrape_after_traffic, parse_promql, problems, unsampled,
};
use common::{Scratch, curl_or_skip};
use serde_json::Value;
use std::time::Duration;

const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/grafana/proxypool.json"
);

/// The data-source variable every panel must use (a fixed uid would only work in the
/// Grafana it was exported from).
const DATASOURCE: &str = "${datasource}";

/// The rows, in order.
const ROWS: [&str; 5] = ["Overview", "Gateway", "Controller", "Quota", "Usage"];

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
    let (mut dev, text) = dev_scrape_after_traffic(&scratch, &queries);
    assert_exported("the dashboard", &queries, &text);

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

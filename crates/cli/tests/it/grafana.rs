//! The Grafana dashboard `deploy/grafana/proxypool.json` against what proxypool exports,
//! and its shape for both ways into Grafana.
//!
//! A dashboard is only JSON: nothing else notices when a metric it queries is renamed or
//! dropped, its panels just go blank. So this test reads every PromQL expression of every
//! panel (and of the template variables), extracts the metric names, and compares them
//! with a scrape of a running `proxypool dev` that has served gateway traffic and one
//! extraction (`common::promql`, shared with the alert rules' test). It also checks that
//! `rate()`, `increase()` and `histogram_quantile()` are applied to counters and histogram
//! buckets, and the dashboard's shape: valid JSON, a unit and a description on every
//! panel, and the data source wired so that both ways of loading it work:
//!
//! - **Import** (Dashboards, New, Import): the dialog asks for a value of every `__inputs`
//!   entry and replaces each `${DS_PROMETHEUS}` in the file with the chosen data source's
//!   uid. The one place it appears is the default of the `datasource` variable, so the
//!   dashboard opens on the chosen Prometheus and the variable can still switch it.
//! - **Provisioning** from a file substitutes nothing. Every panel, query and variable
//!   reads `${datasource}`, a variable, never the input itself (a panel with
//!   `${DS_PROMETHEUS}` would find no such data source): the variable's default names no
//!   data source then, so Grafana opens it on the first Prometheus data source it lists.

use crate::common::promql::{
    Query, assert_exported, dev_scrape_after_traffic, parse_promql, problems, unsampled,
};
use crate::common::{Scratch, curl_or_skip};
use serde_json::Value;
use std::time::Duration;

const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/grafana/proxypool.json"
);

/// The data-source variable every panel must use (a fixed uid would only work in the
/// Grafana it was exported from).
const DATASOURCE: &str = "${datasource}";

/// The import input: the Prometheus data source the import dialog asks for.
const INPUT: &str = "DS_PROMETHEUS";

/// How the input is written where the import replaces it.
const INPUT_REFERENCE: &str = "${DS_PROMETHEUS}";

/// The rows, in order.
const ROWS: [&str; 5] = ["Overview", "Gateway", "Controller", "Quota", "Usage"];

/// Reads the dashboard and checks its shape: valid JSON, the import shape
/// ([`import_shape`]), the five rows, the `${datasource}`, `job` and `instance` variables, a
/// 10 s refresh, and on every panel the data-source variable, a unit, a description and at
/// least one query. Returns every expression, parsed.
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
    import_shape(&dashboard)?;
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

/// What the import dialog needs and what it does to the file: `__inputs` is the one
/// Prometheus input [`INPUT`]; `__requires` names Grafana, the Prometheus plugin and every
/// panel type used; the `datasource` variable's default is the input; and every `${NAME}`
/// reference in the file names a template variable, except the input in that default (its
/// only place: anywhere else it would be hard-wired at import and dangling when provisioned).
fn import_shape(dashboard: &Value) -> Result<(), String> {
    let inputs = dashboard["__inputs"].as_array().ok_or("no __inputs")?;
    match inputs.as_slice() {
        [input]
            if input["name"] == INPUT
                && input["type"] == "datasource"
                && input["pluginId"] == "prometheus" => {}
        _ => {
            return Err(format!(
                "__inputs is not the one Prometheus data-source input {INPUT}: {}",
                dashboard["__inputs"]
            ));
        }
    }

    let requires = dashboard["__requires"].as_array().ok_or("no __requires")?;
    let required =
        |kind: &str, id: &str| requires.iter().any(|r| r["type"] == kind && r["id"] == id);
    let mut panels = Vec::new();
    flatten(&dashboard["panels"], &mut panels);
    let panel_types = panels
        .iter()
        .filter(|p| p["type"] != "row")
        .filter_map(|p| p["type"].as_str());
    for (kind, id) in [("grafana", "grafana"), ("datasource", "prometheus")]
        .into_iter()
        .chain(panel_types.map(|t| ("panel", t)))
    {
        if !required(kind, id) {
            return Err(format!("__requires has no {kind} {id}"));
        }
    }

    let variables = dashboard["templating"]["list"]
        .as_array()
        .ok_or("no templating list")?;
    let position = variables
        .iter()
        .position(|v| v["name"] == "datasource")
        .ok_or("no datasource variable")?;
    if variables[position]["current"]["value"] != INPUT_REFERENCE {
        return Err(format!(
            "the datasource variable's default is {}, not the input {INPUT_REFERENCE}",
            variables[position]["current"]["value"]
        ));
    }
    let names: Vec<&str> = variables
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    let default = format!("/templating/list/{position}/current/");
    let mut found = Vec::new();
    references(dashboard, "", &mut found);
    for (path, name) in found {
        let fine = if name == INPUT {
            path.starts_with(&default)
        } else {
            // Grafana's own variables (`${__rate_interval}`) start with two underscores.
            names.contains(&name.as_str()) || name.starts_with("__")
        };
        if !fine {
            return Err(format!(
                "{path} refers to ${{{name}}}: not a variable of the dashboard{}",
                if name == INPUT {
                    " (the input belongs only in the datasource variable's default)"
                } else {
                    ""
                }
            ));
        }
    }
    Ok(())
}

/// Every `${NAME}` (or `${NAME:format}`) in the string values under `value`, with the
/// JSON pointer of the string it is in.
fn references(value: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::String(text) => {
            let mut rest = text.as_str();
            while let Some(start) = rest.find("${") {
                rest = &rest[start + 2..];
                let Some(end) = rest.find('}') else { break };
                let name = rest[..end].split(':').next().unwrap_or_default();
                out.push((path.to_owned(), name.to_owned()));
                rest = &rest[end..];
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                references(item, &format!("{path}/{i}"), out);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                references(item, &format!("{path}/{key}"), out);
            }
        }
        _ => {}
    }
}

/// What Grafana's import does to the file (`POST /api/dashboards/import`): every
/// `${INPUT}` in a string is replaced with the chosen value and `__inputs` is dropped.
fn imported(dashboard: &Value, uid: &str) -> Value {
    match dashboard {
        Value::String(text) => Value::String(text.replace(INPUT_REFERENCE, uid)),
        Value::Array(items) => Value::Array(items.iter().map(|i| imported(i, uid)).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(key, _)| *key != "__inputs")
                .map(|(key, item)| (key.clone(), imported(item, uid)))
                .collect(),
        ),
        other => other.clone(),
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
fn imported_the_dashboard_opens_on_the_chosen_data_source_and_provisioned_on_its_variable() {
    let text = dashboard_text();
    let shipped: Value = serde_json::from_str(&text).unwrap();
    let mut panels = Vec::new();
    flatten(&shipped["panels"], &mut panels);
    let panels: Vec<&Value> = panels.into_iter().filter(|p| p["type"] != "row").collect();
    assert!(panels.len() > 10, "{} panels", panels.len());

    // Provisioned as it is: every panel and query reads the variable, and the input is
    // written only as the variable's default (which Grafana replaces when it names no
    // data source it has).
    for panel in &panels {
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(
                target["datasource"]["uid"], "${datasource}",
                "{}",
                panel["title"]
            );
        }
    }
    assert_eq!(
        text.matches(INPUT_REFERENCE).count(),
        2,
        "current.text and current.value"
    );

    // Imported: the variable's default is the chosen data source, nothing of the input is
    // left, and the panels still follow the variable (so it can switch them).
    let uid = "prom-uid-1";
    let dashboard = imported(&shipped, uid);
    let after = dashboard.to_string();
    assert!(
        !after.contains(INPUT_REFERENCE) && dashboard.get("__inputs").is_none(),
        "the import leaves {INPUT_REFERENCE} or __inputs behind"
    );
    let variable = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "datasource")
        .unwrap();
    assert_eq!(variable["current"]["value"], uid);
    let mut panels = Vec::new();
    flatten(&dashboard["panels"], &mut panels);
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
    }
}

#[test]
fn a_dashboard_that_import_or_provisioning_would_break_is_refused() {
    let shipped: Value = serde_json::from_str(&dashboard_text()).unwrap();
    let refused = |change: &dyn Fn(&mut Value)| {
        let mut dashboard = shipped.clone();
        change(&mut dashboard);
        read_dashboard(&dashboard.to_string()).unwrap_err()
    };
    let title = shipped["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] != "row")
        .and_then(|p| p["title"].as_str())
        .unwrap()
        .to_owned();

    // No input: the import dialog would not ask for a data source.
    let error = refused(&|d| d["__inputs"] = serde_json::json!([]));
    assert!(error.contains("__inputs"), "{error}");
    let error = refused(&|d| d["__inputs"][0]["pluginId"] = "loki".into());
    assert!(error.contains("__inputs"), "{error}");
    // The variable's default is not the input: the choice made at import would be lost.
    let error = refused(&|d| d["templating"]["list"][0]["current"] = serde_json::json!({}));
    assert!(error.contains("not the input"), "{error}");
    // A panel on the input itself: hard-wired at import, dangling when provisioned.
    let error = refused(&|d| {
        panel_of(d, &title)["datasource"]["uid"] = INPUT_REFERENCE.into();
    });
    assert!(
        error.contains("belongs only in the datasource variable's default"),
        "{error}"
    );
    // A reference to a variable the dashboard does not define.
    let error = refused(&|d| {
        panel_of(d, &title)["targets"][0]["expr"] =
            "sum(rate(proxypool_api_requests_total{job=~\"${jobs}\"}[5m]))".into();
    });
    assert!(error.contains("${jobs}"), "{error}");
    // A panel type the import's requirements do not list.
    let error = refused(&|d| panel_of(d, &title)["type"] = "gauge".into());
    assert!(error.contains("__requires has no panel gauge"), "{error}");
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

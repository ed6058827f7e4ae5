//! The Prometheus files in `deploy/prometheus/`: the example scrape configuration, the
//! alert rules and their unit tests.
//!
//! - `promtool check config` (which checks the rule files it names too), `promtool check
//!   rules` and `promtool test rules` pass on the shipped files, and fail on a copy with a
//!   missing token file (the controllers' metrics token or the gateways' admin token: both
//!   jobs send one), a rule that does not parse, or a rule whose duration no longer
//!   matches its tests: each check can fail.
//! - Every alert has a `for:` duration, a `severity` label (`critical` or `warning`), a
//!   summary and a description, and the unit tests have a case where it fires and one
//!   where it must not.
//! - Every metric family a rule names is exported by a running `proxypool dev`, with the
//!   labels the rule matches on and the type its functions need (the same check, and the
//!   same helper, as the Grafana dashboard's: `common::promql`).
//!
//! Without promtool the promtool checks skip loudly; under `CI=true` they fail
//! (`scripts/test.sh` installs Debian's `prometheus` package, which has promtool).

use crate::common::promql::{Query, assert_exported, dev_scrape_after_traffic, parse_promql};
use crate::common::{Scratch, curl_or_skip};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The alerts of `rules/proxypool.yml`, in its order.
const ALERTS: [&str; 11] = [
    "ProxypoolDown",
    "ProxypoolNoLeader",
    "ProxypoolPoolEmpty",
    "ProxypoolVendorFetchFailing",
    "ProxypoolGatewaySnapshotStale",
    "ProxypoolGatewayNotReady",
    "ProxypoolQuotaStoreUnavailable",
    "ProxypoolGatewayRefusalsHigh",
    "ProxypoolApiRefusalsHigh",
    "ProxypoolAccessLogLosingLines",
    "ProxypoolStoreLost",
];

/// Series Prometheus makes itself for every target it scrapes, never the exporter.
const PROMETHEUS_SERIES: [&str; 1] = ["up"];

/// The token files the configuration names, relative to it: the controllers' metrics token
/// and the gateways' admin token.
const TOKEN_FILES: [&str; 2] = [
    "secrets/proxypool-metrics-token",
    "secrets/proxypool-gateway-admin-token",
];

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus")
}

fn shipped(name: &str) -> String {
    let path = deploy().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `.yml` files of a folder of `deploy/prometheus`, by name.
fn yml_files(folder: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(deploy().join(folder))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yml"))
        .collect();
    names.sort();
    names
}

/// One rule of a rules file, as far as these tests read it.
#[derive(Debug, Default)]
struct Rule {
    name: String,
    alert: bool,
    expr: String,
    duration: Option<String>,
    severity: Option<String>,
    summary: bool,
    description: bool,
}

/// The rules of a rules file, read line by line: the file writes every expression as one
/// `expr: |` block (or on the `expr:` line), every rule starts with `- alert:` or
/// `- record:`. (No YAML crate for this one file; promtool reads it as YAML.)
fn read_rules(text: &str) -> Vec<Rule> {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut rules: Vec<Rule> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("- alert:") {
            rules.push(Rule {
                name: name.trim().to_owned(),
                alert: true,
                ..Rule::default()
            });
        } else if let Some(name) = trimmed.strip_prefix("- record:") {
            rules.push(Rule {
                name: name.trim().to_owned(),
                ..Rule::default()
            });
        } else if let Some(rule) = rules.last_mut() {
            if let Some(rest) = trimmed.strip_prefix("expr:") {
                let rest = rest.trim();
                if rest.starts_with('|') || rest.starts_with('>') {
                    let mut body = Vec::new();
                    while let Some(next) = lines.get(i + 1) {
                        if !next.trim().is_empty() && indent(next) <= indent(line) {
                            break;
                        }
                        body.push(next.trim());
                        i += 1;
                    }
                    rule.expr = body.join("\n").trim().to_owned();
                } else {
                    rule.expr = rest.trim_matches(|c| c == '"' || c == '\'').to_owned();
                }
            } else if let Some(rest) = trimmed.strip_prefix("for:") {
                rule.duration = Some(rest.trim().to_owned());
            } else if let Some(rest) = trimmed.strip_prefix("severity:") {
                rule.severity = Some(rest.trim().to_owned());
            } else if trimmed.starts_with("summary:") {
                rule.summary = true;
            } else if trimmed.starts_with("description:") {
                rule.description = true;
            }
        }
        i += 1;
    }
    rules
}

/// The shipped rules, every one of them.
fn shipped_rules() -> Vec<Rule> {
    yml_files("rules")
        .iter()
        .flat_map(|name| read_rules(&shipped(&format!("rules/{name}"))))
        .collect()
}

/// `promtool ARGS`, run in `dir`: whether it succeeded, and what it said (stdout and
/// stderr); `None` when promtool is not installed.
fn promtool(dir: &Path, args: &[&str]) -> Option<(bool, String)> {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let mut said = String::from_utf8_lossy(&output.stdout).into_owned();
    said.push_str(&String::from_utf8_lossy(&output.stderr));
    Some((output.status.success(), said))
}

fn promtool_or_skip() -> bool {
    if Command::new("promtool").arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        !proxypool_testkit::running_in_ci(),
        "CI=true and promtool is not installed (scripts/test.sh installs Debian's prometheus package)"
    );
    // Straight to stderr: the harness captures eprintln! of passing tests, and a skip
    // must be seen.
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED: promtool is not installed (Debian's prometheus package has it); \
         the Prometheus files were NOT checked ***\n"
    );
    false
}

/// `deploy/prometheus` copied into `scratch` as it would be installed: with the token files
/// the configuration names (promtool checks that they exist) but `missing`.
fn installed(scratch: &Scratch, missing: Option<&str>) -> PathBuf {
    let root = scratch.file("prometheus");
    for folder in ["rules", "tests", "secrets"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    std::fs::write(root.join("prometheus.yml"), shipped("prometheus.yml")).unwrap();
    for folder in ["rules", "tests"] {
        for name in yml_files(folder) {
            let file = format!("{folder}/{name}");
            std::fs::write(root.join(&file), shipped(&file)).unwrap();
        }
    }
    for token in TOKEN_FILES.into_iter().filter(|t| Some(*t) != missing) {
        std::fs::write(root.join(token), "a-token-of-32-characters-or-more\n").unwrap();
    }
    root
}

/// Runs promtool and fails, with what it said, unless it succeeded and said `SUCCESS`.
fn passes(dir: &Path, args: &[&str]) -> String {
    let (ok, said) = promtool(dir, args).unwrap();
    assert!(
        ok && said.contains("SUCCESS"),
        "promtool {args:?} in {}:\n{said}",
        dir.display()
    );
    said
}

/// Runs promtool and returns what it said; fails if it succeeded.
fn fails(dir: &Path, args: &[&str]) -> String {
    let (ok, said) = promtool(dir, args).unwrap();
    assert!(!ok, "promtool {args:?} should have failed:\n{said}");
    said
}

#[test]
fn the_config_the_rules_and_their_unit_tests_pass_promtool() {
    if !promtool_or_skip() {
        return;
    }
    let scratch = Scratch::new("prometheus");
    let root = installed(&scratch, None);
    let said = passes(&root, &["check", "config", "prometheus.yml"]);
    // The configuration's rule_files glob finds the rules, and they are checked with it.
    assert!(said.contains("rules/proxypool.yml"), "{said}");

    let rules: Vec<String> = yml_files("rules")
        .iter()
        .map(|name| format!("rules/{name}"))
        .collect();
    let mut args = vec!["check", "rules"];
    args.extend(rules.iter().map(String::as_str));
    let said = passes(&deploy(), &args);
    assert!(
        said.contains(&format!("SUCCESS: {} rules found", ALERTS.len())),
        "{said}"
    );

    let tests: Vec<String> = yml_files("tests")
        .iter()
        .map(|name| format!("tests/{name}"))
        .collect();
    assert!(
        !tests.is_empty(),
        "no unit tests in deploy/prometheus/tests"
    );
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    let said = passes(&deploy(), &args);
    assert!(!said.contains("FAILED"), "{said}");
}

#[test]
fn promtool_refuses_a_missing_token_a_broken_rule_and_a_rule_its_tests_contradict() {
    if !promtool_or_skip() {
        return;
    }
    // A token file one of the jobs names is missing.
    for token in TOKEN_FILES {
        let scratch = Scratch::new("prometheus-no-token");
        let root = installed(&scratch, Some(token));
        let said = fails(&root, &["check", "config", "prometheus.yml"]);
        assert!(
            said.contains(token.trim_start_matches("secrets/")),
            "{said}"
        );
    }

    // A rule that does not parse: both checks name it.
    let scratch = Scratch::new("prometheus-broken");
    let root = installed(&scratch, None);
    let rules = root.join("rules/proxypool.yml");
    let text = std::fs::read_to_string(&rules).unwrap();
    let good = "max by (upstream) (proxypool_pool_proxies";
    assert!(text.contains(good), "the rule this test breaks is gone");
    std::fs::write(
        &rules,
        text.replace(good, "max by (upstream (proxypool_pool_proxies"),
    )
    .unwrap();
    let said = fails(&root, &["check", "rules", "rules/proxypool.yml"]);
    assert!(said.contains("ProxypoolPoolEmpty"), "{said}");
    let said = fails(&root, &["check", "config", "prometheus.yml"]);
    assert!(said.contains("ProxypoolPoolEmpty"), "{said}");

    // A rule that still parses but waits longer than its tests expect: only the unit tests
    // notice, and they name the alert.
    let scratch = Scratch::new("prometheus-contradicted");
    let root = installed(&scratch, None);
    let rules = root.join("rules/proxypool.yml");
    let text = std::fs::read_to_string(&rules).unwrap();
    let waits = "proxypool_gateway_ready == 0\n        for: 2m";
    assert!(text.contains(waits), "the rule this test changes is gone");
    std::fs::write(
        &rules,
        text.replace(waits, "proxypool_gateway_ready == 0\n        for: 10m"),
    )
    .unwrap();
    passes(&root, &["check", "rules", "rules/proxypool.yml"]);
    let said = fails(&root, &["test", "rules", "tests/proxypool.yml"]);
    assert!(said.contains("ProxypoolGatewayNotReady"), "{said}");
}

#[test]
fn every_alert_is_labelled_described_and_tested_firing_and_not_firing() {
    let rules = shipped_rules();
    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ALERTS, "the alerts, in order");
    for rule in &rules {
        let name = &rule.name;
        assert!(rule.alert, "{name} is an alert");
        assert!(!rule.expr.is_empty(), "{name} has an expression");
        let duration = rule.duration.as_deref().unwrap_or_default();
        assert!(
            ["s", "m", "h"].iter().any(|unit| duration.ends_with(unit))
                && duration[..duration.len() - 1]
                    .parse::<u32>()
                    .is_ok_and(|n| n > 0),
            "{name}: `for:` is {duration:?}; every alert waits a while before it fires"
        );
        assert!(
            matches!(rule.severity.as_deref(), Some("critical" | "warning")),
            "{name}: severity {:?}",
            rule.severity
        );
        assert!(
            rule.summary && rule.description,
            "{name}: a summary and a description"
        );
    }

    // In the unit tests: `alertname: X` followed by `exp_alerts: []` (must not fire) or by
    // `exp_alerts:` and a list (fires).
    let (mut fires, mut holds) = (BTreeSet::new(), BTreeSet::new());
    for name in yml_files("tests") {
        let mut alert = String::new();
        for line in shipped(&format!("tests/{name}")).lines() {
            let line = line.trim();
            if let Some(name) = line.strip_prefix("alertname:") {
                alert = name.trim().to_owned();
            } else if line == "exp_alerts: []" {
                holds.insert(alert.clone());
            } else if line == "exp_alerts:" {
                fires.insert(alert.clone());
            }
        }
    }
    for alert in ALERTS {
        assert!(fires.contains(alert), "no unit test where {alert} fires");
        assert!(
            holds.contains(alert),
            "no unit test where {alert} must not fire"
        );
    }
}

#[test]
fn every_family_the_rules_use_is_exported_by_a_running_dev() {
    let queries: Vec<Query> = shipped_rules()
        .into_iter()
        .map(|rule| {
            let mut parsed =
                parse_promql(&rule.expr).unwrap_or_else(|e| panic!("{}: {e}", rule.name));
            parsed
                .metrics
                .retain(|m| !PROMETHEUS_SERIES.contains(&m.as_str()));
            Query {
                place: rule.name,
                parsed,
            }
        })
        .collect();
    let families: BTreeSet<&str> = queries
        .iter()
        .flat_map(|q| &q.parsed.metrics)
        .map(String::as_str)
        .collect();
    assert!(families.len() >= 9, "{families:?}");
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("prometheus-dev");
    let (mut dev, text) = dev_scrape_after_traffic(&scratch, &queries);
    assert_exported("deploy/prometheus/rules", &queries, &text);

    dev.signal("TERM");
    assert_eq!(dev.wait(Duration::from_secs(30)).code(), Some(0));
}

#[test]
fn the_rules_reader_takes_block_and_inline_expressions_and_their_labels() {
    let rules = read_rules(
        "groups:
  - name: g
    rules:
      - record: job:x:rate5m
        expr: sum by (job) (rate(x_total[5m]))
      - alert: A
        expr: |
          a_total > 0
          unless on (b)
          c_total > 0

        for: 5m
        labels:
          severity: warning
        annotations:
          summary: \"s\"
          description: \"d\"
",
    );
    assert_eq!(rules.len(), 2);
    assert!(!rules[0].alert);
    assert_eq!(rules[0].expr, "sum by (job) (rate(x_total[5m]))");
    assert_eq!(rules[1].name, "A");
    assert_eq!(rules[1].expr, "a_total > 0\nunless on (b)\nc_total > 0");
    assert_eq!(rules[1].duration.as_deref(), Some("5m"));
    assert_eq!(rules[1].severity.as_deref(), Some("warning"));
    assert!(rules[1].summary && rules[1].description);
}

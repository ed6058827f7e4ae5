//! The log as a collector reads it: with `[log] format = "json"` every line the binary
//! writes to stderr is one JSON object with its time, level, target and message (the
//! event's fields beside them), from the first line on; by default the lines are text;
//! `PROXYPOOL__LOG__FORMAT` overrides the file.

mod common;

use common::{Proc, Scratch, free_port};
use std::time::{Duration, Instant};

/// A split gateway whose controller is not there: it logs at once, and keeps logging.
fn gateway_file(scratch: &Scratch, log: &str) -> std::path::PathBuf {
    let controller = free_port();
    scratch.write("worker-token", "a-worker-token-of-some-length\n");
    scratch.write(
        "gateway.toml",
        &format!(
            "{log}\n[gateway]\nworker_id = \"gw-logs\"\ncontroller_url = \"http://127.0.0.1:{controller}\"\n\
             worker_token = {{ file = \"worker-token\" }}\n[gateway.listeners]\nhttp = \"127.0.0.1:0\"\n\
             admin = \"127.0.0.1:0\"\n"
        ),
    )
}

/// The gateway's stderr once it has written at least `lines` lines (within 10 s).
fn log_lines(
    name: &str,
    scratch: &Scratch,
    file: &std::path::Path,
    env: &[(&str, &str)],
) -> Vec<String> {
    let mut gateway = Proc::start(
        name,
        &["gateway", "-c", file.to_str().unwrap()],
        env,
        &scratch.path,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    while Instant::now() < deadline {
        lines = gateway.stderr_tail().lines().map(str::to_owned).collect();
        if lines.len() >= 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    gateway.signal("KILL");
    let _ = gateway.wait(Duration::from_secs(5));
    assert!(lines.len() >= 3, "{name} logged too little: {lines:?}");
    lines
}

#[test]
fn json_logs_are_one_object_per_line_from_the_first_line_on() {
    let scratch = Scratch::new("logs-json");
    let file = gateway_file(&scratch, "[log]\nformat = \"json\"");
    for line in log_lines("gateway-json", &scratch, &file, &[]) {
        let event: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        for key in ["timestamp", "level", "target", "message"] {
            assert!(event.get(key).is_some(), "{key} in {line}");
        }
        assert!(
            event["target"].as_str().unwrap().starts_with("proxypool"),
            "{line}"
        );
    }
}

#[test]
fn text_is_the_default_and_the_environment_overrides_the_file() {
    let scratch = Scratch::new("logs-text");
    let file = gateway_file(&scratch, "");
    let lines = log_lines("gateway-text", &scratch, &file, &[]);
    assert!(lines.iter().all(|line| !line.starts_with('{')), "{lines:?}");
    let scratch = Scratch::new("logs-override");
    let file = gateway_file(&scratch, "[log]\nformat = \"text\"");
    let lines = log_lines(
        "gateway-override",
        &scratch,
        &file,
        &[("PROXYPOOL__LOG__FORMAT", "json")],
    );
    assert!(lines.iter().all(|line| line.starts_with('{')), "{lines:?}");
}

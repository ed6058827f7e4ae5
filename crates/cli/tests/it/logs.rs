//! The log as a collector reads it: with `[log] format = "json"` every line the binary
//! writes to stderr is one JSON object with its time, level, target and message (the
//! event's fields beside them), from the first line on; by default the lines are text;
//! `PROXYPOOL__LOG__FORMAT` overrides the file. The gateway's access log goes to standard
//! output (apart from that log), or to a file that SIGHUP reopens, as logrotate expects.

use crate::common::{Proc, Scratch, curl, eventually, free_port, poll_until};
use std::time::Duration;

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
    let mut lines = Vec::new();
    poll_until(Duration::from_secs(10), || {
        lines = gateway.stderr_tail().lines().map(str::to_owned).collect();
        (lines.len() >= 3).then_some(())
    });
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

/// A split gateway with no controller and the access log on (`access_log` is the table's
/// body), its HTTP listener on `port`: every request is refused, and refusals are always
/// logged.
fn gateway_with_access_log(scratch: &Scratch, port: u16, access_log: &str) -> Proc {
    let file = gateway_file(
        scratch,
        &format!("[gateway.access_log]\nenabled = true\n{access_log}"),
    );
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "http = \"127.0.0.1:0\"",
        &format!("http = \"127.0.0.1:{port}\""),
    );
    // The [gateway.access_log] table came first; TOML wants [gateway] before it.
    let (access, rest) = text.split_once("\n[gateway]\n").unwrap();
    std::fs::write(&file, format!("[gateway]\n{rest}\n{access}\n")).unwrap();
    Proc::start(
        "gateway-access-log",
        &["gateway", "-c", file.to_str().unwrap()],
        &[],
        &scratch.path,
    )
}

/// One request through the gateway at `port` (refused: it has no controller).
fn request_through(port: u16) {
    let (_, status) = curl(&[
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-x",
        &format!("http://alice:secret@127.0.0.1:{port}"),
        "http://example.com/",
    ]);
    assert!(status.starts_with('5'), "refused while stale: {status}");
}

fn access_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn the_access_log_goes_to_standard_output_by_default() {
    let scratch = Scratch::new("access-stdout");
    let port = free_port();
    let mut gateway = gateway_with_access_log(&scratch, port, "");
    eventually("the listener", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    request_through(port);
    gateway.read_until(Duration::from_secs(10), |line| {
        line.contains("\"kind\":\"http\"")
    });
    let line = gateway.stdout.last().unwrap().clone();
    gateway.signal("TERM");
    let _ = gateway.wait(Duration::from_secs(10));
    let line: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(line["target"], "example.com:80", "{line}");
    assert!(line["code"].is_string(), "a refusal names its code: {line}");
    assert!(
        !gateway.stderr_tail().contains("\"kind\":\"http\""),
        "the access log stays out of the process log"
    );
}

#[test]
fn sighup_reopens_the_access_log_file_after_logrotate_moved_it() {
    let scratch = Scratch::new("access-file");
    let port = free_port();
    let mut gateway = gateway_with_access_log(&scratch, port, "file = \"access.log\"");
    let log = scratch.file("access.log");
    eventually("the listener", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    request_through(port);
    eventually("the first line", Duration::from_secs(10), || {
        access_lines(&log).len() == 1
    });
    let rotated = scratch.file("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    gateway.signal("HUP");
    // The reload opens (creates) the new file before it returns: its existence says the
    // reload is done, and every line from then on goes there.
    eventually("the reload", Duration::from_secs(10), || log.exists());
    request_through(port);
    eventually("a line in the new file", Duration::from_secs(10), || {
        access_lines(&log).len() == 1
    });
    gateway.signal("TERM");
    let _ = gateway.wait(Duration::from_secs(10));
    assert_eq!(
        access_lines(&rotated).len(),
        1,
        "the rotated file kept its line"
    );
    assert_eq!(access_lines(&log).len(), 1);
}

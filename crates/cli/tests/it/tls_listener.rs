//! `proxypool dev`'s TLS client listener from a Python client: `requests` with an
//! `https://` proxy URL and the certificate dev made as its CA bundle reaches the origin
//! (the python is the clients' virtual environment, `PROXYPOOL_CLIENTS_PYTHON`; without it
//! the test skips loudly, and fails under `CI=true`).

use crate::common::{Scratch, exit_of, start_dev};
use std::process::Command;

#[test]
fn python_requests_through_an_https_proxy_url_reaches_the_origin() {
    let Some(python) = proxypool_config::Env::from_process()
        .get("PROXYPOOL_CLIENTS_PYTHON")
        .map(str::to_owned)
    else {
        assert!(
            !proxypool_testkit::running_in_ci(),
            "PROXYPOOL_CLIENTS_PYTHON is not set: scripts/test.sh sets it"
        );
        eprintln!("SKIPPED: PROXYPOOL_CLIENTS_PYTHON is not set (scripts/test.sh sets it)");
        return;
    };
    let scratch = Scratch::new("tls-python");
    let (mut dev, banner) = start_dev("dev", &scratch, &["--proxy-ttl", "0"]);
    let (https, cert) = banner.https();
    let proxy = format!("https://dev:{}@{https}", banner.password());
    let script = "import sys, requests\n\
                  proxy, origin, ca = sys.argv[1:]\n\
                  r = requests.get(origin, proxies={'http': proxy, 'https': proxy}, verify=ca, timeout=10)\n\
                  print(r.status_code)\n\
                  print(r.text)\n";
    let output = Command::new(&python)
        .args(["-c", script, &proxy, banner.origin(), cert])
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("200"), "{stdout}");
    assert!(
        exit_of(lines.next().unwrap_or("")).starts_with("127.0.0."),
        "{stdout}"
    );
    dev.signal("TERM");
    assert_eq!(dev.wait(std::time::Duration::from_secs(30)).code(), Some(0));
}

//! The client API against its own OpenAPI document: schemathesis generates requests from
//! `GET /openapi.json` of a running `proxypool dev` (valid and invalid ones, for every
//! operation) and checks every answer: no 5xx, every status documented, every body
//! matching its schema, valid requests accepted and invalid ones refused. Bounded in
//! examples and time.
//!
//! `scripts/test.sh` installs schemathesis in a virtual environment under `target/` and
//! names its `st` in `PROXYPOOL_SCHEMATHESIS`; without it the test skips loudly (and fails
//! under `CI=true`).

use crate::common::{Scratch, start_dev};
use std::process::Command;

#[test]
fn the_client_api_matches_its_openapi_document() {
    let env = proxypool_config::Env::from_process();
    let Some(st) = env.get("PROXYPOOL_SCHEMATHESIS").map(str::to_owned) else {
        assert!(
            !proxypool_testkit::running_in_ci(),
            "PROXYPOOL_SCHEMATHESIS is not set: scripts/test.sh installs schemathesis and sets it"
        );
        eprintln!("SKIPPED: PROXYPOOL_SCHEMATHESIS is not set (scripts/test.sh sets it)");
        return;
    };
    let scratch = Scratch::new("schemathesis");
    let (mut dev, banner) = start_dev("dev-schemathesis", &scratch, &[]);
    let schema = format!("{}/openapi.json", banner.api());
    let auth = format!("Authorization: Bearer {}", banner.token());
    // An oversize body is refused as 413 before it is read whole (the sign-in takes at
    // most 1 KiB): a rejection of invalid data like any other 4xx here.
    std::fs::write(
        scratch.path.join("schemathesis.toml"),
        "[checks.negative_data_rejection]\nexpected-statuses = [\"400\", \"401\", \"403\", \
         \"404\", \"405\", \"406\", \"409\", \"413\", \"415\", \"422\", \"428\", \"429\"]\n",
    )
    .unwrap();
    let output = Command::new("timeout")
        .args(["240", &st, "run", &schema, "-H", &auth])
        .args(["--max-examples", "50", "--checks", "all", "--no-color"])
        // schemathesis keeps a cache in its working directory: keep it out of the tree.
        .current_dir(&scratch.path)
        .output()
        .expect("schemathesis runs");
    let report = String::from_utf8_lossy(&output.stdout);
    dev.signal("TERM");
    let _ = dev.wait(std::time::Duration::from_secs(30));
    assert!(
        output.status.success(),
        "schemathesis found problems (exit {:?}):\n{report}\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(report.contains("passed"), "{report}");
}

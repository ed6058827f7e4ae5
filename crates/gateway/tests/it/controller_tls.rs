//! The control loop over `https://`: a gateway that trusts the controller's CA registers;
//! one that does not refuses to talk to it and says why on `/status`; a controller that
//! wants a client certificate refuses a gateway without one from its CA. The admin
//! listener serves over TLS too.

use crate::common::control::TestController;
use crate::common::*;
use proxypool_config::{ClientTlsConfig, Millis, ServerTlsConfig};
use proxypool_edge::{ServerTls, ServerTlsFiles};
use proxypool_testkit::{CertFiles, TestCa};
use std::time::Duration;

fn server_tls(files: &CertFiles, client_ca: Option<&std::path::Path>) -> ServerTls {
    ServerTls::load(ServerTlsFiles {
        cert: files.cert.clone(),
        key: files.key.clone(),
        client_ca: client_ca.map(Into::into),
    })
    .unwrap()
}

fn trusting(ca: &TestCa, identity: Option<&CertFiles>) -> ClientTlsConfig {
    ClientTlsConfig {
        ca: Some(ca.ca_path().to_owned()),
        cert: identity.map(|f| f.cert.clone()),
        key: identity.map(|f| f.key.clone()),
    }
}

/// Waits until the admin `/status` shows a control error containing `needle`.
async fn status_says(gateway: &Running, needle: &str) -> String {
    let what = format!("/status to say {needle:?}");
    eventually_async(&what, Duration::from_secs(10), async || {
        let status = curl(&[&format!("http://{}/status", gateway.admin)]).await;
        let json: serde_json::Value = serde_json::from_str(&status.body).unwrap_or_default();
        let error = json["control_error"].as_str().unwrap_or_default();
        error.contains(needle).then(|| error.to_owned())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_trusts_the_controller_s_ca_registers_over_https() {
    let ca = TestCa::new("controller ca").unwrap();
    let controller =
        TestController::start_tls(WORKER, 60_000, server_tls(&ca.server("ctl").unwrap(), None))
            .await;
    assert!(controller.url().starts_with("https://"));
    controller.publish(vec![], vec![client("alice")]);
    let mut settings = config(&controller);
    settings.controller_tls = Some(trusting(&ca, None));
    let gateway = Running::start(settings).await;
    acked(&controller, 1).await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_does_not_trust_the_controller_refuses_it_and_says_why() {
    let ca = TestCa::new("controller ca").unwrap();
    let other = TestCa::new("some other ca").unwrap();
    let controller =
        TestController::start_tls(WORKER, 60_000, server_tls(&ca.server("ctl").unwrap(), None))
            .await;
    let mut settings = config(&controller);
    settings.controller_tls = Some(trusting(&other, None));
    let gateway = Running::start(settings).await;
    let error = status_says(&gateway, "certificate").await;
    assert!(error.contains("UnknownIssuer"), "{error}");
    assert_eq!(controller.state.lock().unwrap().registrations, 0);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_that_wants_a_client_certificate_refuses_a_gateway_without_one() {
    let ca = TestCa::new("controller ca").unwrap();
    let gateways = TestCa::new("gateways ca").unwrap();
    let controller = TestController::start_tls(
        WORKER,
        60_000,
        server_tls(&ca.server("ctl").unwrap(), Some(gateways.ca_path())),
    )
    .await;
    controller.publish(vec![], vec![client("alice")]);

    let mut anonymous = config(&controller);
    anonymous.controller_tls = Some(trusting(&ca, None));
    let gateway = Running::start(anonymous).await;
    status_says(&gateway, "unreachable").await;
    assert_eq!(controller.state.lock().unwrap().registrations, 0);
    gateway.shutdown().await;

    // A certificate from another CA is refused as well.
    let stranger = ca.client("gw", WORKER).unwrap();
    let mut foreign = config(&controller);
    foreign.controller_tls = Some(trusting(&ca, Some(&stranger)));
    let gateway = Running::start(foreign).await;
    status_says(&gateway, "unreachable").await;
    assert_eq!(controller.state.lock().unwrap().registrations, 0);
    gateway.shutdown().await;

    let identity = gateways.client("gw", WORKER).unwrap();
    let mut settings = config(&controller);
    settings.controller_tls = Some(trusting(&ca, Some(&identity)));
    let gateway = Running::start(settings).await;
    acked(&controller, 1).await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_serves_over_tls() {
    let ca = TestCa::new("admin ca").unwrap();
    let admin = ca.server("admin").unwrap();
    let controller = TestController::start(WORKER, 60_000).await;
    let mut settings = config(&controller);
    settings.admin_tls = Some(ServerTlsConfig {
        cert: admin.cert.clone(),
        key: admin.key.clone(),
        client_ca: None,
        poll_interval: Millis::from_secs(5),
    });
    let gateway = Running::start(settings).await;
    let ca_path = ca.ca_path().to_str().unwrap().to_owned();
    let secure = curl(&[
        "--cacert",
        &ca_path,
        &format!("https://127.0.0.1:{}/healthz", gateway.admin.port()),
    ])
    .await;
    assert_eq!(secure.exit, 0, "{secure:?}");
    assert_ne!(secure.status, 0);
    let plain = curl(&[&format!("http://{}/healthz", gateway.admin)]).await;
    assert_eq!(plain.status, 400, "{plain:?}");
    assert!(plain.body.contains("tls_required"));
    gateway.shutdown().await;
}

//! Headless Chromium through the TLS client listener (`--proxy-server=https://…`): the
//! listener's certificate trusted by its key's pin
//! (`--ignore-certificate-errors-spki-list`, which Chromium applies to the proxy too), the
//! gateway's `407` answered with the client's credentials over the DevTools Fetch domain.
//! An http page (absolute form inside TLS) and an https page (CONNECT inside TLS, the
//! origin's TLS inside that) show the sim origin's echo naming the upstream's exit. A
//! wrong password, or a listener certificate Chromium does not trust, loads nothing.
//! Inspected (a client with inspection on): Chromium trusts the gateway's CA through an
//! NSS database under a private `HOME` (a pin cannot name leaves minted per host with
//! fresh keys), and the page is the gateway's answer, naming its proxy.
//!
//! The origins are reached by `.test` names, which the simulated upstream resolves to
//! loopback; Chromium never sends a name through a proxy it would bypass for loopback.

use crate::common::control::TestController;
use crate::common::inspection::{GatewayCa, tls_origin};
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, free_port, sim_upstream};
use crate::common::*;
use proxypool_config::ServerTlsConfig;
use proxypool_core::Protocol;
use proxypool_core::control::{GatewayClient, Inspection};
use proxypool_gateway::GatewayConfig;
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy};
use proxypool_testkit::browser::{
    Browser, LaunchOptions, ProxyAuth, browser_or_skip_with, spki_pin, trust_ca_in_nss_or_skip,
};
use proxypool_testkit::tls::{CertFiles, TestCa};
use serde_json::{Value, json};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const EXIT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 71);
const EXIT_TEXT: &str = "127.0.0.71";

/// A gateway with the TLS listener, one sim upstream and a plain and an https origin.
struct Setup {
    running: Running,
    https: SocketAddr,
    listener: CertFiles,
    origin: Origin,
    tls_origin: Origin,
    origin_key: PathBuf,
    _listener_ca: TestCa,
    _origin_ca: TestCa,
    _controller: Arc<TestController>,
    _upstream: UpstreamProxy,
}

impl Setup {
    async fn start(
        clients: Vec<GatewayClient>,
        adjust: impl FnOnce(&mut GatewayConfig, &TestCa),
    ) -> Self {
        let origin = Origin::start().await.unwrap();
        let origin_ca = TestCa::new("browser origin ca").unwrap();
        let tls_origin = tls_origin(&origin_ca).await;
        let upstream = sim_upstream(ProxyKind::Http, EXIT).await;
        let controller = TestController::start(WORKER, 3_600_000).await;
        let credentials = Some((UPSTREAM_USER, UPSTREAM_PASS));
        let record = proxy(
            1,
            Protocol::Http,
            upstream.addr(),
            credentials,
            "vendor",
            "us",
        );
        controller.publish(vec![record], clients);
        let listener_ca = TestCa::new("browser listener ca").unwrap();
        let listener = listener_ca.server("gateway").unwrap();
        let https = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut config = config(&controller);
        config.listeners.https = Some(https);
        config.tls = Some(ServerTlsConfig {
            cert: listener.cert.clone(),
            key: listener.key.clone(),
            client_ca: None,
            poll_interval: Millis(1000),
        });
        adjust(&mut config, &origin_ca);
        let running = Running::start(config).await;
        acked(&controller, 1).await;
        Setup {
            running,
            https,
            listener,
            origin,
            tls_origin,
            // The origin's certificate is `origin.pem` of its CA (see `tls_origin`).
            origin_key: origin_ca.dir().join("origin.key"),
            _listener_ca: listener_ca,
            _origin_ca: origin_ca,
            _controller: controller,
            _upstream: upstream,
        }
    }

    /// Chromium's switches: the TLS listener as its proxy, the keys in `pinned` accepted.
    fn chromium(&self, proxy_port: u16, pinned: &[&Path]) -> LaunchOptions {
        let pins: Vec<String> = pinned.iter().map(|key| spki_pin(key).unwrap()).collect();
        LaunchOptions {
            args: vec![
                format!("--proxy-server=https://127.0.0.1:{proxy_port}"),
                format!("--ignore-certificate-errors-spki-list={}", pins.join(",")),
            ],
            env: Vec::new(),
        }
    }
}

/// The page's text once it names the exit, or why not (the load failed, or the page
/// never showed it).
fn page_text(browser: &mut Browser, url: &str) -> Result<String, String> {
    browser.navigate(url).map_err(|e| e.to_string())?;
    browser
        .wait_for(
            &format!("document.body && document.body.innerText.includes('{EXIT_TEXT}') && document.body.innerText"),
            Duration::from_secs(10),
        )
        .map(|text| text.as_str().unwrap_or_default().to_owned())
        .map_err(|e| {
            let shown = browser.eval("document.body ? document.body.innerText : ''");
            format!("{e}; the page shows {shown:?}")
        })
}

/// Runs `drive` with a browser launched with `options` on a blocking thread; `None` when
/// no Chromium is installed (skipped, as `browser_or_skip` says).
async fn with_browser<T: Send + 'static>(
    options: LaunchOptions,
    drive: impl FnOnce(&mut Browser) -> T + Send + 'static,
) -> Option<T> {
    tokio::task::spawn_blocking(move || {
        let mut browser = browser_or_skip_with(1000, 600, &options)?;
        Some(drive(&mut browser))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_loads_http_and_https_pages_through_the_tls_listener() {
    let s = Setup::start(vec![client("alice")], |_, _| {}).await;
    let options = s.chromium(s.https.port(), &[&s.listener.key, &s.origin_key]);
    let http_url = s.origin.host_url("shop-a.test", "/through-tls-listener");
    let https_url = s.tls_origin.host_url("shop-b.test", "/connect-inside-tls");
    let shot = std::env::temp_dir().join("proxypool-chromium-tls-listener.png");
    let shot_path = shot.clone();
    let Some((answers, plain, secure, screenshot)) = with_browser(options, move |browser| {
        let answers = browser.answer_proxy_auth("alice", PASSWORD).unwrap();
        let plain = page_text(browser, &http_url);
        let secure = page_text(browser, &https_url);
        let screenshot = browser.screenshot(&shot_path, false);
        (answers.count(), plain, secure, screenshot)
    })
    .await
    else {
        return;
    };
    let plain = plain.unwrap();
    assert!(
        plain.contains("/through-tls-listener") && plain.contains("shop-a.test"),
        "{plain}"
    );
    let secure = secure.unwrap();
    assert!(
        secure.contains("/connect-inside-tls") && secure.contains("shop-b.test"),
        "{secure}"
    );
    assert!(
        answers >= 1,
        "the gateway asked for credentials and got them"
    );
    // Through the upstream, the only way Chromium (which knows only the gateway) could
    // have reached the origins.
    let exits: Vec<IpAddr> = s.origin.requests_by_exit().into_keys().collect();
    assert_eq!(exits, [IpAddr::from(EXIT)]);
    let exits: Vec<IpAddr> = s.tls_origin.requests_by_exit().into_keys().collect();
    assert_eq!(exits, [IpAddr::from(EXIT)]);
    screenshot.unwrap();
    eprintln!("screenshot: {}", shot.display());
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_loads_nothing_with_a_wrong_password_or_an_untrusted_listener() {
    let s = Setup::start(vec![client("alice")], |_, _| {}).await;
    let http_url = s.origin.host_url("shop-a.test", "/wrong");
    let https_url = s.tls_origin.host_url("shop-b.test", "/wrong");

    let wrong_password = s.chromium(s.https.port(), &[&s.listener.key, &s.origin_key]);
    let (url_a, url_b) = (http_url.clone(), https_url.clone());
    let Some((answers, plain, secure)) = with_browser(wrong_password, move |browser| {
        let answers = browser
            .answer_proxy_auth("alice", "not-the-password")
            .unwrap();
        let plain = page_text(browser, &url_a);
        let secure = page_text(browser, &url_b);
        (answers.count(), plain, secure)
    })
    .await
    else {
        return;
    };
    assert!(answers >= 1, "the gateway asked for credentials");
    assert!(plain.is_err(), "a wrong password loads nothing: {plain:?}");
    assert!(
        secure.is_err(),
        "a wrong password tunnels nothing: {secure:?}"
    );

    // The right password, but the listener's key is not pinned: Chromium refuses the
    // proxy's certificate before sending anything.
    let untrusted = s.chromium(s.https.port(), &[&s.origin_key]);
    let Some((plain, secure)) = with_browser(untrusted, move |browser| {
        browser.answer_proxy_auth("alice", PASSWORD).unwrap();
        (
            page_text(browser, &http_url),
            page_text(browser, &https_url),
        )
    })
    .await
    else {
        return;
    };
    assert!(
        plain.is_err(),
        "an untrusted listener is not used: {plain:?}"
    );
    assert!(
        secure.is_err(),
        "an untrusted listener is not used: {secure:?}"
    );
    assert_eq!(s.origin.requests() + s.tls_origin.requests(), 0);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_trusting_the_gateways_ca_loads_an_inspected_page() {
    let gateway_ca = GatewayCa::new("browser inspection ca");
    let home = gateway_ca.dir.join("home");
    let Some(()) = trust_ca_in_nss_or_skip(&home, &gateway_ca.cert) else {
        return;
    };
    let inspected = GatewayClient {
        inspection: Inspection::On,
        ..client("ivan")
    };
    let s = Setup::start(vec![inspected], |config, origin_ca| {
        config.inspection = Some(gateway_ca.config(origin_ca.ca_path(), &[], 64));
    })
    .await;
    let url = s.tls_origin.host_url("shop-b.test", "/inspected");
    // Only the listener is pinned: the page's certificate must chain to a CA in NSS.
    let mut trusting = s.chromium(s.https.port(), &[&s.listener.key]);
    trusting.env.push(("HOME".into(), home.clone().into()));
    let not_trusting = s.chromium(s.https.port(), &[&s.listener.key]);
    for (options, trusts) in [(trusting, true), (not_trusting, false)] {
        let url = url.clone();
        let Some((text, documents)) = with_browser(options, move |browser| {
            let documents = Arc::new(Mutex::new(Vec::<Value>::new()));
            let seen = Arc::clone(&documents);
            let mut auth = ProxyAuth::new("ivan", PASSWORD);
            browser.on_event(move |event| {
                if event.method == "Network.responseReceived" && event.params["type"] == "Document"
                {
                    seen.lock().unwrap().push(event.params["response"].clone());
                }
                auth.answer(event)
            });
            browser.call("Network.enable", json!({})).unwrap();
            browser
                .call("Fetch.enable", json!({ "handleAuthRequests": true }))
                .unwrap();
            let text = page_text(browser, &url);
            (text, documents.lock().unwrap().clone())
        })
        .await
        else {
            return;
        };
        if !trusts {
            assert!(
                text.is_err(),
                "a leaf of a CA Chromium does not trust: {text:?}"
            );
            continue;
        }
        let text = text.unwrap();
        assert!(text.contains("/inspected"), "{text}");
        let [document] = documents.as_slice() else {
            panic!("one document: {documents:?}");
        };
        // The gateway answered (its header names the proxy), over a leaf of its CA.
        let header = |name: &str| {
            let headers = document["headers"].as_object().cloned().unwrap_or_default();
            headers
                .into_iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value)
        };
        assert_eq!(
            header("x-proxypool-proxy"),
            Some(json!(format!("{:032x}", 1))),
            "{document}"
        );
        assert_eq!(
            document["securityDetails"]["issuer"], "browser inspection ca",
            "{document}"
        );
    }
    s.running.shutdown().await;
}

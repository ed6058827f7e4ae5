//! The admin listener's bearer token: `/metrics` and `/status` need it once it is set (and
//! show everything to it), the probes do not, without one they show only the aggregate,
//! and a reload sets or lifts it for the next request.

use crate::common::control::TestController;
use crate::common::*;
use proxypool_core::SecretHash;

const ADMIN_TOKEN: &str = "gateway-admin-token-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_status_need_the_admin_token_and_the_probes_do_not() {
    let controller = TestController::start(WORKER, 60_000).await;
    controller.publish(vec![], vec![client("alice")]);
    let mut settings = config(&controller);
    settings.admin_token = Some(SecretHash::derive(ADMIN_TOKEN, "adminsalt").unwrap());
    let gateway = Running::start(settings.clone()).await;
    acked(&controller, 1).await;
    let url = |path: &str| format!("http://{}{path}", gateway.admin);
    let bearer = |token: &str| format!("Authorization: Bearer {token}");

    for path in ["/metrics", "/status"] {
        for refused in [
            curl(&[&url(path)]).await,
            curl(&["-H", &bearer("wrong-token-0123456789"), &url(path)]).await,
            curl(&[
                "-H",
                &format!("Authorization: Basic {ADMIN_TOKEN}"),
                &url(path),
            ])
            .await,
        ] {
            assert_eq!(refused.status, 401, "{path}: {}", refused.body);
            assert!(
                refused
                    .header("www-authenticate")
                    .is_some_and(|v| v.starts_with("Bearer")),
                "{path}: {:?}",
                refused.headers
            );
            assert!(!refused.body.contains("alice"), "{}", refused.body);
            assert!(!refused.body.contains("proxypool_"), "{}", refused.body);
        }
        let allowed = curl(&["-H", &bearer(ADMIN_TOKEN), &url(path)]).await;
        assert_eq!(allowed.status, 200, "{path}: {}", allowed.body);
    }
    let metrics = curl(&["-H", &bearer(ADMIN_TOKEN), &url("/metrics")]).await;
    assert!(metrics.body.contains("# TYPE"), "{}", metrics.body);
    let status = curl(&["-H", &bearer(ADMIN_TOKEN), &url("/status")]).await;
    let status: serde_json::Value = serde_json::from_str(&status.body).unwrap();
    assert_eq!(status["worker"], WORKER, "{status}");

    // Orchestrators probe without credentials.
    assert_eq!(curl(&[&url("/healthz")]).await.status, 200);
    let ready = curl(&[&url("/readyz")]).await;
    assert!(ready.body.contains("\"ready\""), "{}", ready.body);
    assert_ne!(ready.status, 401);

    assert_eq!(status["detail"], true, "{status}");
    assert!(status["cooldowns"]["entries"].is_array(), "{status}");

    // A reload that lifts the token opens the routes from the next request, to their
    // aggregate only, and one that sets it again closes them.
    settings.admin_token = None;
    gateway.reload.apply(&settings).unwrap();
    let open = curl(&[&url("/status")]).await;
    assert_eq!(open.status, 200);
    let open: serde_json::Value = serde_json::from_str(&open.body).unwrap();
    assert_eq!(open["detail"], false, "{open}");
    assert!(open["cooldowns"].get("entries").is_none(), "{open}");
    assert_eq!(open["worker"], WORKER, "{open}");
    settings.admin_token = Some(SecretHash::derive(ADMIN_TOKEN, "othersalt").unwrap());
    gateway.reload.apply(&settings).unwrap();
    assert_eq!(curl(&[&url("/metrics")]).await.status, 401);
    assert_eq!(
        curl(&["-H", &bearer(ADMIN_TOKEN), &url("/metrics")])
            .await
            .status,
        200
    );
    gateway.shutdown().await;
}

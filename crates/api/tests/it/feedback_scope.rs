//! Whose scope a client's feedback writes: only the client's own project's. A body that
//! names another project (by `proxy_id` or by `session`) is refused whole and changes
//! nothing; the report without it lands in the reporter's scope alone.

use crate::common::*;
use proxypool_core::{ProjectId, now_millis};
use serde_json::{Value, json};

const SHOP: &str = "shop.test";

fn proxy_ids(extraction: &Value) -> Vec<String> {
    extraction["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_cannot_write_another_project_s_scope() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 2).await;
    // alice holds the proxy from her extraction, so she may report it without a ticket.
    let extraction = server.extract(ALICE, None, &body(1)).await;
    let held = proxy_ids(&extraction.json()).remove(0);
    let id = proxypool_core::ProxyId::new(&held).unwrap();
    for forged in [
        json!({"proxy_id": held, "domain": SHOP, "verdict": "banned", "project": "p-bob"}),
        json!({"session": "s1", "domain": SHOP, "verdict": "banned", "project": "p-bob"}),
        json!({"proxy_id": held, "domain": SHOP, "verdict": "banned", "project": null}),
    ] {
        let reply = server.post_json("/v1/feedback", ALICE, None, &forged).await;
        let message = reply.assert_error(400, "invalid_request");
        assert!(message.contains("project"), "{forged}: {message}");
    }
    let now = now_millis();
    assert!(
        server
            .pool
            .cooldowns_of(now, std::slice::from_ref(&id))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        server
            .pool
            .session_feedback(now, 10)
            .await
            .unwrap()
            .is_empty()
    );

    let honest = json!({"proxy_id": held, "domain": SHOP, "verdict": "banned"});
    let reply = server.post_json("/v1/feedback", ALICE, None, &honest).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let stored = server
        .pool
        .cooldowns_of(now_millis(), std::slice::from_ref(&id))
        .await
        .unwrap();
    let scopes: Vec<Option<ProjectId>> = stored.into_iter().map(|e| e.project).collect();
    assert_eq!(scopes, vec![Some(ProjectId::new("p-alice").unwrap())]);
}

//! The controller end to end with the memory store (the scenario is in `common::e2e`, shared
//! with the Redis store's run in `redis_store.rs`).

use crate::common::e2e;
use proxypool_controller::Controller;
use proxypool_controller::config::{Config, Role};
use std::net::Ipv4Addr;

#[tokio::test]
async fn a_controller_from_a_config_file_serves_a_worker_checked_proxies() {
    let vendor = e2e::start_vendor(Ipv4Addr::new(127, 0, 3, 1)).await;
    let path = e2e::write_config("[store]\nurl = \"memory\"\n", &vendor, &[]);
    let config = Config::load_with_env(&path, Role::Controller, &e2e::env()).unwrap();
    let running = Controller::from_config(config)
        .await
        .unwrap()
        .start()
        .await
        .unwrap();
    e2e::serves_a_worker_checked_proxies(&running, &vendor).await;
    running.shutdown().await;
}

//! The control loop's side of fleet membership, against the test controller: every report
//! names the fleet listener (the advertised address and the hop certificate's pin), each
//! report's answer becomes the member list (malformed pins left out; the members gauge
//! follows it), and a hop to a member that does not answer makes the gateway ask the
//! controller for the list at once (`GET /control/v1/fleet?worker=W`).

use crate::common::control::TestController;
use crate::common::*;
use proxypool_core::WorkerId;
use proxypool_core::fleet::{FleetEndpoint, FleetMember, is_pin};
use proxypool_gateway::FleetConfig;
use std::time::Duration;

const ADVERTISED: &str = "gw-test.fleet.internal:7443";

fn member(worker: &str, address: &str, pin: &str) -> FleetMember {
    FleetMember {
        worker: WorkerId::new(worker).unwrap(),
        address: address.to_owned(),
        spki_sha256: pin.to_owned(),
        since_ms: 1_000,
    }
}

/// The gateway's own endpoint, once its first report reached the controller.
async fn reported_endpoint(controller: &TestController) -> FleetEndpoint {
    let mut endpoint = None;
    eventually(
        Duration::from_secs(10),
        "a report naming the fleet listener",
        || {
            endpoint = controller.last_fleet_endpoint();
            endpoint.is_some()
        },
    )
    .await;
    endpoint.unwrap()
}

async fn members_gauge_is(gateway: &Running, n: f64) {
    let what = format!("proxypool_gateway_fleet_members at {n}");
    eventually_async(&what, Duration::from_secs(10), async || {
        (metric(gateway, "proxypool_gateway_fleet_members").await == Some(n)).then_some(())
    })
    .await;
}

fn fleet_calls(controller: &TestController) -> usize {
    controller
        .state
        .lock()
        .unwrap()
        .calls
        .iter()
        .filter(|call| call.as_str() == "GET /control/v1/fleet")
        .count()
}

#[tokio::test]
async fn reports_name_the_listener_and_answers_make_the_member_list() {
    // Reads a process-wide gauge.
    let _alone = alone().await;
    let controller = TestController::start(WORKER, 60_000).await;
    controller.publish(Vec::new(), vec![client("alice")]);
    let mut config = config(&controller);
    with_operator_token(&mut config);
    let mut fleet = FleetConfig::new("127.0.0.1:0".parse().unwrap());
    fleet.advertise = ADVERTISED.into();
    fleet.hop_timeout = Millis(500);
    fleet.connect_timeout = Millis(500);
    config.fleet = Some(fleet);
    let gateway = Running::start(config).await;

    let endpoint = reported_endpoint(&controller).await;
    assert_eq!(endpoint.address, ADVERTISED);
    assert!(is_pin(&endpoint.spki_sha256), "{endpoint:?}");
    endpoint.validate().unwrap();

    // A peer that is listed but never answers (a closed loopback port), beside us, and a
    // member whose pin is malformed, which the view leaves out.
    let dead = member("gw-dead", "127.0.0.1:1", &"d".repeat(64));
    // The gauge outlives the tests before this one: first a value only this gateway's
    // list makes, so the next value is this gateway's too.
    controller.set_fleet(vec![member(WORKER, ADVERTISED, &endpoint.spki_sha256)]);
    members_gauge_is(&gateway, 1.0).await;
    controller.set_fleet(vec![
        dead.clone(),
        member("gw-malformed", "127.0.0.1:2", "not-a-pin"),
        member(WORKER, ADVERTISED, &endpoint.spki_sha256),
    ]);
    members_gauge_is(&gateway, 2.0).await;
    assert_eq!(fleet_calls(&controller), 0, "no hop asked for the list yet");

    // Sticky sessions are spread over both members: those owned by the dead one are
    // relayed, fail to connect, and the gateway asks the controller for a fresh list.
    for n in 0..16 {
        let user = format!("alice-session-fleet{n}");
        let _ = curl(&[
            "-s",
            "--max-time",
            "5",
            "-x",
            &http_proxy_url(&user, gateway.http),
            "http://127.0.0.1:9/",
        ])
        .await;
        if fleet_calls(&controller) > 0 {
            break;
        }
    }
    eventually(Duration::from_secs(5), "a fleet list fetch", || {
        fleet_calls(&controller) > 0
    })
    .await;
    assert!(
        fleet_calls(&controller) <= 2,
        "refreshes are coalesced: {}",
        fleet_calls(&controller)
    );

    // A later answer without the dead peer shrinks the list.
    controller.set_fleet(vec![member(WORKER, ADVERTISED, &endpoint.spki_sha256)]);
    members_gauge_is(&gateway, 1.0).await;
    gateway.shutdown().await;
}

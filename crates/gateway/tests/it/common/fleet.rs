//! Three gateways as one fleet, for the fleet's end-to-end tests: each member has its own
//! test controller and its own leased sim upstreams (each leaving from its own 127.0.0.x
//! exit, which the sim origin echoes, so an answer tells which member's proxy carried it),
//! and every controller lists all three as the fleet. Helpers send curl through a member
//! over plain HTTP, CONNECT or SOCKS5 and read the exit back.

use super::control::TestController;
use super::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, exit_of, free_port, sim_upstream};
use super::*;
use proxypool_core::control::GatewayClient;
use proxypool_core::fleet::FleetMember;
use proxypool_core::{Protocol, WorkerId};
use proxypool_gateway::{FleetConfig, GatewayConfig};
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// Upstreams per gateway.
const PER_GATEWAY: u8 = 2;

/// One member: its gateway, controller and upstreams, and the exits they leave from.
pub struct Member {
    pub gateway: Option<Running>,
    pub controller: Arc<TestController>,
    pub exits: Vec<String>,
    _upstreams: Vec<UpstreamProxy>,
}

impl Member {
    pub fn gateway(&self) -> &Running {
        self.gateway.as_ref().expect("a running member")
    }
}

/// Three fleet members and the origin they reach.
pub struct Fleet {
    pub origin: Origin,
    pub members: Vec<Member>,
}

impl Fleet {
    /// Three gateways `fleet-a`..`fleet-c` whose exits start at 127.0.0.`first_exit`,
    /// listed as one fleet by each one's controller, for the client `alice`, reaching a
    /// plain sim origin.
    pub async fn start(first_exit: u8) -> Self {
        let origin = Origin::start().await.unwrap();
        Self::start_with(first_exit, origin, vec![client("alice")], |_| {}).await
    }

    /// [`Fleet::start`] reaching `origin`, with `clients` in every member's snapshot and
    /// each member's settings changed by `configure` before it starts.
    pub async fn start_with(
        first_exit: u8,
        origin: Origin,
        clients: Vec<GatewayClient>,
        configure: impl Fn(&mut GatewayConfig),
    ) -> Self {
        let mut members = Vec::new();
        let mut listed = Vec::new();
        for (index, name) in ["fleet-a", "fleet-b", "fleet-c"].into_iter().enumerate() {
            let mut upstreams = Vec::new();
            let mut proxies = Vec::new();
            let mut exits = Vec::new();
            for n in 0..PER_GATEWAY {
                let number = index as u8 * PER_GATEWAY + n;
                let exit = Ipv4Addr::new(127, 0, 0, first_exit + number);
                let upstream = sim_upstream(ProxyKind::Http, exit).await;
                proxies.push(proxy(
                    number + 1,
                    Protocol::Http,
                    upstream.addr(),
                    CREDS,
                    "acme",
                    "us",
                ));
                exits.push(exit.to_string());
                upstreams.push(upstream);
            }
            let controller = TestController::start(name, 3_600_000).await;
            controller.publish(proxies, clients.clone());
            let mut config = config(&controller);
            config.worker_id = WorkerId::new(name).unwrap();
            let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
            config.fleet = Some(FleetConfig::new(listen));
            configure(&mut config);
            let gateway = Running::start(config).await;
            acked(&controller, 1).await;
            let endpoint = eventually_async(
                "a fleet endpoint reported",
                Duration::from_secs(10),
                async || controller.last_fleet_endpoint(),
            )
            .await;
            listed.push(FleetMember {
                worker: WorkerId::new(name).unwrap(),
                address: listen.to_string(),
                spki_sha256: endpoint.spki_sha256,
                since_ms: 1,
            });
            members.push(Member {
                gateway: Some(gateway),
                controller,
                exits,
                _upstreams: upstreams,
            });
        }
        for member in &members {
            let reports = member.controller.state.lock().unwrap().reports.len();
            member.controller.set_fleet(listed.clone());
            // The answer to the next report carries the list; the one after shows it was
            // taken in (the control loop reports one at a time).
            let state = Arc::clone(&member.controller.state);
            eventually(Duration::from_secs(10), "the fleet list delivered", || {
                state.lock().unwrap().reports.len() >= reports + 2
            })
            .await;
        }
        Fleet { origin, members }
    }

    /// Which member's upstream `exit` is.
    pub fn owner_of_exit(&self, exit: &str) -> usize {
        self.members
            .iter()
            .position(|member| member.exits.iter().any(|e| e == exit))
            .unwrap_or_else(|| panic!("{exit} is no member's exit"))
    }

    /// A plain HTTP request as `user` through member `at`, with `extra` curl arguments.
    pub async fn http(&self, at: usize, user: &str, extra: &[&str]) -> Curl {
        let proxy = http_proxy_url(user, self.members[at].gateway().http);
        let url = self.origin.url("/");
        let mut args = vec!["-x", &proxy];
        args.extend_from_slice(extra);
        args.push(&url);
        let response = curl(&args).await;
        assert_eq!(response.status, 200, "{user} at {at}: {response:?}");
        response
    }

    /// The exit of a request as `user` through member `at` over `how`.
    pub async fn exit(&self, at: usize, user: &str, how: How) -> String {
        let gateway = self.members[at].gateway();
        let url = self.origin.url("/");
        let response = match how {
            How::Http => self.http(at, user, &[]).await,
            How::Connect => curl(&["-p", "-x", &http_proxy_url(user, gateway.http), &url]).await,
            How::Socks5 => curl(&["-x", &socks_proxy_url(user, gateway.socks5), &url]).await,
        };
        assert_eq!(
            response.status, 200,
            "{user} at {at} over {how:?}: {response:?}"
        );
        exit_of(&response.body)
    }

    pub async fn shutdown(mut self) {
        for member in &mut self.members {
            if let Some(gateway) = member.gateway.take() {
                gateway.shutdown().await;
            }
        }
    }
}

/// How a request reaches a member.
#[derive(Debug, Clone, Copy)]
pub enum How {
    Http,
    Connect,
    Socks5,
}

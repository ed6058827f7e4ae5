//! Three gateways as one fleet, for the fleet's end-to-end tests: each member has its own
//! test controller and its own leased sim upstreams (each leaving from its own 127.0.0.x
//! exit, which the sim origin echoes, so an answer tells which member's proxy carried it),
//! and every controller lists all three as the fleet. Helpers send curl through a member
//! over plain HTTP, CONNECT or SOCKS5 and read the exit back. A member can be listed
//! behind a [`BlackHole`], which a test freezes to make it a stopped gateway.

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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

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
        Self::start_fronted(first_exit, origin, clients, configure, None)
            .await
            .0
    }

    /// [`Fleet::start_with`], with member `fronted` listed to its peers at the address of
    /// a [`BlackHole`] in front of its fleet listener, for a test to freeze.
    pub async fn start_with_black_hole(
        first_exit: u8,
        origin: Origin,
        clients: Vec<GatewayClient>,
        configure: impl Fn(&mut GatewayConfig),
        fronted: usize,
    ) -> (Self, BlackHole) {
        let (fleet, hole) =
            Self::start_fronted(first_exit, origin, clients, configure, Some(fronted)).await;
        (fleet, hole.expect("a black hole in front of the member"))
    }

    async fn start_fronted(
        first_exit: u8,
        origin: Origin,
        clients: Vec<GatewayClient>,
        configure: impl Fn(&mut GatewayConfig),
        fronted: Option<usize>,
    ) -> (Self, Option<BlackHole>) {
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
        let mut hole = None;
        if let Some(fronted) = fronted {
            let real: SocketAddr = listed[fronted].address.parse().unwrap();
            let front = BlackHole::start(real).await;
            listed[fronted].address = front.addr().to_string();
            hole = Some(front);
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
        (Fleet { origin, members }, hole)
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

/// A TCP forwarder in front of a member's fleet listener that can be frozen: what a
/// stopped (SIGSTOP) or vanished gateway looks like to its peers. Before [`freeze`] it
/// passes bytes both ways; after it, it keeps every connection open but passes no byte
/// either way, and accepts new connections without ever answering them (so a TLS
/// handshake through it never finishes). Dropped, it closes everything.
///
/// [`freeze`]: BlackHole::freeze
pub struct BlackHole {
    addr: SocketAddr,
    frozen: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl BlackHole {
    /// Forwards a fresh loopback port to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (frozen, _) = watch::channel(false);
        let freezes = frozen.clone();
        // The connection tasks live in the accept task's set: aborting it ends them all.
        let accept = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        connections.spawn(Self::carry(client, target, freezes.subscribe()));
                    }
                    Some(_) = connections.join_next() => {}
                }
            }
        });
        BlackHole {
            addr,
            frozen,
            accept,
        }
    }

    /// The address peers are told to dial.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on no byte passes, and no new connection is answered.
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    async fn carry(client: TcpStream, target: SocketAddr, frozen: watch::Receiver<bool>) {
        if *frozen.borrow() {
            // Accepted by the kernel, never served: held open until the hole is dropped.
            let _held = client;
            return std::future::pending().await;
        }
        let Ok(server) = TcpStream::connect(target).await else {
            return;
        };
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        tokio::join!(
            Self::pipe(client_read, server_write, frozen.clone()),
            Self::pipe(server_read, client_write, frozen),
        );
    }

    /// Copies `from` to `to` until either ends; once frozen it holds both, passing nothing.
    async fn pipe(
        mut from: OwnedReadHalf,
        mut to: OwnedWriteHalf,
        mut frozen: watch::Receiver<bool>,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let read = tokio::select! {
                read = from.read(&mut buf) => Some(read),
                _ = frozen.wait_for(|frozen| *frozen) => None,
            };
            match read {
                // Bytes read as the freeze came are not passed either.
                _ if *frozen.borrow() => break,
                // The hole is being dropped.
                None => return,
                Some(Ok(0) | Err(_)) => {
                    let _ = to.shutdown().await;
                    return;
                }
                Some(Ok(n)) => {
                    if to.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _held = (from, to);
        std::future::pending::<()>().await;
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

//! The gateway fleet: sticky sessions and rotation keys that hold whichever gateway a
//! client's connection lands on. Each key (client, session or rotation key) has one owner
//! among the live gateways, chosen by rendezvous hashing over the membership the
//! controllers publish ([`view`]); a gateway that receives a keyed request it does not own
//! relays it to the owner over a mutually pinned TLS hop ([`hop_client`], served by
//! `crate::inbound::fleet_accept`), and the owner routes it through its own leased proxies.
//! Requests without a key never leave the gateway that received them.
//!
//! | module | what it is for |
//! | --- | --- |
//! | `view` | the fleet's members as the controllers last listed them, and on-demand refreshes |
//! | `identity`, `pins` | this gateway's hop key and certificate; TLS settings that check peers by pin |
//! | `owner` | which member owns a key: rendezvous over the reachable members, and moved keys |
//! | `hop_client` | connections to owners: pooled for plain HTTP, dedicated for tunnels |
//! | `metrics` | relayed and served requests, the hop's latency, refused hops |

pub(crate) mod hop_client;
pub(crate) mod identity;
pub(crate) mod metrics;
pub(crate) mod owner;
pub(crate) mod pins;
pub(crate) mod view;

use proxypool_core::WorkerId;
use proxypool_core::fleet::FleetEndpoint;
use std::sync::Arc;

/// Everything a fleet member needs, built once at bind when `[gateway.fleet]` is set.
#[derive(Debug)]
pub(crate) struct Fleet {
    /// The members as last listed, and refresh requests to the control loop.
    pub view: Arc<view::FleetView>,
    /// This gateway's hop certificate and key.
    pub identity: Arc<identity::FleetIdentity>,
    /// Members this gateway found unreachable, and the member lists it remembers.
    pub owners: owner::Owners,
    /// Connections to owners.
    pub hops: hop_client::HopClient,
    pub metrics: metrics::FleetMetrics,
    /// The address peers dial (`[gateway.fleet] advertise`).
    pub advertise: String,
}

impl Fleet {
    /// A member identity for `worker`, advertised at `advertise`.
    pub(crate) fn new(worker: WorkerId, advertise: String) -> Result<Self, String> {
        let identity = Arc::new(identity::FleetIdentity::generate(&worker)?);
        let view = Arc::new(view::FleetView::new(worker, identity.pin_hex().to_owned()));
        Ok(Fleet {
            hops: hop_client::HopClient::new(Arc::clone(&identity)),
            owners: owner::Owners::new(),
            metrics: metrics::FleetMetrics::new(),
            view,
            identity,
            advertise,
        })
    }

    /// What this gateway tells the controller in its runtime reports.
    pub(crate) fn endpoint(&self) -> FleetEndpoint {
        FleetEndpoint {
            address: self.advertise.clone(),
            spki_sha256: self.identity.pin_hex().to_owned(),
        }
    }
}

//! Who asks: a client that proved who it is ([`crate::inbound::auth`]), with the
//! selectors of its username. What routing and outbound act for.

use crate::routing::selector::Selectors;
use crate::snapshot::ClientEntry;
use std::sync::Arc;

/// A client that proved who it is, with what it asked for.
#[derive(Debug, Clone)]
pub(crate) struct Authenticated {
    pub client: Arc<ClientEntry>,
    pub selectors: Selectors,
    /// The key's owner in the fleet changed since the key was last used (a relayed request
    /// that says so): with no pin here, the session is reassigned, not new.
    pub fleet_moved: bool,
}

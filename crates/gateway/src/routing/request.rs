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
}

//! STUB (H3 replaces): connections to owners.

use super::identity::FleetIdentity;
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct HopClient {
    _identity: Arc<FleetIdentity>,
}

impl HopClient {
    pub(crate) fn new(identity: Arc<FleetIdentity>) -> Self {
        HopClient {
            _identity: identity,
        }
    }
}

//! STUB (H1 replaces): the fleet's members as the controllers last listed them.

use proxypool_core::WorkerId;

#[derive(Debug)]
pub(crate) struct FleetView {
    pub me: WorkerId,
    pub my_pin: String,
}

impl FleetView {
    pub(crate) fn new(me: WorkerId, my_pin: String) -> Self {
        FleetView { me, my_pin }
    }
}

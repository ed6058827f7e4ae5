//! STUB (H3 replaces): fleet metric handles.

#[derive(Debug, Default)]
pub(crate) struct FleetMetrics {}

impl FleetMetrics {
    pub(crate) fn new() -> Self {
        FleetMetrics {}
    }
}

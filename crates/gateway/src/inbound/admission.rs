//! Admission steps that read the gateway's shared state: the destination policy in force
//! ([`crate::policy::destination`]) checked for a client's target, the refusal counted.

use crate::refusal::Refusal;
use crate::snapshot::ClientEntry;
use crate::state::Shared;
use proxypool_proto::TargetAddr;

/// Checks `target` for `client` against the policy in force; a refusal is counted.
pub(crate) fn admit(
    shared: &Shared,
    client: &ClientEntry,
    target: &TargetAddr,
) -> Result<(), Refusal> {
    shared
        .config()
        .destinations
        .check(target, client.allowed_ports.as_ref())
        .map_err(|denied| {
            shared.metrics.destination_denied(denied.reason);
            Refusal::DestinationDenied(denied.to_string())
        })
}

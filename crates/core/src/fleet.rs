//! The gateway fleet's membership as the control API carries it: each gateway tells the
//! controller where its peers reach it and the pin of its hop certificate
//! ([`FleetEndpoint`], in every runtime report), and the controllers answer the list of
//! live members ([`FleetMember`]) that gateways choose the owner of a sticky key from.

use crate::error::PoolError;
use crate::ids::WorkerId;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};

/// `GET` the fleet's members (worker-token authenticated): [`FleetList`].
pub const FLEET_PATH: &str = "/control/v1/fleet";

/// The longest `host:port` a member may advertise.
pub const MAX_FLEET_ADDRESS: usize = 255;

/// Where a gateway's fleet listener is reached and how its certificate is recognised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetEndpoint {
    /// `host:port` the other gateways dial.
    pub address: String,
    /// Lowercase hex SHA-256 of the hop certificate's SubjectPublicKeyInfo.
    pub spki_sha256: String,
}

impl FleetEndpoint {
    /// Refuses an address that is not `host:port` within [`MAX_FLEET_ADDRESS`] bytes, or a
    /// pin that is not 64 lowercase hex digits.
    pub fn validate(&self) -> Result<(), PoolError> {
        let address_ok = self.address.len() <= MAX_FLEET_ADDRESS
            && self.address.is_ascii()
            && !self
                .address
                .chars()
                .any(|c| c.is_ascii_whitespace() || c.is_ascii_control())
            && self.address.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0)
            });
        if !address_ok {
            return Err(PoolError::invalid(format!(
                "fleet address must be host:port of at most {MAX_FLEET_ADDRESS} bytes"
            )));
        }
        if !is_pin(&self.spki_sha256) {
            return Err(PoolError::invalid(
                "fleet spki_sha256 must be 64 lowercase hex digits",
            ));
        }
        Ok(())
    }
}

/// A pin: SHA-256 of a certificate's SubjectPublicKeyInfo DER.
pub type Pin = [u8; 32];

/// The pin of the SubjectPublicKeyInfo `spki_der`.
pub fn spki_pin(spki_der: &[u8]) -> Pin {
    use sha2::{Digest, Sha256};
    Sha256::digest(spki_der).into()
}

/// Whether `text` is a SHA-256 pin in lowercase hex.
pub fn is_pin(text: &str) -> bool {
    parse_pin(text).is_some()
}

/// A pin from its lowercase hex form (64 digits); `None` for anything else.
pub fn parse_pin(text: &str) -> Option<Pin> {
    let mut pin = [0u8; 32];
    crate::hex::decode_into(text, &mut pin)?;
    Some(pin)
}

/// A live gateway with a fleet listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetMember {
    pub worker: WorkerId,
    pub address: String,
    pub spki_sha256: String,
    /// When the member's current session opened.
    pub since_ms: UnixMillis,
}

/// The answer of [`FLEET_PATH`]: the live members, sorted by worker id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetList {
    pub members: Vec<FleetMember>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_sha256_in_lowercase_hex() {
        assert_eq!(
            crate::hex::encode(&spki_pin(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(parse_pin("AB"), None);
        assert_eq!(parse_pin(&"g".repeat(64)), None);
        assert_eq!(parse_pin(&"0F".repeat(32)), None, "lower case only");
        assert_eq!(parse_pin(&"0f".repeat(32)), Some([0x0f; 32]));
        assert!(is_pin(&"0f".repeat(32)));
    }
}

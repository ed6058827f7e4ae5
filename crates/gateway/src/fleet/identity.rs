//! STUB (H2 replaces): this gateway's hop key and certificate.

use proxypool_core::WorkerId;

#[derive(Debug)]
pub(crate) struct FleetIdentity {
    pin: String,
}

impl FleetIdentity {
    pub(crate) fn generate(worker: &WorkerId) -> Result<Self, String> {
        Ok(FleetIdentity {
            pin: format!("{worker}"),
        })
    }

    /// Lowercase hex SHA-256 of the certificate's SubjectPublicKeyInfo.
    pub(crate) fn pin_hex(&self) -> &str {
        &self.pin
    }
}

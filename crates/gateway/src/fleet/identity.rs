//! This gateway's hop identity: an ECDSA P-256 key and a self-signed certificate made at
//! start, and the pin the other members recognise it by (SHA-256 of the certificate's
//! SubjectPublicKeyInfo). Nothing is written to disk: a restart makes a new key and
//! reports its new pin, so a leaked key dies with the process.
//!
//! The certificate's names carry no trust (peers check the pin only); they say whose it
//! is to someone reading a packet capture or a TLS error.

use proxypool_core::{WorkerId, hex};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use std::fmt;
use std::sync::Arc;

pub(crate) use proxypool_core::fleet::{Pin, parse_pin};

/// The hop key and certificate, and their pin.
pub(crate) struct FleetIdentity {
    certified: Arc<CertifiedKey>,
    pin_hex: String,
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for FleetIdentity {
    /// The pin only: the key never reaches a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetIdentity")
            .field("pin", &self.pin_hex)
            .finish_non_exhaustive()
    }
}

impl FleetIdentity {
    /// A fresh key and a self-signed certificate named `proxypool-fleet-<worker>`.
    pub(crate) fn generate(worker: &WorkerId) -> Result<Self, String> {
        let failed = |error: rcgen::Error| format!("making the fleet certificate: {error}");
        let name = format!("proxypool-fleet-{worker}");
        let mut params = CertificateParams::new(vec![name.clone()]).map_err(failed)?;
        let mut subject = DistinguishedName::new();
        subject.push(DnType::CommonName, name);
        params.distinguished_name = subject;
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(failed)?;
        let cert = params.self_signed(&key).map_err(failed)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Self::from_parts(cert.der().clone(), key)
    }

    /// The identity of a certificate and its key (PKCS#8), checked to belong together.
    pub(crate) fn from_parts(
        cert: CertificateDer<'static>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Self, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let pin = spki_pin(&cert)?;
        let certified = CertifiedKey::from_der(vec![cert], key, &provider)
            .map_err(|error| format!("the fleet certificate and key: {error}"))?;
        Ok(FleetIdentity {
            certified: Arc::new(certified),
            pin_hex: hex::encode(&pin),
            provider,
        })
    }

    /// Lowercase hex SHA-256 of the certificate's SubjectPublicKeyInfo.
    pub(crate) fn pin_hex(&self) -> &str {
        &self.pin_hex
    }

    /// SHA-256 of the certificate's SubjectPublicKeyInfo (the gateway itself only ever
    /// shows its pin in hex; peers are checked against the member list's).
    #[cfg(test)]
    pub(crate) fn pin(&self) -> Pin {
        parse_pin(&self.pin_hex).expect("our own pin is well-formed")
    }

    /// The certificate and its signing key, for the hop's TLS configurations.
    pub(crate) fn certified_key(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.certified)
    }

    /// The crypto provider the hop's TLS runs on (ring, as everywhere in the process).
    pub(crate) fn provider(&self) -> &Arc<CryptoProvider> {
        &self.provider
    }
}

/// The pin of a certificate: SHA-256 over its SubjectPublicKeyInfo DER, exactly as the
/// certificate carries it.
pub(crate) fn spki_pin(cert: &CertificateDer<'_>) -> Result<Pin, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|error| format!("not an X.509 certificate: {error}"))?;
    Ok(proxypool_core::fleet::spki_pin(
        parsed.tbs_certificate.subject_pki.raw,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_is_the_sha256_of_the_spki_and_each_start_makes_a_new_key() {
        let worker = WorkerId::new("gw-1").unwrap();
        let identity = FleetIdentity::generate(&worker).unwrap();
        let cert = &identity.certified_key().cert[0];
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).unwrap();
        assert_eq!(
            parsed.subject().to_string(),
            "CN=proxypool-fleet-gw-1",
            "the certificate says whose it is"
        );
        // The SPKI of a P-256 key: its algorithm and 65 bytes of uncompressed point.
        let spki = parsed.tbs_certificate.subject_pki.raw;
        assert_eq!(spki.len(), 91);
        assert_eq!(identity.pin(), proxypool_core::fleet::spki_pin(spki));
        assert!(proxypool_core::fleet::is_pin(identity.pin_hex()));
        assert_eq!(parse_pin(identity.pin_hex()), Some(identity.pin()));
        assert_ne!(
            FleetIdentity::generate(&worker).unwrap().pin(),
            identity.pin()
        );
    }
}

//! TLS settings of the hop between fleet members, both sides checking the other by pin.
//!
//! Members' certificates are self-signed and made at each start, so there is no CA to
//! chain to: the chain step is replaced by the pin (SHA-256 of the SubjectPublicKeyInfo),
//! and everything else of TLS stays: TLS 1.3 only, the handshake signatures verified with
//! the provider's algorithms (so a peer proves it holds the key of the certificate it
//! shows), ALPN `proxypool-fleet/1`.
//!
//! - The client (a relaying member) accepts exactly the pin the member list gives for the
//!   owner it dials, whatever name the certificate carries.
//! - The server (the owner's fleet listener) requires a client certificate but accepts any
//!   at the handshake: whether its pin belongs to a member is decided right after
//!   ([`peer_pin`] against the fleet view), because an unknown pin may be a newcomer the
//!   view learns of only after an asynchronous refresh, which a verifier cannot wait for.
//!
//! Session resumption is off on both sides: every hop connection shows its certificate,
//! so every connection's pin is checked against the current list.

use super::identity::{FleetIdentity, Pin, parse_pin, spki_pin};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, Resumption};
use rustls::crypto::{CryptoProvider, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, NoServerSessionStorage, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{
    CertificateError, ClientConfig, CommonState, DigitallySignedStruct, DistinguishedName,
    PeerIncompatible, ServerConfig, SignatureScheme,
};
use std::sync::Arc;

/// The hop's application protocol: HTTP/1.1 between fleet members, version 1.
pub(crate) const ALPN: &[u8] = b"proxypool-fleet/1";

/// The fleet listener's TLS: our certificate, a client certificate required (any; its pin
/// is checked after the handshake), TLS 1.3 only.
pub(crate) fn server_config(identity: &FleetIdentity) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::clone(identity.provider());
    let mut config = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|error| format!("fleet listener TLS: {error}"))?
        .with_client_cert_verifier(Arc::new(AnyClientCert { provider }))
        .with_cert_resolver(Arc::new(OurCert(identity.certified_key())));
    config.alpn_protocols = vec![ALPN.to_vec()];
    config.session_storage = Arc::new(NoServerSessionStorage {});
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

/// A pin as the hop client is given it: the bytes, or the member list's lowercase hex.
pub(crate) trait ExpectedPin {
    fn expected_pin(&self) -> Result<Pin, String>;
}

impl ExpectedPin for Pin {
    fn expected_pin(&self) -> Result<Pin, String> {
        Ok(*self)
    }
}

impl ExpectedPin for str {
    fn expected_pin(&self) -> Result<Pin, String> {
        parse_pin(self).ok_or_else(|| format!("{self:?} is no pin (64 lowercase hex digits)"))
    }
}

impl ExpectedPin for String {
    fn expected_pin(&self) -> Result<Pin, String> {
        self.as_str().expected_pin()
    }
}

/// A hop client's TLS toward the member whose pin is `expected`: any name, exactly that
/// pin, our certificate for client authentication, TLS 1.3 only. Refuses a pin that is not
/// 64 lowercase hex digits.
pub(crate) fn client_config(
    identity: &FleetIdentity,
    expected: &(impl ExpectedPin + ?Sized),
) -> Result<Arc<ClientConfig>, String> {
    let expected = expected.expected_pin()?;
    let provider = Arc::clone(identity.provider());
    let mut config = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|error| format!("fleet hop TLS: {error}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedServer { expected, provider }))
        .with_client_cert_resolver(Arc::new(OurCert(identity.certified_key())));
    config.alpn_protocols = vec![ALPN.to_vec()];
    config.resumption = Resumption::disabled();
    Ok(Arc::new(config))
}

/// The pin of the certificate the peer of a finished handshake showed; `None` when it
/// showed none (or one that is no X.509 certificate).
pub(crate) fn peer_pin(conn: &CommonState) -> Option<Pin> {
    conn.peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|cert| spki_pin(cert).ok())
}

/// Always our one certificate, on either side of the hop.
#[derive(Debug)]
struct OurCert(Arc<CertifiedKey>);

impl ResolvesServerCert for OurCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

impl ResolvesClientCert for OurCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Requires a client certificate and accepts any that parses: the pin decides after the
/// handshake. Its handshake signature is still verified, so the peer holds its key.
#[derive(Debug)]
struct AnyClientCert {
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for AnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        spki_pin(end_entity).map_err(|_| CertificateError::BadEncoding)?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls12_refused()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls13_signature(&self.provider, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        schemes(&self.provider)
    }
}

/// Accepts exactly the server certificate whose pin is `expected`, whatever its names.
#[derive(Debug)]
struct PinnedServer {
    expected: Pin,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let pin = spki_pin(end_entity).map_err(|_| CertificateError::BadEncoding)?;
        if pin != self.expected {
            return Err(CertificateError::ApplicationVerificationFailure.into());
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls12_refused()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls13_signature(&self.provider, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        schemes(&self.provider)
    }
}

/// Both verifiers: the configs allow TLS 1.3 only, so a TLS 1.2 signature is never asked
/// for; refused should it be.
fn tls12_refused() -> Result<HandshakeSignatureValid, rustls::Error> {
    Err(PeerIncompatible::Tls13RequiredForQuic.into())
}

/// Both verifiers: the handshake's signature checked with the provider's algorithms (the
/// pin replaces only the chain to a CA, never this).
fn tls13_signature(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    verify_tls13_signature(
        message,
        cert,
        dss,
        &provider.signature_verification_algorithms,
    )
}

/// The signature schemes the provider verifies.
fn schemes(provider: &CryptoProvider) -> Vec<SignatureScheme> {
    provider
        .signature_verification_algorithms
        .supported_schemes()
}

#[cfg(test)]
mod tests;

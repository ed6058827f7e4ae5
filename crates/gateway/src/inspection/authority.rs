//! [`Authority`]: the operator's CA (`[gateway.inspection] ca_cert`, `ca_key`) and the leaf
//! certificates it mints, one per host a client's inspected `CONNECT` names.
//!
//! A leaf names the host as its only subject alternative name (an IP address for a numeric
//! target), has a fresh ECDSA P-256 key and a random serial, and is valid for
//! `leaf_validity` from an hour ago (clients whose clock runs behind). Each comes ready as
//! a rustls [`ServerConfig`] (ALPN `http/1.1` only, so TLS session resumption works per
//! host), kept in a bounded cache ([`LeafCache`]): the least recently used goes first,
//! and concurrent first requests for one host mint once. Keys live in memory only: the CA
//! key as read from its file, the leaves' never written anywhere. [`Authority`]'s `Debug`
//! names the CA file and the cache's size, never key material.
//!
//! At load the CA is put to work once: a probe leaf is minted and verified against the
//! CA certificate as the only root, so a key that does not belong to the certificate, or a
//! certificate rcgen cannot issue under, fails the start (or the reload) with its key's
//! name instead of the first client's handshake.

use super::cache::LeafCache;
use super::metrics::InspectionMetrics;
use proxypool_config::gateway::InspectionConfig;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rustls::ServerConfig;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How far back a leaf's validity starts.
const BACKDATE: Duration = Duration::from_secs(3600);

/// The name the load-time probe leaf is minted for.
const PROBE_HOST: &str = "proxypool-probe.invalid";

/// The CA and its leaves (see the module docs).
pub(crate) struct Authority {
    issuer: Issuer<'static, KeyPair>,
    ca_cert: CertificateDer<'static>,
    /// Where the CA came from, for logs and `Debug`.
    ca_path: PathBuf,
    /// Tells a reload whether anything that shapes leaves changed (the files' contents
    /// and the settings): not a secret, and not kept for anything else.
    identity: u64,
    validity: Duration,
    provider: Arc<CryptoProvider>,
    leaves: LeafCache<Arc<ServerConfig>>,
    metrics: InspectionMetrics,
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authority")
            .field("ca_cert", &self.ca_path)
            .field("validity", &self.validity)
            .field("leaves", &self.leaves.len())
            .finish_non_exhaustive()
    }
}

impl Authority {
    /// Reads the CA of `config` and checks it can issue leaves. The error names the key
    /// at fault and never quotes a file's content.
    pub(crate) fn load(config: &InspectionConfig) -> Result<Self, String> {
        let cert_pem = std::fs::read(&config.ca_cert).map_err(|error| {
            format!(
                "inspection.ca_cert: cannot read {}: {error}",
                config.ca_cert.display()
            )
        })?;
        let key_pem = std::fs::read_to_string(&config.ca_key).map_err(|error| {
            format!(
                "inspection.ca_key: cannot read {}: {error}",
                config.ca_key.display()
            )
        })?;
        let ca_cert = CertificateDer::pem_slice_iter(&cert_pem)
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| {
                format!(
                    "inspection.ca_cert: {} holds no PEM certificate",
                    config.ca_cert.display()
                )
            })?;
        // Never the parser's words: they could quote the key.
        let key = KeyPair::from_pem(&key_pem).map_err(|_| {
            format!(
                "inspection.ca_key: {} is not a PKCS#8 private key (\"BEGIN PRIVATE KEY\"; \
                 `openssl pkcs8 -topk8 -nocrypt` converts other forms)",
                config.ca_key.display()
            )
        })?;
        let issuer = Issuer::from_ca_cert_der(&ca_cert, key).map_err(|error| {
            format!(
                "inspection.ca_cert: {} cannot issue leaves: {error}",
                config.ca_cert.display()
            )
        })?;
        let mut hasher = DefaultHasher::new();
        (&cert_pem, key_pem.as_bytes(), config.leaf_cache).hash(&mut hasher);
        config.leaf_validity.as_ms().hash(&mut hasher);
        let authority = Authority {
            issuer,
            ca_cert,
            ca_path: config.ca_cert.clone(),
            identity: hasher.finish(),
            validity: config.leaf_validity.as_duration(),
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            leaves: LeafCache::new(config.leaf_cache),
            metrics: InspectionMetrics::new(),
        };
        authority.probe().map_err(|error| {
            format!(
                "inspection: the key {} does not issue leaves that verify under {}: {error}",
                config.ca_key.display(),
                config.ca_cert.display()
            )
        })?;
        Ok(authority)
    }

    /// Whether `other` would mint the same leaves (same files, same settings): a reload
    /// then keeps this one and its cache.
    pub(crate) fn same_as(&self, other: &Authority) -> bool {
        self.identity == other.identity
    }

    pub(crate) fn metrics(&self) -> &InspectionMetrics {
        &self.metrics
    }

    /// The TLS settings that serve `host`'s leaf: from the cache, or minted now (once,
    /// however many ask at the same time).
    pub(crate) async fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, String> {
        let cell = self.leaves.cell(host);
        if let Some(config) = cell.get() {
            self.metrics.cache_hits.increment(1);
            return Ok(Arc::clone(config));
        }
        let mut minted = false;
        let mark = &mut minted;
        let config = cell
            .get_or_try_init(move || async move {
                *mark = true;
                self.server_config_now(host)
            })
            .await?;
        if minted {
            self.metrics.leaves_minted.increment(1);
            self.metrics.cached_leaves.set(self.leaves.len() as f64);
        } else {
            self.metrics.cache_hits.increment(1);
        }
        Ok(Arc::clone(config))
    }

    fn server_config_now(&self, host: &str) -> Result<Arc<ServerConfig>, String> {
        let (cert, key) = self.mint(host)?;
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()
            .and_then(|builder| {
                builder
                    .with_no_client_auth()
                    .with_single_cert(vec![cert], key)
            })
            .map_err(|error| format!("the leaf for {host} cannot be served: {error}"))?;
        // HTTP/1.1 only: the inner server speaks nothing else.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// A new leaf for `host` and its key.
    fn mint(
        &self,
        host: &str,
    ) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), String> {
        let failed = |error: rcgen::Error| format!("minting a leaf for {host}: {error}");
        // An IP address becomes an IP SAN (rcgen reads it so), a name a DNS SAN.
        let mut params = CertificateParams::new(vec![host.to_owned()]).map_err(failed)?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, host);
        params.distinguished_name = name;
        let since_epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let now = rcgen::date_time_ymd(1970, 1, 1) + since_epoch;
        params.not_before = now - BACKDATE;
        params.not_after = now + self.validity;
        let mut serial = [0u8; 16];
        proxypool_core::random::fill(&mut serial)
            .map_err(|error| format!("minting a leaf for {host}: {error}"))?;
        // A positive number of at most 16 bytes, as RFC 5280 asks.
        serial[0] &= 0x7f;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(failed)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(failed)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok((cert.der().clone(), key))
    }

    /// Mints a leaf and verifies it with the CA certificate as the only root.
    fn probe(&self) -> Result<(), String> {
        let (leaf, _) = self.mint(PROBE_HOST)?;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(self.ca_cert.clone())
            .map_err(|error| format!("the CA certificate is no trust anchor: {error}"))?;
        let verifier = WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::clone(&self.provider),
        )
        .build()
        .map_err(|error| error.to_string())?;
        let name = ServerName::try_from(PROBE_HOST).map_err(|error| error.to_string())?;
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], UnixTime::now())
            .map(|_| ())
            .map_err(|error| error.to_string())
    }
}

#[cfg(test)]
pub(crate) mod tests;

//! `dev`'s TLS inspection: the gateway's CA, made once under `DATA_DIR/ca` by the code of
//! `proxypool ca init` and reused by later runs (so a client keeps trusting it), and an
//! https origin for the `.test` names (the sim's origin behind TLS, its certificate from
//! an origin CA made at each start and written to `DATA_DIR/dev-origin-ca.pem`, the
//! bundle the gateway verifies origins by). The demo client's inspection is `allowed`:
//! its username with `-inspect` has its https requests inspected (`setup`).

use crate::failure::Failure;
use proxypool_sim::Origin;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The names the https origin's certificate always covers (every name `dev` shows); the
/// hosts of `--ban-exit` are added. No `*.test`: verifiers refuse a wildcard directly
/// under a top-level name, so each name is listed.
const ORIGIN_NAMES: [&str; 3] = ["shop-a.test", "shop-b.test", "localhost"];

/// The inspection demo's files and its https origin.
#[derive(Debug)]
pub(super) struct Demo {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub origin_ca: PathBuf,
    pub origin: Origin,
}

/// The gateway's CA (kept from an earlier run when both its files are there) and a
/// running https origin whose certificate also names `extra_names` (the banned hosts).
pub(super) async fn start(data_dir: &Path, extra_names: &[String]) -> Result<Demo, Failure> {
    let dir = data_dir.join("ca");
    let (cert, key) = (
        dir.join(crate::commands::ca::CERT_FILE),
        dir.join(crate::commands::ca::KEY_FILE),
    );
    let (ca_cert, ca_key) = if cert.is_file() && key.is_file() {
        (cert, key)
    } else {
        crate::commands::ca::write_ca(&dir, "proxypool dev inspection CA", true)?
    };
    let fail = |what: &str, e: &dyn std::fmt::Display| Failure::runtime(format!("{what}: {e}"));
    let mut params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| fail("origin CA", &e))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "proxypool dev origin CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let issuer = CertifiedIssuer::self_signed(
        params,
        KeyPair::generate().map_err(|e| fail("origin CA key", &e))?,
    )
    .map_err(|e| fail("origin CA", &e))?;
    let origin_ca = data_dir.join("dev-origin-ca.pem");
    std::fs::write(&origin_ca, issuer.pem())
        .map_err(|e| fail(&format!("writing {}", origin_ca.display()), &e))?;
    let mut names: Vec<String> = ORIGIN_NAMES.iter().map(|n| (*n).to_owned()).collect();
    for name in extra_names {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let mut params = CertificateParams::new(names).map_err(|e| fail("origin certificate", &e))?;
    params
        .distinguished_name
        .push(DnType::CommonName, "proxypool dev https origin");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(|e| fail("origin key", &e))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| fail("origin certificate", &e))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .and_then(|builder| {
        builder.with_no_client_auth().with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
    })
    .map_err(|e| fail("origin TLS", &e))?;
    let origin = Origin::start_tls(Arc::new(config))
        .await
        .map_err(|e| fail("https origin", &e))?;
    Ok(Demo {
        ca_cert,
        ca_key,
        origin_ca,
        origin,
    })
}

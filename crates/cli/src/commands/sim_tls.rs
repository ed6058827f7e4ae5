//! The certificate of `proxypool sim`'s HTTPS proxy: a private CA made at start and a
//! server certificate it signs for the listen address, `127.0.0.1` and `localhost`,
//! written as PEM files to a directory of the run, so a controller can trust the CA with
//! `[upstreams.proxy_tls] ca` and curl with `--proxy-cacert`.

use crate::failure::Failure;
use proxypool_edge::{ServerTls, ServerTlsFiles};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The HTTPS proxy's TLS configuration, and where its CA certificate was written.
pub(crate) struct SimTls {
    pub config: Arc<rustls::ServerConfig>,
    pub ca_file: PathBuf,
}

/// Makes the CA and the server certificate under `dir` (created if needed).
pub(crate) fn make(dir: &Path, listen_ip: Ipv4Addr) -> Result<SimTls, Failure> {
    let fail = |what: &str, e: &dyn std::fmt::Display| Failure::runtime(format!("{what}: {e}"));
    std::fs::create_dir_all(dir).map_err(|e| fail(&format!("creating {}", dir.display()), &e))?;
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| fail("CA parameters", &e))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "proxypool sim CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate().map_err(|e| fail("CA key", &e))?;
    let issuer =
        CertifiedIssuer::self_signed(ca_params, ca_key).map_err(|e| fail("CA certificate", &e))?;
    let mut names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
    if listen_ip != Ipv4Addr::LOCALHOST {
        names.push(listen_ip.to_string());
    }
    let mut params = CertificateParams::new(names).map_err(|e| fail("proxy parameters", &e))?;
    params
        .distinguished_name
        .push(DnType::CommonName, "proxypool sim https proxy");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(|e| fail("proxy key", &e))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| fail("proxy certificate", &e))?;
    let ca_file = dir.join("sim-ca.pem");
    let files = ServerTlsFiles {
        cert: dir.join("sim-proxy.pem"),
        key: dir.join("sim-proxy.key"),
        client_ca: None,
    };
    for (path, text) in [
        (&ca_file, issuer.pem()),
        (&files.cert, cert.pem()),
        (&files.key, key.serialize_pem()),
    ] {
        std::fs::write(path, text).map_err(|e| fail(&format!("writing {}", path.display()), &e))?;
    }
    let tls = ServerTls::load(files).map_err(|e| fail("the proxy's TLS", &e))?;
    Ok(SimTls {
        config: tls.current(),
        ca_file,
    })
}

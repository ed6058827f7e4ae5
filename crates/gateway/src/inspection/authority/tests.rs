//! The authority's own tests: loading a CA, what a leaf says, one mint per host under
//! concurrency, the cache's bound, and a key that does not belong to the certificate.

use super::*;
use proxypool_config::Millis;
use std::path::Path;

/// A CA written to a fresh directory: its certificate and key files.
pub(crate) struct TestCa {
    pub dir: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub cert_der: CertificateDer<'static>,
}

pub(crate) fn write_ca(name: &str) -> TestCa {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "proxypool-authority-{}-{n}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).unwrap();
    let ca = TestCa {
        cert: dir.join("ca.pem"),
        key: dir.join("ca-key.pem"),
        cert_der: cert.der().clone(),
        dir,
    };
    std::fs::write(&ca.cert, cert.pem()).unwrap();
    std::fs::write(&ca.key, key.serialize_pem()).unwrap();
    ca
}

pub(crate) fn config_of(cert: &Path, key: &Path, leaf_cache: usize) -> InspectionConfig {
    InspectionConfig {
        ca_cert: cert.to_owned(),
        ca_key: key.to_owned(),
        origin_ca: None,
        bypass: Vec::new(),
        leaf_cache,
        leaf_validity: Millis::from_secs(24 * 3600),
    }
}

fn verify(ca: &TestCa, leaf: &CertificateDer<'static>, host: &str) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert_der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .unwrap();
    let name = ServerName::try_from(host.to_owned()).unwrap();
    verifier
        .verify_server_cert(leaf, &[], &name, &[], UnixTime::now())
        .map(|_| ())
        .map_err(|error| error.to_string())
}

#[test]
fn a_leaf_names_its_host_only_and_chains_to_the_ca() {
    let ca = write_ca("leaf-ca");
    let authority = Authority::load(&config_of(&ca.cert, &ca.key, 8)).unwrap();
    let (leaf, _) = authority.mint("shop-a.test").unwrap();
    verify(&ca, &leaf, "shop-a.test").unwrap();
    let other = verify(&ca, &leaf, "shop-b.test").unwrap_err();
    assert!(other.contains("not valid for name"), "{other}");
    // A numeric target gets an IP SAN.
    let (leaf, _) = authority.mint("192.0.2.7").unwrap();
    verify(&ca, &leaf, "192.0.2.7").unwrap();
    // Another CA's leaf does not verify under this one.
    let stranger = write_ca("stranger-ca");
    let theirs = Authority::load(&config_of(&stranger.cert, &stranger.key, 8)).unwrap();
    let (leaf, _) = theirs.mint("shop-a.test").unwrap();
    assert!(verify(&ca, &leaf, "shop-a.test").is_err());
}

#[test]
fn two_leaves_for_one_host_have_distinct_keys_and_serials() {
    let ca = write_ca("serial-ca");
    let authority = Authority::load(&config_of(&ca.cert, &ca.key, 8)).unwrap();
    let (first, first_key) = authority.mint("shop-a.test").unwrap();
    let (second, second_key) = authority.mint("shop-a.test").unwrap();
    assert_ne!(first, second);
    assert_ne!(first_key.secret_der(), second_key.secret_der());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_for_one_host_mint_once() {
    let ca = write_ca("concurrent-ca");
    let authority = Arc::new(Authority::load(&config_of(&ca.cert, &ca.key, 8)).unwrap());
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let authority = Arc::clone(&authority);
            tokio::spawn(async move { authority.server_config("shop-a.test").await.unwrap() })
        })
        .collect();
    let mut configs = Vec::new();
    for task in tasks {
        configs.push(task.await.unwrap());
    }
    assert!(configs.iter().all(|c| Arc::ptr_eq(c, &configs[0])));
    let other = authority.server_config("shop-b.test").await.unwrap();
    assert!(!Arc::ptr_eq(&other, &configs[0]));
}

#[tokio::test]
async fn the_cache_keeps_at_most_its_bound() {
    let ca = write_ca("bound-ca");
    let authority = Authority::load(&config_of(&ca.cert, &ca.key, 2)).unwrap();
    let a = authority.server_config("a.test").await.unwrap();
    let _b = authority.server_config("b.test").await.unwrap();
    let _c = authority.server_config("c.test").await.unwrap();
    assert_eq!(authority.leaves.len(), 2);
    // a was the least recently used: pushed out, minted again.
    let again = authority.server_config("a.test").await.unwrap();
    assert!(!Arc::ptr_eq(&a, &again));
    assert_eq!(authority.leaves.len(), 2);
}

#[test]
fn a_key_of_another_ca_or_no_key_is_refused_by_name_without_its_content() {
    let ca = write_ca("mismatch-ca");
    let other = write_ca("mismatch-other");
    let error = Authority::load(&config_of(&ca.cert, &other.key, 8)).unwrap_err();
    assert!(error.contains("does not issue leaves"), "{error}");
    let key_text = std::fs::read_to_string(&other.key).unwrap();
    let body = key_text.lines().nth(1).unwrap();
    assert!(!error.contains(body), "{error}");
    // A certificate where the key should be.
    let error = Authority::load(&config_of(&ca.cert, &ca.cert, 8)).unwrap_err();
    assert!(error.starts_with("inspection.ca_key"), "{error}");
    let error = Authority::load(&config_of(&ca.dir.join("none.pem"), &ca.key, 8)).unwrap_err();
    assert!(
        error.starts_with("inspection.ca_cert: cannot read"),
        "{error}"
    );
}

#[test]
fn debug_names_the_ca_file_never_the_key() {
    let ca = write_ca("debug-ca");
    let authority = Authority::load(&config_of(&ca.cert, &ca.key, 8)).unwrap();
    let shown = format!("{authority:?}");
    assert!(shown.contains("ca.pem"), "{shown}");
    let key_text = std::fs::read_to_string(&ca.key).unwrap();
    for line in key_text.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!shown.contains(line), "{shown}");
    }
    assert!(!shown.contains("PRIVATE"), "{shown}");
}

#[test]
fn a_reload_with_the_same_files_keeps_the_authority() {
    let ca = write_ca("same-ca");
    let config = config_of(&ca.cert, &ca.key, 8);
    let first = Authority::load(&config).unwrap();
    assert!(first.same_as(&Authority::load(&config).unwrap()));
    let other = write_ca("same-other");
    assert!(!first.same_as(&Authority::load(&config_of(&other.cert, &other.key, 8)).unwrap()));
    assert!(!first.same_as(&Authority::load(&config_of(&ca.cert, &ca.key, 9)).unwrap()));
}

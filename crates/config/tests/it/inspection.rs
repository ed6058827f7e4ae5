//! `[gateway.inspection]`: a table that loads (paths anchored at the file, bypass names in
//! canonical form, defaults), and each wrong input refused with a message naming its key.

use crate::load::problems;
use proxypool_config::{Config, ConfigError, Env, Role};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

const GATEWAY_EXAMPLE: &str = include_str!("../../../../examples/gateway.toml");

const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
const EC_KEY: &str = "-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n";

/// A directory with a CA certificate, its key, an EC key and an origin bundle.
fn files() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "proxypool-config-inspection-{}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(dir.join("ca")).unwrap();
    std::fs::write(dir.join("ca/ca.pem"), CERT).unwrap();
    std::fs::write(dir.join("ca/ca-key.pem"), KEY).unwrap();
    std::fs::write(dir.join("ca/ec-key.pem"), EC_KEY).unwrap();
    std::fs::write(dir.join("ca/origins.pem"), CERT).unwrap();
    dir
}

fn load(table: &str, dir: &std::path::Path) -> Result<Config, ConfigError> {
    let text = format!("{GATEWAY_EXAMPLE}\n[gateway.inspection]\n{table}");
    let env = Env::from_pairs([("PROXYPOOL_WORKER_TOKEN", "worker-token-value")]);
    Config::from_toml_str(&text, "gateway.toml", dir, Role::Gateway, &env)
}

#[test]
fn a_table_loads_with_anchored_paths_canonical_bypass_names_and_defaults() {
    let dir = files();
    let config = load(
        "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca-key.pem\"\norigin_ca = \"ca/origins.pem\"\nbypass = [\"Bank.Example.\", \"10.0.0.1\"]\n",
        &dir,
    )
    .unwrap();
    let inspection = config.gateway.unwrap().inspection.unwrap();
    assert_eq!(inspection.ca_cert, dir.join("ca/ca.pem"));
    assert_eq!(inspection.ca_key, dir.join("ca/ca-key.pem"));
    assert_eq!(inspection.origin_ca, Some(dir.join("ca/origins.pem")));
    assert_eq!(inspection.bypass, ["bank.example", "10.0.0.1"]);
    assert!(inspection.bypassed("www.bank.example"));
    assert_eq!(inspection.leaf_cache, 1024);
    assert_eq!(inspection.leaf_validity.as_ms(), 24 * 3_600_000);
}

#[test]
fn each_wrong_input_names_its_key() {
    let dir = files();
    for (table, key, words) in [
        (
            "ca_key = \"ca/ca-key.pem\"\n",
            "gateway.inspection",
            "ca_cert",
        ),
        (
            "ca_cert = \"ca/missing.pem\"\nca_key = \"ca/ca-key.pem\"\n",
            "gateway.inspection.ca_cert",
            "missing.pem",
        ),
        (
            "ca_cert = \"ca/ca-key.pem\"\nca_key = \"ca/ca-key.pem\"\n",
            "gateway.inspection.ca_cert",
            "certificate",
        ),
        (
            "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca.pem\"\n",
            "gateway.inspection.ca_key",
            "PKCS#8 private key",
        ),
        (
            "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ec-key.pem\"\n",
            "gateway.inspection.ca_key",
            "openssl pkcs8",
        ),
        (
            "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca-key.pem\"\norigin_ca = \"ca/none.pem\"\n",
            "gateway.inspection.origin_ca",
            "none.pem",
        ),
        (
            "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca-key.pem\"\nbypass = [\"ok.example\", \"*.bank.example\"]\n",
            "gateway.inspection.bypass[1]",
            "without '*.'",
        ),
        (
            "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca-key.pem\"\nbypass = [\"bad name\"]\n",
            "gateway.inspection.bypass[0]",
            "host name",
        ),
        (
            "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca-key.pem\"\nleaf_cache = 0\n",
            "gateway.inspection.leaf_cache",
            "from 1 to 1000000",
        ),
        (
            "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca-key.pem\"\nleaf_cache = 1000001\n",
            "gateway.inspection.leaf_cache",
            "from 1 to 1000000",
        ),
        (
            "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca-key.pem\"\nleaf_validity = \"10m\"\n",
            "gateway.inspection.leaf_validity",
            "between 1h",
        ),
    ] {
        let result = load(table, &dir);
        let text = format!("{result:?}");
        match result {
            Err(ConfigError::Invalid { .. }) => {
                let found = problems(load(table, &dir));
                assert!(
                    found
                        .iter()
                        .any(|(path, message)| path == key && message.contains(words)),
                    "{table}: {found:?}"
                );
            }
            // A missing required key is a parse error naming the key.
            Err(error) => assert!(error.to_string().contains(words), "{table}: {error}"),
            Ok(_) => panic!("{table} loaded: {text}"),
        }
    }
}

//! A client's TLS settings: inspection of its tunnels and the certificate names that
//! authenticate as it, loaded in every form and refused by key when wrong.

use proxypool_config::{Config, ConfigError, Env, Role};
use proxypool_core::control::Inspection;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

const EXAMPLE: &str = include_str!("../../../../examples/proxypool.toml");
const INSPECTION_LINE: &str = "# inspection = \"allowed\"   ";
const TLS_NAMES_LINE: &str = "# tls_names = [\"scraper-1.clients.example\"]   ";

fn env() -> Env {
    Env::from_pairs(vec![
        ("PROXYPOOL_WORKER_TOKEN", "worker-token-value"),
        ("ACME_PROXY_PASSWORD", "acme-secret-pw"),
        ("SCRAPER_API_TOKEN", "scraper-api-token"),
        ("SCRAPER_GATEWAY_PASSWORD", "scraper-gateway-password"),
    ])
}

fn load(text: &str) -> Result<Config, ConfigError> {
    // One directory per call: tests run in parallel and must not see a half-written file.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "proxypool-config-client-tls-{}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(dir.join("secrets")).unwrap();
    std::fs::write(dir.join("secrets/dc-password"), "dc-secret-pw\n").unwrap();
    Config::from_toml_str(text, "proxypool.toml", Path::new(&dir), Role::Serve, &env())
}

/// The example with its first client's commented line `from` replaced by `line`.
fn with(from: &str, line: &str) -> String {
    assert!(EXAMPLE.contains(from), "the example documents {from:?}");
    EXAMPLE.replacen(from, &format!("{line}   "), 1)
}

/// The example with a second gateway client after the first, carrying `extra` lines.
fn with_second_client(first: &str, extra: &str) -> String {
    let text = with(TLS_NAMES_LINE, first);
    let marker = "\n# Durable fixed-window quotas";
    assert!(text.contains(marker));
    text.replacen(
        marker,
        &format!(
            "\n[[clients]]\nid = \"second\"\nproject = \"other\"\n\
             gateway_password = {{ env = \"SCRAPER_GATEWAY_PASSWORD\" }}\n{extra}\n{marker}"
        ),
        1,
    )
}

#[test]
fn inspection_is_off_unless_asked_and_loads_in_each_form() {
    let config = load(EXAMPLE).unwrap();
    assert_eq!(config.clients[0].inspection, Inspection::Off);
    assert!(config.clients[0].tls_names.is_empty());
    for (value, expected) in [
        ("\"off\"", Inspection::Off),
        ("\"on\"", Inspection::On),
        ("\"allowed\"", Inspection::Allowed),
    ] {
        let text = with(INSPECTION_LINE, &format!("inspection = {value}"));
        let config = load(&text).unwrap_or_else(|e| panic!("{value}: {e}"));
        assert_eq!(config.clients[0].inspection, expected, "{value}");
    }
}

#[test]
fn a_bad_inspection_value_is_refused_by_name() {
    for value in ["\"sometimes\"", "true", "1"] {
        let text = with(INSPECTION_LINE, &format!("inspection = {value}"));
        let message = load(&text).unwrap_err().to_string();
        assert!(message.contains("inspection"), "{value}: {message}");
    }
}

#[test]
fn certificate_names_are_canonical_and_belong_to_one_client() {
    let text = with(
        TLS_NAMES_LINE,
        "tls_names = [\"Scraper-1.Clients.Example.\"]",
    );
    let config = load(&text).unwrap();
    assert_eq!(config.clients[0].tls_names, ["scraper-1.clients.example"]);

    // The same name (in another spelling) on a second client: refused, naming the key.
    let text = with_second_client(
        "tls_names = [\"scraper-1.clients.example\"]",
        "tls_names = [\"SCRAPER-1.clients.example\"]",
    );
    let err = load(&text).unwrap_err();
    let problem = err
        .problems()
        .iter()
        .find(|p| p.path.ends_with(".tls_names[0]") && p.path != "clients[0].tls_names[0]")
        .unwrap_or_else(|| panic!("{err}"));
    assert!(problem.message.contains("another client"), "{err}");

    for bad in ["\"\"", "\"two words\"", &format!("\"{}\"", "a".repeat(254))] {
        let text = with(TLS_NAMES_LINE, &format!("tls_names = [{bad}]"));
        let err = load(&text).unwrap_err();
        assert!(
            err.problems()
                .iter()
                .any(|p| p.path == "clients[0].tls_names[0]"),
            "{bad}: {err}"
        );
    }
}

//! `[gateway.fleet]`: the table the shipped example shows commented out loads once
//! uncommented, `advertise` defaults to a specific `listen`, and each wrong input is refused
//! with a message naming its key.

use crate::load::problems;
use proxypool_config::{Config, ConfigError, Env, Role};
use std::path::Path;

const GATEWAY_EXAMPLE: &str = include_str!("../../../../examples/gateway.toml");

fn load(table: &str) -> Result<Config, ConfigError> {
    let text = format!("{GATEWAY_EXAMPLE}\n[gateway.fleet]\n{table}");
    let env = Env::from_pairs([("PROXYPOOL_WORKER_TOKEN", "worker-token-value")]);
    Config::from_toml_str(&text, "gateway.toml", Path::new("."), Role::Gateway, &env)
}

/// The example's commented `[gateway.fleet]` block, uncommented.
fn example_block() -> String {
    let start = GATEWAY_EXAMPLE
        .find("# [gateway.fleet]")
        .expect("the example documents [gateway.fleet]");
    let mut out = String::new();
    for line in GATEWAY_EXAMPLE[start..].lines().skip(1) {
        if line.trim().is_empty() {
            break;
        }
        if let Some(setting) = line.strip_prefix("# ") {
            out.push_str(setting);
            out.push('\n');
        }
    }
    out
}

#[test]
fn the_examples_table_loads_once_uncommented() {
    let block = example_block();
    assert!(block.contains("listen"), "{block}");
    let fleet = load(&block).unwrap().gateway.unwrap().fleet.unwrap();
    assert_eq!(fleet.listen, "0.0.0.0:9443".parse().unwrap());
    assert_eq!(fleet.advertise, "gw-1.internal:9443");
    assert_eq!(fleet.connect_timeout.as_ms(), 1_000);
    assert_eq!(fleet.hop_timeout.as_ms(), 3_000);
    assert_eq!(fleet.unreachable_for.as_ms(), 10_000);
    assert_eq!(fleet.max_connections, 4096);
    assert_eq!(fleet.idle_timeout.as_ms(), 60_000);
}

#[test]
fn without_the_table_there_is_no_fleet_and_advertise_defaults_to_a_specific_listen() {
    let env = Env::from_pairs([("PROXYPOOL_WORKER_TOKEN", "worker-token-value")]);
    let config = Config::from_toml_str(
        GATEWAY_EXAMPLE,
        "gateway.toml",
        Path::new("."),
        Role::Gateway,
        &env,
    )
    .unwrap();
    assert_eq!(config.gateway.unwrap().fleet, None);

    let fleet = load("listen = \"10.0.0.7:9443\"\nhop_timeout = \"500ms\"\n")
        .unwrap()
        .gateway
        .unwrap()
        .fleet
        .unwrap();
    assert_eq!(fleet.advertise, "10.0.0.7:9443");
    assert_eq!(fleet.hop_timeout.as_ms(), 500);
    let fleet = load("listen = \"[fd00::7]:9443\"\n")
        .unwrap()
        .gateway
        .unwrap()
        .fleet
        .unwrap();
    assert_eq!(fleet.advertise, "[fd00::7]:9443");
}

#[test]
fn each_wrong_input_names_its_key() {
    for (table, key, words) in [
        (
            "listen = \"0.0.0.0:9443\"\n",
            "gateway.fleet.advertise",
            "is required when listen is 0.0.0.0:9443",
        ),
        (
            "listen = \"[::]:9443\"\n",
            "gateway.fleet.advertise",
            "is required when listen is [::]:9443",
        ),
        (
            "listen = \"0.0.0.0:9443\"\nadvertise = \"gw-1.internal\"\n",
            "gateway.fleet.advertise",
            "port is missing",
        ),
        (
            "listen = \"0.0.0.0:9443\"\nadvertise = \"0.0.0.0:9443\"\n",
            "gateway.fleet.advertise",
            "cannot be dialed",
        ),
        (
            "listen = \"0.0.0.0:9443\"\nadvertise = \"gw 1:9443\"\n",
            "gateway.fleet.advertise",
            "neither a DNS name nor an IP address",
        ),
        (
            "listen = \"127.0.0.1:9443\"\nconnect_timeout = \"0s\"\n",
            "gateway.fleet.connect_timeout",
            "between",
        ),
        (
            "listen = \"127.0.0.1:9443\"\nhop_timeout = \"10m\"\n",
            "gateway.fleet.hop_timeout",
            "between",
        ),
        (
            "listen = \"127.0.0.1:9443\"\nunreachable_for = \"10ms\"\n",
            "gateway.fleet.unreachable_for",
            "between",
        ),
        (
            "listen = \"127.0.0.1:9443\"\nidle_timeout = \"2h\"\n",
            "gateway.fleet.idle_timeout",
            "between",
        ),
        (
            "listen = \"127.0.0.1:9443\"\nmax_connections = 0\n",
            "gateway.fleet.max_connections",
            "from 1 to 1000000",
        ),
    ] {
        let found = problems(load(table));
        assert!(
            found
                .iter()
                .any(|(path, message)| path == key && message.contains(words)),
            "{table}: {found:?}"
        );
    }
    // A missing listen, a listen that is no address and an unknown key are parse errors
    // naming the key.
    for (table, words) in [
        ("advertise = \"gw-1.internal:9443\"\n", "listen"),
        ("listen = \"gw-1.internal:9443\"\n", "listen"),
        (
            "listen = \"127.0.0.1:9443\"\nadvertize = \"x:1\"\n",
            "advertize",
        ),
    ] {
        let error = load(table).unwrap_err();
        assert!(error.to_string().contains(words), "{table}: {error}");
    }
}

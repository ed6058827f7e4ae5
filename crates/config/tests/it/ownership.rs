//! `[ownership]`'s share for extraction: its default by the process that loads the file
//! (half under `serve`, unless `per_worker_target` is set; nothing for a split
//! controller), how it combines with `per_worker_target`, and the values it refuses.

use proxypool_config::tuning::{DEFAULT_PER_WORKER_TARGET, IN_PROCESS_EXTRACTION_SHARE};
use proxypool_config::{Config, ConfigError, Env, ReloadPlan, Role};
use std::path::Path;

const GATEWAY: &str = "[gateway]\n[gateway.listeners]\nhttp = \"127.0.0.1:0\"\n";

fn load(
    ownership: &str,
    gateway: bool,
    role: Role,
    env: &[(&str, &str)],
) -> Result<Config, ConfigError> {
    let mut text = format!("[ownership]\ninterval = \"500ms\"\n{ownership}\n");
    if gateway {
        text.push_str(GATEWAY);
    }
    Config::from_toml_str(
        &text,
        "proxypool.toml",
        Path::new("."),
        role,
        &Env::from_pairs(env.iter().copied()),
    )
}

fn share(config: &Config) -> (Option<f64>, usize) {
    (
        config.ownership.extraction_share,
        config.ownership.worker_target(),
    )
}

#[test]
fn serve_keeps_half_for_extraction_unless_the_file_says_otherwise() {
    let half = Some(IN_PROCESS_EXTRACTION_SHARE);
    assert_eq!(IN_PROCESS_EXTRACTION_SHARE, 0.5);
    let serve = load("", true, Role::Serve, &[]).unwrap();
    assert_eq!(share(&serve), (half, DEFAULT_PER_WORKER_TARGET));
    assert_eq!(serve.ownership.share_for_extraction(), 0.5);
    // check-config reads a file with a [gateway] beside the controller as serve does.
    assert_eq!(
        share(&load("", true, Role::Check, &[]).unwrap()),
        (half, 500)
    );

    // An explicit per_worker_target decides alone, as before the share existed.
    let explicit = load("per_worker_target = 3", true, Role::Serve, &[]).unwrap();
    assert_eq!(share(&explicit), (None, 3));
    assert_eq!(explicit.ownership.share_for_extraction(), 0.0);
    // Both set: both hold.
    let both = load(
        "per_worker_target = 40\nextraction_share = 0.25",
        true,
        Role::Serve,
        &[],
    )
    .unwrap();
    assert_eq!(share(&both), (Some(0.25), 40));
    // Whole numbers are fractions too.
    let none = load("extraction_share = 0", true, Role::Serve, &[]).unwrap();
    assert_eq!(share(&none), (Some(0.0), 500));
    let all = load("extraction_share = 1", true, Role::Serve, &[]).unwrap();
    assert_eq!(share(&all), (Some(1.0), 500));
    // From the environment, like any key.
    let env = [("PROXYPOOL__OWNERSHIP__EXTRACTION_SHARE", "0.75")];
    let overridden = load("", true, Role::Serve, &env).unwrap();
    assert_eq!(share(&overridden), (Some(0.75), 500));
}

#[test]
fn a_split_controller_leases_as_before_unless_the_share_is_set() {
    let controller = load("", false, Role::Controller, &[]).unwrap();
    assert_eq!(share(&controller), (None, 500));
    assert_eq!(controller.ownership.share_for_extraction(), 0.0);
    let checked = load("", false, Role::Check, &[]).unwrap();
    assert_eq!(share(&checked), (None, 500));
    let set = load("extraction_share = 0.3", false, Role::Controller, &[]).unwrap();
    assert_eq!(share(&set), (Some(0.3), 500));
}

#[test]
fn the_resolved_share_reloads_as_no_change_and_its_edits_apply_live() {
    let running = load("", true, Role::Serve, &[]).unwrap();
    let again = load("", true, Role::Serve, &[]).unwrap();
    assert!(ReloadPlan::between(&running, &again).is_empty());
    let edited = load("extraction_share = 0.2", true, Role::Serve, &[]).unwrap();
    let plan = ReloadPlan::between(&running, &edited);
    assert_eq!(plan.live, vec!["ownership.extraction_share".to_owned()]);
    assert!(plan.restart.is_empty());
    // --effective prints the share in force.
    assert!(
        running
            .effective_toml()
            .unwrap()
            .contains("extraction_share = 0.5")
    );
}

#[test]
fn a_share_outside_zero_to_one_or_a_zero_target_is_refused_by_key() {
    for (ownership, key) in [
        ("extraction_share = -0.1", "ownership.extraction_share"),
        ("extraction_share = 1.5", "ownership.extraction_share"),
        ("extraction_share = nan", "ownership.extraction_share"),
        ("extraction_share = inf", "ownership.extraction_share"),
        ("extraction_share = \"half\"", "ownership.extraction_share"),
        ("per_worker_target = 0", "ownership.per_worker_target"),
    ] {
        for (gateway, role) in [(true, Role::Serve), (false, Role::Controller)] {
            let err = load(ownership, gateway, role, &[]).unwrap_err();
            assert_eq!(err.problems()[0].path, key, "{ownership}: {err}");
        }
    }
    let err = load("extraction_share = 2", true, Role::Serve, &[]).unwrap_err();
    assert!(err.to_string().contains("from 0"), "{err}");
}

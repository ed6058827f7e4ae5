//! The check of a whole loaded file for one [`Role`]: which sections that role needs, in
//! which order they are checked (so one load reports every problem, in file order), and
//! the few rules that span sections: clients name configured upstreams and policies, and a
//! shared store needs `ownership.renew_before` to cover a leader failover
//! ([`crate::timing`]). Each section's own checks live beside its types.

use crate::check::Check;
use crate::model::Config;
use crate::role::Role;
use crate::store::StoreKind;
use crate::{api, client, control, gateway, limiter, quota, store, tuning, upstream};

/// Validates `config` in place for `role`, resolving the secrets that role uses.
pub(crate) fn validate(c: &mut Check<'_>, config: &mut Config, role: Role) {
    let (controller, gateway, remote_gateway) = match role {
        Role::Controller => (true, false, false),
        Role::Serve => (true, true, false),
        Role::Gateway => (false, true, true),
        Role::Check => {
            let controller = config.has_controller();
            (controller, config.gateway.is_some(), !controller)
        }
    };
    if controller {
        store::validate(c, &mut config.store);
        quota::validate(c, &mut config.quota);
        tuning::validate_cooldowns(c, &config.cooldowns);
        tuning::validate_snapshot(c, &config.snapshot);
        let failover = match config.store.kind {
            StoreKind::Memory => None,
            _ => crate::timing::failover_problem(config),
        };
        // A gateway in the controller's process: `serve`, or a file checked as `serve`
        // reads it.
        tuning::resolve_extraction_share(&mut config.ownership, gateway && !remote_gateway);
        tuning::validate_ownership(c, &config.ownership, failover);
        tuning::validate_checker(c, &config.checker);
        tuning::validate_maintenance(c, &config.maintenance);
        control::validate_worker_tokens(c, &mut config.worker_tokens);
        let policy_ids = limiter::validate_policies(c, &config.policies);
        let upstream_ids =
            upstream::validate_upstreams(c, &mut config.upstreams, config.checker.timeout);
        client::validate_clients(c, &mut config.clients, &upstream_ids, &policy_ids);
        api::validate(c, &mut config.api);
        control::validate(c, &mut config.control);
    }
    if gateway {
        match &mut config.gateway {
            Some(section) => gateway::section::validate(c, section, remote_gateway),
            None => c.at(
                "gateway",
                "missing: add a [gateway] table with at least listeners.http or listeners.socks5",
            ),
        }
    }
}

//! Cooldowns as the scripts hold them (`cooldowns`: per proxy, one line per (scope,
//! domain), `domain \t until \t strikes \t forget_at \t project`, the project empty for a
//! shared entry; a line of the first four fields only, as written before scopes existed,
//! is shared; the Lua constants `C_DOMAIN`, ... are generated from the layout below), the
//! argument tuple of a change, and session feedback (JSON: Lua only stores it and hands it
//! back).
//!
//! Times are clamped to [`MAX_MS`](super::MAX_MS), the range Lua numbers hold exactly:
//! a cooldown anyone asks for ends within a day, so only nonsense values are cut.

use super::layout::tab_layout;
use super::{clamp_ms, corrupt, parse_u64};
use proxypool_core::{
    CooldownChange, Domain, DomainCooldown, PoolResult, ProjectId, ProxyId, SessionFeedback,
};

tab_layout! {
    count C_FIELDS;
    DOMAIN => C_DOMAIN,
    UNTIL => C_UNTIL,
    STRIKES => C_STRIKES,
    FORGET_AT => C_FORGET,
    PROJECT => C_PROJECT,
}

/// The seven script arguments of one change (see `cooldowns_apply.lua`).
pub(crate) fn change_args(change: &CooldownChange, out: &mut Vec<String>) {
    match change {
        CooldownChange::Set(entry) => out.extend([
            entry.proxy_id.to_string(),
            "s".to_owned(),
            entry.domain.to_string(),
            clamp_ms(entry.until_ms).to_string(),
            entry.strikes.to_string(),
            clamp_ms(entry.forget_at_ms).to_string(),
            scope_arg(entry.project.as_ref()),
        ]),
        CooldownChange::Clear {
            proxy_id,
            domain,
            project,
        } => out.extend([
            proxy_id.to_string(),
            "c".to_owned(),
            domain.to_string(),
            String::new(),
            String::new(),
            String::new(),
            scope_arg(project.as_ref()),
        ]),
    }
}

/// A scope as the scripts hold it: the project, or empty for shared.
fn scope_arg(project: Option<&ProjectId>) -> String {
    project.map(ProjectId::to_string).unwrap_or_default()
}

/// One stored line of proxy `id`.
pub(crate) fn decode(id: &str, line: &str) -> PoolResult<DomainCooldown> {
    let what = "cooldown";
    let f: Vec<&str> = line.split('\t').collect();
    // Four fields: a shared entry stored before scopes existed.
    if f.len() != FIELDS && f.len() != PROJECT {
        return Err(corrupt(what));
    }
    let project = match f.get(PROJECT) {
        None | Some(&"") => None,
        Some(raw) => Some(ProjectId::new(raw).map_err(|_| corrupt(what))?),
    };
    Ok(DomainCooldown {
        proxy_id: ProxyId::new(id).map_err(|_| corrupt(what))?,
        domain: Domain::new(f[DOMAIN]).map_err(|_| corrupt(what))?,
        project,
        until_ms: parse_u64(f[UNTIL], what)?,
        strikes: u32::try_from(parse_u64(f[STRIKES], what)?).map_err(|_| corrupt(what))?,
        forget_at_ms: parse_u64(f[FORGET_AT], what)?,
    })
}

pub(crate) fn feedback_json(feedback: &SessionFeedback) -> String {
    serde_json::to_string(feedback).unwrap_or_default()
}

pub(crate) fn decode_feedback(value: &str) -> PoolResult<SessionFeedback> {
    serde_json::from_str(value).map_err(|_| corrupt("session feedback"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_round_trips_through_the_stored_line() {
        let mut entry = DomainCooldown {
            proxy_id: ProxyId::new("0123456789abcdef0123456789abcdef").unwrap(),
            domain: Domain::new("example.com").unwrap(),
            project: None,
            until_ms: 1_700_000_001_000,
            strikes: 3,
            forget_at_ms: 1_700_000_009_000,
        };
        for project in [None, Some(ProjectId::new("acme").unwrap())] {
            entry.project = project;
            let mut args = Vec::new();
            change_args(&CooldownChange::Set(entry.clone()), &mut args);
            assert_eq!(args.len(), 7);
            let line = args[2..].join("\t");
            assert_eq!(decode(&args[0], &line).unwrap(), entry);
        }
        // A line stored before scopes existed is shared.
        entry.project = None;
        let old = "example.com\t1700000001000\t3\t1700000009000";
        assert_eq!(decode(&args_id(), old).unwrap(), entry);
        assert!(decode(&args_id(), "example.com\t1\t2").is_err());
        assert!(decode(&args_id(), "example.com\t1\t2\t3\tBad Project").is_err());
    }

    fn args_id() -> String {
        "0123456789abcdef0123456789abcdef".to_owned()
    }
}

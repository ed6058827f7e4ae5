//! The Lua code of the adapter: one Redis function library holding every port operation.
//!
//! The library is one Lua chunk, put together in a fixed order: the field constants of the
//! stored layouts, generated from the Rust codecs (`codec::layout`), so both sides read one
//! list, and likewise the limits core sets for every store (`CONSTANTS`); then the helpers
//! under `src/lua/lib/`, one file per concern, in the order they build on each other (each
//! file's header says what it owns and keeps); then each operation under `src/lua/` as one
//! entry point (`redis.register_function`). The helpers are defined once, when the library
//! is loaded, not on every call. Calls are `FCALL`; the library is loaded on
//! the first call that finds its function missing (first use, a restarted Redis without
//! persistence, a failover to a replica that never saw the load, `FUNCTION FLUSH`), like
//! NOSCRIPT handling for EVALSHA.
//!
//! The library and function names carry a digest of the library's source: function names
//! are global to a Redis server, so two proxypool versions on one Redis each call their own
//! code, and deployments with different key prefixes (the prefix is an argument, KEYS[1])
//! share one library safely because it is the same source. An old version's library stays
//! loaded until an operator removes it (`FUNCTION DELETE`); it costs a few kilobytes.
//! Functions are persisted and replicated by Redis like data. The Redis user needs
//! `FUNCTION LOAD` and `FCALL` (both in `@scripting`). The entry points declare no flags,
//! so Redis treats each as a possible write: with `maxmemory` reached under a no-eviction
//! policy every call is refused (`Unavailable`), reads included.

use crate::codec::layout::Layout;
use crate::codec::{assignment, cooldown, extraction, record, session};
use redis::Script;
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::Arc;

/// Layouts whose Lua field constants are generated, in front of every helper.
const LAYOUTS: [&Layout; 5] = [
    &record::LAYOUT,
    &assignment::LAYOUT,
    &session::LAYOUT,
    &cooldown::LAYOUT,
    &extraction::LAYOUT,
];

/// Limits of core's that the scripts enforce too, generated in front of every helper as
/// `local NAME = value`, so the Lua side cannot drift from the Rust constant.
const CONSTANTS: [(&str, usize); 1] =
    [("SNAPSHOT_JOURNAL_CAP", proxypool_core::SNAPSHOT_JOURNAL_CAP)];

/// Helpers, in the order they build on each other: a file may use the `local`s of the files
/// before it (Lua scoping), and every `P.` function of any file at call time.
const HELPERS: [&str; 17] = [
    include_str!("lua/lib/call.lua"),
    include_str!("lua/lib/util.lua"),
    include_str!("lua/lib/mark.lua"),
    include_str!("lua/lib/ids.lua"),
    include_str!("lua/lib/codec.lua"),
    include_str!("lua/lib/ttl.lua"),
    include_str!("lua/lib/counters.lua"),
    include_str!("lua/lib/candidates.lua"),
    include_str!("lua/lib/records.lua"),
    include_str!("lua/lib/assignments.lua"),
    include_str!("lua/lib/fencing.lua"),
    include_str!("lua/lib/runner.lua"),
    include_str!("lua/lib/cooldowns.lua"),
    include_str!("lua/lib/owned.lua"),
    include_str!("lua/lib/workers.lua"),
    include_str!("lua/lib/usage.lua"),
    include_str!("lua/lib/extraction.lua"),
];

/// (entry point, body): each body reads `KEYS`/`ARGV` and ends in `return P.run(main)`.
const ENTRIES: [(&str, &str); 55] = [
    ("upsert", include_str!("lua/upsert.lua")),
    ("health", include_str!("lua/health.lua")),
    ("due", include_str!("lua/due.lua")),
    ("extract", include_str!("lua/extract.lua")),
    ("assign", include_str!("lua/assign.lua")),
    ("renew", include_str!("lua/renew.lua")),
    ("drain", include_str!("lua/drain.lua")),
    ("ack_drain", include_str!("lua/ack_drain.lua")),
    ("expire", include_str!("lua/expire.lua")),
    ("release_orphaned", include_str!("lua/release_orphaned.lua")),
    ("get", include_str!("lua/get.lua")),
    ("assignable", include_str!("lua/assignable.lua")),
    ("owned_by", include_str!("lua/owned_by.lua")),
    ("draining_of", include_str!("lua/draining_of.lua")),
    ("session_open", include_str!("lua/session_open.lua")),
    ("session_renew", include_str!("lua/session_renew.lua")),
    ("session_close", include_str!("lua/session_close.lua")),
    ("session_get", include_str!("lua/session_get.lua")),
    ("sessions_live", include_str!("lua/sessions_live.lua")),
    ("snapshot_issue", include_str!("lua/snapshot_issue.lua")),
    ("snapshot_ack", include_str!("lua/snapshot_ack.lua")),
    ("report", include_str!("lua/report.lua")),
    ("usage_read", include_str!("lua/usage_read.lua")),
    ("runtime_get", include_str!("lua/runtime_get.lua")),
    ("inventory", include_str!("lua/inventory.lua")),
    ("proxies", include_str!("lua/proxies.lua")),
    ("sweep", include_str!("lua/sweep.lua")),
    ("footprint", include_str!("lua/footprint.lua")),
    ("lease_acquire", include_str!("lua/lease_acquire.lua")),
    ("lease_release", include_str!("lua/lease_release.lua")),
    ("lease_current", include_str!("lua/lease_current.lua")),
    ("worker_mode_set", include_str!("lua/worker_mode_set.lua")),
    ("worker_modes", include_str!("lua/worker_modes.lua")),
    (
        "provider_status_put",
        include_str!("lua/provider_status_put.lua"),
    ),
    (
        "provider_statuses",
        include_str!("lua/provider_statuses.lua"),
    ),
    ("cooldowns_apply", include_str!("lua/cooldowns_apply.lua")),
    ("cooldowns_of", include_str!("lua/cooldowns_of.lua")),
    ("feedback_add", include_str!("lua/feedback_add.lua")),
    ("feedback_list", include_str!("lua/feedback_list.lua")),
    ("may_report", include_str!("lua/may_report.lua")),
    ("ticket_key", include_str!("lua/ticket_key.lua")),
    ("return_extracted", include_str!("lua/return_extracted.lua")),
    ("holding", include_str!("lua/holding.lua")),
    ("snapshot_version", include_str!("lua/snapshot_version.lua")),
    ("snapshot_changes", include_str!("lua/snapshot_changes.lua")),
    ("mark_get", include_str!("lua/mark_get.lua")),
    ("mark_install", include_str!("lua/mark_install.lua")),
    ("mark_advance", include_str!("lua/mark_advance.lua")),
    (
        "mark_end_recovery",
        include_str!("lua/mark_end_recovery.lua"),
    ),
    ("xend", include_str!("lua/xend.lua")),
    ("xundo", include_str!("lua/xundo.lua")),
    ("lease_mirror", include_str!("lua/lease_mirror.lua")),
    ("raise", include_str!("lua/raise.lua")),
    ("known", include_str!("lua/known.lua")),
    ("groups", include_str!("lua/groups.lua")),
];

/// The library source and its digest-derived name.
#[derive(Debug)]
pub(crate) struct Library {
    /// `proxypool_<16 hex digits of SHA-256 of the library text>`.
    pub(crate) name: String,
    /// The text sent with `FUNCTION LOAD`.
    pub(crate) source: String,
}

impl Library {
    fn build() -> Library {
        // The whole text with a placeholder for the name is what the digest covers, so a
        // change to the wrapper below renames the library as surely as a change to the Lua.
        const NAME: &str = "@LIBRARY@";
        let mut body = String::from("-- Field constants, generated from src/codec (layout.rs).\n");
        for layout in LAYOUTS {
            body.push_str(&layout.lua_prelude());
        }
        for (name, value) in CONSTANTS {
            body.push_str(&format!("local {name} = {value}\n"));
        }
        for part in HELPERS {
            body.push_str(part);
            body.push('\n');
        }
        for (entry, code) in ENTRIES {
            // KEYS and ARGV as parameter names: the bodies read them as scripts do.
            body.push_str(&format!(
                "redis.register_function('{NAME}_{entry}', function(KEYS, ARGV)\nP.begin(KEYS, ARGV)\n{code}\nend)\n"
            ));
        }
        let digest = Sha256::digest(body.as_bytes());
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let name = format!("proxypool_{hex}");
        let source = format!("#!lua name={name}\n{}", body.replace(NAME, &name));
        Library { name, source }
    }

    fn function(self: &Arc<Self>, entry: &str) -> Function {
        Function {
            name: format!("{}_{entry}", self.name),
            library: Arc::clone(self),
        }
    }
}

/// One entry point of the library.
#[derive(Debug, Clone)]
pub(crate) struct Function {
    /// The global function name (`<library>_<entry>`).
    pub(crate) name: String,
    pub(crate) library: Arc<Library>,
}

/// Every entry point of the adapter, built once per pool.
pub(crate) struct Scripts {
    pub(crate) upsert: Function,
    pub(crate) health: Function,
    pub(crate) due: Function,
    pub(crate) extract: Function,
    pub(crate) assign: Function,
    pub(crate) renew: Function,
    pub(crate) drain: Function,
    pub(crate) ack_drain: Function,
    pub(crate) expire: Function,
    pub(crate) release_orphaned: Function,
    pub(crate) get: Function,
    pub(crate) assignable: Function,
    pub(crate) owned_by: Function,
    pub(crate) draining_of: Function,
    pub(crate) session_open: Function,
    pub(crate) session_renew: Function,
    pub(crate) session_close: Function,
    pub(crate) session_get: Function,
    pub(crate) sessions_live: Function,
    pub(crate) snapshot_issue: Function,
    pub(crate) snapshot_ack: Function,
    pub(crate) report: Function,
    pub(crate) usage_read: Function,
    pub(crate) runtime_get: Function,
    pub(crate) inventory: Function,
    pub(crate) proxies: Function,
    pub(crate) sweep: Function,
    pub(crate) footprint: Function,
    pub(crate) lease_acquire: Function,
    pub(crate) lease_release: Function,
    pub(crate) lease_current: Function,
    pub(crate) worker_mode_set: Function,
    pub(crate) worker_modes: Function,
    pub(crate) provider_status_put: Function,
    pub(crate) provider_statuses: Function,
    pub(crate) cooldowns_apply: Function,
    pub(crate) cooldowns_of: Function,
    pub(crate) feedback_add: Function,
    pub(crate) feedback_list: Function,
    pub(crate) may_report: Function,
    pub(crate) ticket_key: Function,
    pub(crate) return_extracted: Function,
    pub(crate) holding: Function,
    pub(crate) snapshot_version: Function,
    pub(crate) snapshot_changes: Function,
    pub(crate) mark_get: Function,
    pub(crate) mark_install: Function,
    pub(crate) mark_advance: Function,
    pub(crate) mark_end_recovery: Function,
    pub(crate) xend: Function,
    pub(crate) xundo: Function,
    pub(crate) lease_mirror: Function,
    pub(crate) raise: Function,
    pub(crate) known: Function,
    pub(crate) groups: Function,
    /// `return 1` as a plain EVALSHA script, without the library: the cheapest possible
    /// round trip (the readiness probe and the benchmark's ceiling).
    pub(crate) probe: PlainScript,
}

/// A plain script run with `EVALSHA`, its text kept for `SCRIPT LOAD` on the server (or
/// the cluster node) that does not know it.
#[derive(Debug)]
pub(crate) struct PlainScript {
    /// The SHA-1 digest `EVALSHA` names it by.
    pub(crate) sha: String,
    pub(crate) source: &'static str,
}

impl PlainScript {
    fn new(source: &'static str) -> PlainScript {
        PlainScript {
            sha: Script::new(source).get_hash().to_owned(),
            source,
        }
    }
}

impl Scripts {
    pub(crate) fn load() -> Scripts {
        let library = Arc::new(Library::build());
        Scripts {
            upsert: library.function("upsert"),
            health: library.function("health"),
            due: library.function("due"),
            extract: library.function("extract"),
            assign: library.function("assign"),
            renew: library.function("renew"),
            drain: library.function("drain"),
            ack_drain: library.function("ack_drain"),
            expire: library.function("expire"),
            release_orphaned: library.function("release_orphaned"),
            get: library.function("get"),
            assignable: library.function("assignable"),
            owned_by: library.function("owned_by"),
            draining_of: library.function("draining_of"),
            session_open: library.function("session_open"),
            session_renew: library.function("session_renew"),
            session_close: library.function("session_close"),
            session_get: library.function("session_get"),
            sessions_live: library.function("sessions_live"),
            snapshot_issue: library.function("snapshot_issue"),
            snapshot_ack: library.function("snapshot_ack"),
            report: library.function("report"),
            usage_read: library.function("usage_read"),
            runtime_get: library.function("runtime_get"),
            inventory: library.function("inventory"),
            proxies: library.function("proxies"),
            sweep: library.function("sweep"),
            footprint: library.function("footprint"),
            lease_acquire: library.function("lease_acquire"),
            lease_release: library.function("lease_release"),
            lease_current: library.function("lease_current"),
            worker_mode_set: library.function("worker_mode_set"),
            worker_modes: library.function("worker_modes"),
            provider_status_put: library.function("provider_status_put"),
            provider_statuses: library.function("provider_statuses"),
            cooldowns_apply: library.function("cooldowns_apply"),
            cooldowns_of: library.function("cooldowns_of"),
            feedback_add: library.function("feedback_add"),
            feedback_list: library.function("feedback_list"),
            may_report: library.function("may_report"),
            ticket_key: library.function("ticket_key"),
            return_extracted: library.function("return_extracted"),
            holding: library.function("holding"),
            snapshot_version: library.function("snapshot_version"),
            snapshot_changes: library.function("snapshot_changes"),
            mark_get: library.function("mark_get"),
            mark_install: library.function("mark_install"),
            mark_advance: library.function("mark_advance"),
            mark_end_recovery: library.function("mark_end_recovery"),
            xend: library.function("xend"),
            xundo: library.function("xundo"),
            lease_mirror: library.function("lease_mirror"),
            raise: library.function("raise"),
            known: library.function("known"),
            groups: library.function("groups"),
            probe: PlainScript::new(include_str!("lua/probe.lua")),
        }
    }
}

impl fmt::Debug for Scripts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Scripts(library {}, {} functions)",
            self.extract.library.name,
            ENTRIES.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_source_digest() {
        let scripts = Scripts::load();
        let name = &scripts.extract.library.name;
        assert!(name.starts_with("proxypool_") && name.len() == "proxypool_".len() + 16);
        assert_eq!(scripts.extract.name, format!("{name}_extract"));
        assert!(
            scripts
                .extract
                .library
                .source
                .starts_with(&format!("#!lua name={name}\n"))
        );
        // Deterministic: every pool of one build calls the same functions.
        assert_eq!(Scripts::load().extract.name, scripts.extract.name);
    }

    #[test]
    fn field_constants_are_only_the_generated_ones() {
        // A hand-written `local ST = ...` in a helper or an entry point would shadow the
        // generated constant and could disagree with the Rust codec again.
        let generated: Vec<&str> = LAYOUTS
            .iter()
            .flat_map(|layout| layout.lua_names.iter().copied().chain([layout.count_name]))
            .chain(CONSTANTS.iter().map(|(name, _)| *name))
            .collect();
        let sources = HELPERS.iter().chain(ENTRIES.iter().map(|(_, code)| code));
        for source in sources {
            for line in source.lines() {
                let Some(declared) = line.trim_start().strip_prefix("local ") else {
                    continue;
                };
                let names = declared.split('=').next().unwrap_or_default();
                for name in names.split(',').map(str::trim) {
                    assert!(
                        !generated.contains(&name),
                        "{name} declared by hand: {line}"
                    );
                }
            }
        }
        let source = &Scripts::load().extract.library.source;
        assert!(source.contains("local ST, HARD, USABLE"), "{source:.300}");
    }

    #[test]
    fn the_journal_cap_is_core_s() {
        // The journal's trim (lib/counters.lua) must keep exactly what MemoryPool keeps.
        let source = &Scripts::load().extract.library.source;
        let declared = format!(
            "\nlocal SNAPSHOT_JOURNAL_CAP = {}\n",
            proxypool_core::SNAPSHOT_JOURNAL_CAP
        );
        assert!(source.contains(&declared), "{source:.600}");
        let helpers = source.find("-- lib/call.lua").unwrap();
        assert!(
            source.find(&declared).unwrap() < helpers,
            "before every helper"
        );
        assert!(
            HELPERS
                .iter()
                .any(|helper| helper.contains("> SNAPSHOT_JOURNAL_CAP")),
            "the journal trims at the cap"
        );
    }
}

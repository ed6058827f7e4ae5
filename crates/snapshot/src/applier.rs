//! The applier: the gateway's side of the protocol, as decisions over a small
//! [`ApplyTarget`] (the gateway's local snapshot store; no I/O here).
//!
//! The applier holds the content of what the session applied, the base of the next delta.
//! A whole snapshot must be for this worker, list no proxy or client twice, match its
//! checksum and not be older than the view served in the same session; it replaces
//! everything. A delta must name the held content as its base and bring it to its
//! announced checksum ([`SnapshotContent::apply`]); then it goes to the target the
//! cheapest way that is right:
//!
//! - only lease ends, draining leases and cooldowns moved, and the target serves the
//!   base: [`ApplyTarget::patch`] (no new view);
//! - the target serves the base and the upstreams' TLS is unchanged:
//!   [`ApplyTarget::change`] (a new view that keeps every unchanged proxy);
//! - otherwise the whole content is installed again ([`ApplyTarget::install`]).
//!
//! A delta that fails anywhere forgets the content, so the next poll asks for the whole
//! snapshot (`after_version=0`); a whole snapshot that fails leaves the held content as it
//! was. Either way the target keeps serving what it had.

use crate::content::{ContentError, SnapshotContent};
use crate::delta::{SnapshotDelta, SnapshotUpdate};
use proxypool_core::control::WorkerSnapshot;
use proxypool_core::{SnapshotRef, WorkerId};
use std::fmt::Display;

/// Where applied snapshots go: the gateway's views. Each call either changes the target
/// whole or not at all.
pub trait ApplyTarget {
    type Error: Display;

    /// The session and the reference of what the target serves now (`None` before the
    /// first snapshot).
    fn serving(&self) -> Option<(String, SnapshotRef)>;

    /// Installs a whole snapshot whose content was checked.
    fn install(&self, snapshot: WorkerSnapshot) -> Result<SnapshotRef, Self::Error>;

    /// Writes a delta that moves only lease ends, draining leases and cooldowns into the
    /// view served now, which is the delta's base; `content` is the content after it.
    fn patch(
        &self,
        delta: &SnapshotDelta,
        content: &SnapshotContent,
    ) -> Result<SnapshotRef, Self::Error>;

    /// Builds a new view from the one served now (the delta's base) and the delta.
    fn change(
        &self,
        delta: &SnapshotDelta,
        content: &SnapshotContent,
    ) -> Result<SnapshotRef, Self::Error>;
}

/// Why an update was not applied (the target keeps what it served).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError<E> {
    #[error("snapshot is for worker {0}, not this one")]
    WrongWorker(WorkerId),
    #[error("snapshot checksum does not match its content")]
    Checksum,
    #[error("snapshot version {got} is older than the applied {applied}")]
    Older { got: u64, applied: u64 },
    #[error("a delta came without a snapshot to apply it to")]
    NoBase,
    #[error(transparent)]
    Content(ContentError),
    #[error("the delta does not fit the current view")]
    NotPatchable,
    #[error("{0}")]
    Target(E),
}

/// Which kind of update it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateKind {
    Whole,
    Delta,
}

/// What applying one update came to.
#[derive(Debug)]
pub struct Outcome<E> {
    pub kind: UpdateKind,
    /// Whether it counts as taken: a whole snapshot once installed, a delta once the held
    /// content took it (the gateway's update counter).
    pub counted: bool,
    /// The reference the target serves now, or why nothing changed.
    pub result: Result<SnapshotRef, ApplyError<E>>,
}

/// The gateway's applier for one worker (see the module doc).
#[derive(Debug)]
pub struct Applier {
    worker: WorkerId,
    content: Option<SnapshotContent>,
}

impl Applier {
    pub fn new(worker: WorkerId) -> Self {
        Applier {
            worker,
            content: None,
        }
    }

    /// The version to poll after: the held content's, 0 (whole) when none is held.
    pub fn after_version(&self) -> u64 {
        self.content.as_ref().map_or(0, |c| c.reference().version)
    }

    /// Forgets the held content (a new session starts from a whole snapshot).
    pub fn forget(&mut self) {
        self.content = None;
    }

    /// Applies `update` to `target` (see the module doc).
    pub fn apply<T: ApplyTarget>(
        &mut self,
        update: SnapshotUpdate,
        target: &T,
    ) -> Outcome<T::Error> {
        match update {
            SnapshotUpdate::Full(snapshot) => {
                let result = self.apply_whole(*snapshot, target);
                Outcome {
                    kind: UpdateKind::Whole,
                    counted: result.is_ok(),
                    result,
                }
            }
            SnapshotUpdate::Delta(delta) => {
                let (counted, result) = self.apply_delta(&delta, target);
                Outcome {
                    kind: UpdateKind::Delta,
                    counted,
                    result,
                }
            }
        }
    }

    fn apply_whole<T: ApplyTarget>(
        &mut self,
        snapshot: WorkerSnapshot,
        target: &T,
    ) -> Result<SnapshotRef, ApplyError<T::Error>> {
        if snapshot.worker != self.worker {
            return Err(ApplyError::WrongWorker(snapshot.worker));
        }
        let content = SnapshotContent::of(&snapshot).map_err(ApplyError::Content)?;
        if content.checksum() != snapshot.reference.checksum {
            return Err(ApplyError::Checksum);
        }
        let reference = install(target, snapshot)?;
        self.content = Some(content);
        Ok(reference)
    }

    /// Whether the held content took the delta, and what the target came to.
    fn apply_delta<T: ApplyTarget>(
        &mut self,
        delta: &SnapshotDelta,
        target: &T,
    ) -> (bool, Result<SnapshotRef, ApplyError<T::Error>>) {
        let Some(mut held) = self.content.take() else {
            return (false, Err(ApplyError::NoBase));
        };
        if let Err(error) = held.apply(delta) {
            return (false, Err(ApplyError::Content(error)));
        }
        let serving = target.serving();
        let serves_base = serving.as_ref().is_some_and(|(session, reference)| {
            *session == delta.session_id && *reference == delta.base
        });
        let applied = if delta.touches_only_leases_and_cooldowns() {
            if serves_base {
                target.patch(delta, &held).map_err(ApplyError::Target)
            } else {
                Err(ApplyError::NotPatchable)
            }
        } else if serving.is_none() {
            Err(ApplyError::NotPatchable)
        } else if serves_base && delta.upstream_tls.is_none() {
            target.change(delta, &held).map_err(ApplyError::Target)
        } else {
            let whole =
                held.to_snapshot(&self.worker, delta.generated_at_ms, delta.max_staleness_ms);
            install(target, whole)
        };
        if applied.is_ok() {
            self.content = Some(held);
        }
        (true, applied)
    }
}

/// Installs a whole snapshot unless the target serves a newer version of the same session.
fn install<T: ApplyTarget>(
    target: &T,
    snapshot: WorkerSnapshot,
) -> Result<SnapshotRef, ApplyError<T::Error>> {
    if let Some((session, applied)) = target.serving()
        && session == snapshot.session_id
        && snapshot.reference.version < applied.version
    {
        return Err(ApplyError::Older {
            got: snapshot.reference.version,
            applied: applied.version,
        });
    }
    target.install(snapshot).map_err(ApplyError::Target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::snapshot_checksum;
    use crate::delta::LeaseEnd;
    use proxypool_core::control::{Advisories, SnapshotProxy, UpstreamTls};
    use proxypool_core::{Credentials, Protocol, ProxyId, UpstreamId};
    use std::cell::RefCell;

    /// A target that serves what it was last given and records each call.
    #[derive(Default)]
    struct Views {
        serving: RefCell<Option<(String, SnapshotRef)>>,
        calls: RefCell<Vec<&'static str>>,
        refuse: bool,
    }

    impl Views {
        fn take(
            &self,
            call: &'static str,
            session: &str,
            reference: &SnapshotRef,
        ) -> Result<SnapshotRef, String> {
            self.calls.borrow_mut().push(call);
            if self.refuse {
                return Err("full".to_owned());
            }
            *self.serving.borrow_mut() = Some((session.to_owned(), reference.clone()));
            Ok(reference.clone())
        }
    }

    impl ApplyTarget for Views {
        type Error = String;
        fn serving(&self) -> Option<(String, SnapshotRef)> {
            self.serving.borrow().clone()
        }
        fn install(&self, snapshot: WorkerSnapshot) -> Result<SnapshotRef, String> {
            self.take("install", &snapshot.session_id, &snapshot.reference)
        }
        fn patch(&self, delta: &SnapshotDelta, _: &SnapshotContent) -> Result<SnapshotRef, String> {
            self.take("patch", &delta.session_id, &delta.reference)
        }
        fn change(
            &self,
            delta: &SnapshotDelta,
            _: &SnapshotContent,
        ) -> Result<SnapshotRef, String> {
            self.take("change", &delta.session_id, &delta.reference)
        }
    }

    fn worker() -> WorkerId {
        WorkerId::new("gw-1").unwrap()
    }

    fn proxy(i: u32, lease: u64) -> SnapshotProxy {
        SnapshotProxy {
            id: ProxyId::new(format!("{i:032x}")).unwrap(),
            protocol: Protocol::Http,
            host: format!("10.0.0.{i}"),
            port: 8080,
            credentials: Some(Credentials::new("u", "pw")),
            upstream: UpstreamId::new("vendor").unwrap(),
            region: None,
            carrier: None,
            geo: Default::default(),
            max_sessions: 4,
            usable_until_ms: 1_000_000,
            lease_until_ms: lease,
            epoch: 1,
        }
    }

    fn whole(session: &str, version: u64, proxies: Vec<SnapshotProxy>) -> WorkerSnapshot {
        let advisories = Advisories::default();
        let checksum = snapshot_checksum(&proxies, &[], &[], &advisories, None, &[]);
        WorkerSnapshot {
            worker: worker(),
            session_id: session.to_owned(),
            reference: SnapshotRef {
                version,
                epoch: 1,
                checksum,
            },
            generated_at_ms: 0,
            max_staleness_ms: 60_000,
            proxies,
            clients: Vec::new(),
            held: Vec::new(),
            advisories,
            ticket_key: None,
            upstream_tls: Vec::new(),
        }
    }

    /// The delta from `from` to `to` (same session), as the controller makes it.
    fn delta(from: &WorkerSnapshot, to: &WorkerSnapshot) -> SnapshotUpdate {
        let before = SnapshotContent::of(from).unwrap();
        let mut after = SnapshotContent::of(to).unwrap();
        after.set_reference(to.reference.clone());
        SnapshotUpdate::Delta(Box::new(before.delta_to(&worker(), &after)))
    }

    fn full(snapshot: &WorkerSnapshot) -> SnapshotUpdate {
        SnapshotUpdate::Full(Box::new(snapshot.clone()))
    }

    #[test]
    fn a_whole_snapshot_is_checked_before_it_is_installed() {
        let views = Views::default();
        let mut applier = Applier::new(worker());
        let mut bad = whole("s1", 1, vec![proxy(1, 500)]);
        bad.reference.checksum = "0".repeat(32);
        let outcome = applier.apply(full(&bad), &views);
        assert!(matches!(outcome.result, Err(ApplyError::Checksum)));
        let mut other = whole("s1", 1, vec![proxy(1, 500)]);
        other.worker = WorkerId::new("gw-2").unwrap();
        assert!(matches!(
            applier.apply(full(&other), &views).result,
            Err(ApplyError::WrongWorker(_))
        ));
        assert!(views.calls.borrow().is_empty());
        assert_eq!(applier.after_version(), 0);

        let good = whole("s1", 2, vec![proxy(1, 500)]);
        let outcome = applier.apply(full(&good), &views);
        assert!(outcome.counted && outcome.kind == UpdateKind::Whole);
        assert_eq!(outcome.result.unwrap(), good.reference);
        assert_eq!(applier.after_version(), 2);
        let older = whole("s1", 1, vec![proxy(2, 500)]);
        assert!(matches!(
            applier.apply(full(&older), &views).result,
            Err(ApplyError::Older { got: 1, applied: 2 })
        ));
        assert_eq!(
            applier.after_version(),
            2,
            "a refused whole keeps the content"
        );
        assert_eq!(*views.calls.borrow(), vec!["install"]);
    }

    #[test]
    fn a_delta_goes_the_cheapest_way_that_fits_the_view_served() {
        let views = Views::default();
        let mut applier = Applier::new(worker());
        let v1 = whole("s1", 1, vec![proxy(1, 500), proxy(2, 500)]);
        applier.apply(full(&v1), &views).result.unwrap();

        // Only a lease moved: patched into the view.
        let v2 = whole("s1", 2, vec![proxy(1, 900), proxy(2, 500)]);
        let update = delta(&v1, &v2);
        let SnapshotUpdate::Delta(d) = &update else {
            unreachable!()
        };
        assert_eq!(
            d.leases,
            vec![LeaseEnd {
                id: proxy(1, 0).id,
                lease_until_ms: 900,
                epoch: 1
            }]
        );
        let outcome = applier.apply(update, &views);
        assert!(outcome.counted && outcome.kind == UpdateKind::Delta);
        assert_eq!(outcome.result.unwrap(), v2.reference);

        // A proxy came: a new view from the current one.
        let v3 = whole("s1", 3, vec![proxy(1, 900), proxy(2, 500), proxy(3, 500)]);
        applier.apply(delta(&v2, &v3), &views).result.unwrap();

        // The upstreams' TLS changed: the whole content is installed again.
        let mut v4 = whole("s1", 4, v3.proxies.clone());
        v4.upstream_tls = vec![UpstreamTls {
            upstream: UpstreamId::new("vendor").unwrap(),
            ca_pem: None,
            server_name: Some("proxies.test".to_owned()),
            refuse_internal: false,
        }];
        v4.reference.checksum = snapshot_checksum(
            &v4.proxies,
            &[],
            &[],
            &v4.advisories,
            None,
            &v4.upstream_tls,
        );
        applier.apply(delta(&v3, &v4), &views).result.unwrap();
        assert_eq!(
            *views.calls.borrow(),
            vec!["install", "patch", "change", "install"]
        );
        assert_eq!(applier.after_version(), 4);
    }

    #[test]
    fn a_delta_that_does_not_fit_forgets_the_content() {
        let views = Views::default();
        let mut applier = Applier::new(worker());
        let v1 = whole("s1", 1, vec![proxy(1, 500)]);
        let v2 = whole("s1", 2, vec![proxy(1, 900)]);
        assert!(matches!(
            applier.apply(delta(&v1, &v2), &views).result,
            Err(ApplyError::NoBase)
        ));
        applier.apply(full(&v1), &views).result.unwrap();
        let mut wrong = delta(&v1, &v2);
        if let SnapshotUpdate::Delta(d) = &mut wrong {
            d.reference.checksum = "0".repeat(32);
        }
        let outcome = applier.apply(wrong, &views);
        assert!(!outcome.counted);
        assert!(matches!(outcome.result, Err(ApplyError::Content(_))));
        assert_eq!(
            applier.after_version(),
            0,
            "the next poll asks for it whole"
        );

        // The content took it but the view served is not its base: nothing is patched.
        applier.apply(full(&v1), &views).result.unwrap();
        *views.serving.borrow_mut() = Some(("s0".to_owned(), v1.reference.clone()));
        let outcome = applier.apply(delta(&v1, &v2), &views);
        assert!(outcome.counted);
        assert!(matches!(outcome.result, Err(ApplyError::NotPatchable)));
        assert_eq!(applier.after_version(), 0);

        // The target refuses: forgotten too.
        let refusing = Views {
            refuse: true,
            ..Views::default()
        };
        *refusing.serving.borrow_mut() = Some(("s1".to_owned(), v1.reference.clone()));
        applier.apply(full(&v1), &views).result.unwrap();
        assert!(matches!(
            applier.apply(delta(&v1, &v2), &refusing).result,
            Err(ApplyError::Target(_))
        ));
        assert_eq!(applier.after_version(), 0);
    }
}

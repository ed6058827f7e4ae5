//! The local snapshot: [`view`] (one immutable, indexed snapshot) and [`store`] (the
//! atomically swapped current view and the staleness rule), and [`readiness`]: whether the
//! gateway can route, and why not; [`proxy_tls`]: how `https` proxies are reached.

pub(crate) mod proxy_tls;
pub(crate) mod readiness;
pub(crate) mod store;
pub(crate) mod view;

pub(crate) use store::SnapshotStore;
pub(crate) use view::{ClientEntry, SnapshotView, ViewProxy};

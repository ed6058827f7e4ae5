//! Which series are one tenant's, and the exposition without them: what a `/metrics`
//! endpoint shows a scraper without the endpoint's token (the client API's
//! `metrics_token`, the gateway admin's `admin_token`).
//!
//! A series is a tenant's when one of its labels names a tenant or what a tenant does
//! ([`TENANT_LABELS`]): such a series says how much one client routed or extracted. The
//! aggregate exposition drops those series whole (it never relabels or sums them: the
//! families' totals without a tenant label are recorded beside them). The choice is made
//! per series while the registry is rendered ([`Scope`]), from the labels of its key: no
//! second pass over the text and no parsing of label values, whatever they hold.
//!
//! A family whose every series is a tenant's keeps its `# HELP` and `# TYPE` lines, as
//! a family without series does: whether a tenant's series exists is not shown either.

use metrics::Key;

/// The label names that make a series one tenant's: `client` (the usage families
/// `proxypool_usage_*`, recorded by the gateway and the client API per client and
/// upstream), and `project` and `domain`, which no family carries today but which would
/// name a tenant's project or the sites it visits. A role that adds a label naming a
/// tenant adds it here.
pub const TENANT_LABELS: &[&str] = &["client", "project", "domain"];

/// Which series a rendering shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every series (a scrape that presented the endpoint's token).
    Everything,
    /// Only series without a [`TENANT_LABELS`] label (a scrape without a token).
    Aggregate,
}

impl Scope {
    /// Whether the series of `key` is rendered in this scope.
    pub(crate) fn shows(self, key: &Key) -> bool {
        match self {
            Scope::Everything => true,
            Scope::Aggregate => !is_tenant_series(key),
        }
    }
}

/// Whether one of the series' labels is a [`TENANT_LABELS`] name.
pub fn is_tenant_series(key: &Key) -> bool {
    key.labels()
        .any(|label| TENANT_LABELS.contains(&label.key()))
}

#[cfg(test)]
mod tests;

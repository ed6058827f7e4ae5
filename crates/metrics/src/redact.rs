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
mod tests {
    use crate::MetricsHandle;

    #[test]
    fn the_aggregate_leaves_out_every_series_with_a_tenant_label_and_nothing_else() {
        let (recorder, handle) = MetricsHandle::local();
        metrics::with_local_recorder(&recorder, || {
            metrics::describe_counter!("t_usage_total", "Usage by client.");
            metrics::counter!("t_usage_total", "client" => "acme", "upstream" => "u").increment(3);
            metrics::counter!("t_usage_total", "upstream" => "u", "client" => "globex")
                .increment(4);
            metrics::counter!("t_mixed_total", "project" => "acme").increment(1);
            metrics::counter!("t_mixed_total", "route" => "/x").increment(2);
            metrics::gauge!("t_cooling", "domain" => "shop.example").set(1.0);
            metrics::histogram!("t_seconds", "client" => "acme").record(0.2);
            metrics::histogram!("t_seconds", "call" => "x").record(0.3);
            // A value that looks like a label is only a value.
            metrics::counter!("t_tricky_total", "route" => "a\",client=\"b").increment(1);
            metrics::gauge!("t_plain").set(7.0);
        });
        let everything = handle.render();
        let aggregate = handle.render_aggregate();
        for tenant in ["acme", "globex", "shop.example"] {
            assert!(everything.contains(tenant), "{everything}");
            assert!(!aggregate.contains(tenant), "{tenant} leaked:\n{aggregate}");
        }
        for kept in [
            "t_mixed_total{route=\"/x\"} 2\n",
            "t_seconds_count{call=\"x\"} 1\n",
            "t_tricky_total{route=",
            "t_plain 7\n",
            // A family emptied of its series keeps its help and type, as one never recorded.
            "# HELP t_usage_total Usage by client.\n# TYPE t_usage_total counter\n",
        ] {
            assert!(aggregate.contains(kept), "missing {kept:?} in\n{aggregate}");
        }
        assert!(!aggregate.contains("\nt_usage_total"), "{aggregate}");
        assert!(!aggregate.contains("\nt_cooling"), "{aggregate}");
        // Process metrics are in both.
        assert_eq!(
            everything.contains("process_"),
            aggregate.contains("process_")
        );
    }
}

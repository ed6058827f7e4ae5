//! Tests of the parent module, in a file of their own so that what they borrow from
//! elsewhere in the crate is no import of the module itself.

use crate::MetricsHandle;

#[test]
fn the_aggregate_leaves_out_every_series_with_a_tenant_label_and_nothing_else() {
    let (recorder, handle) = MetricsHandle::local();
    metrics::with_local_recorder(&recorder, || {
        metrics::describe_counter!("t_usage_total", "Usage by client.");
        metrics::counter!("t_usage_total", "client" => "acme", "upstream" => "u").increment(3);
        metrics::counter!("t_usage_total", "upstream" => "u", "client" => "globex").increment(4);
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

//! Authorization: which upstreams and regions a client may extract from or inspect.
//!
//! Runs after authentication and before the quota, so a forbidden request never creates or
//! charges a quota bucket. A client restricted to exactly one upstream (or region) that
//! names none gets that one filled in; restricted to several, it must name one, because
//! an unfiltered extraction could hand it proxies from upstreams it may not use.

use crate::clients::ApiClient;
use crate::error::ApiError;
use proxypool_core::{ProxyFilter, UpstreamId};

/// Checks (and, for a single allowed value, completes) an extraction filter.
pub(crate) fn authorize_filter(
    client: &ApiClient,
    filter: &mut ProxyFilter,
) -> Result<(), ApiError> {
    restrict(&mut filter.upstream, &client.allowed_upstreams, "upstream")?;
    restrict(&mut filter.region, &client.allowed_regions, "region")
}

/// One restricted field of the filter (`field`: `upstream` or `region`): anything when
/// the client has no list, else a listed value, filled in when the list has only one.
fn restrict<T: Clone + PartialEq>(
    chosen: &mut Option<T>,
    allowed: &[T],
    field: &str,
) -> Result<(), ApiError> {
    match (&*chosen, allowed) {
        (_, []) => {}
        (Some(value), _) if allowed.contains(value) => {}
        (Some(_), _) => {
            return Err(ApiError::forbidden(format!(
                "filters.{field} is not one of this client's allowed {field}s"
            )));
        }
        (None, [only]) => *chosen = Some(only.clone()),
        (None, _) => {
            return Err(ApiError::forbidden(format!(
                "this client is restricted to some {field}s: set filters.{field} to one of them"
            )));
        }
    }
    Ok(())
}

/// Checks that the client may inspect `upstream`.
pub(crate) fn authorize_upstream(
    client: &ApiClient,
    upstream: &UpstreamId,
) -> Result<(), ApiError> {
    if client.may_use_upstream(upstream) {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "this upstream is not one of this client's allowed upstreams",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use proxypool_core::{ClientId, Label, SecretHash};

    fn client(upstreams: &[&str], regions: &[&str]) -> ApiClient {
        ApiClient {
            id: ClientId::new("c").unwrap(),
            project: "p".into(),
            token_hash: SecretHash::derive("t", "s").unwrap(),
            admin: false,
            shared_feedback: false,
            allowed_upstreams: upstreams
                .iter()
                .map(|u| UpstreamId::new(u).unwrap())
                .collect(),
            allowed_regions: regions.iter().map(|r| Label::new(r).unwrap()).collect(),
            quota: proxypool_quota::QuotaConfig::default(),
            ip_allowlist: proxypool_config::Cidrs::default(),
            rate_limit: None,
        }
    }

    fn filter(upstream: Option<&str>, region: Option<&str>) -> ProxyFilter {
        ProxyFilter {
            upstream: upstream.map(|u| UpstreamId::new(u).unwrap()),
            region: region.map(|r| Label::new(r).unwrap()),
            ..ProxyFilter::default()
        }
    }

    #[test]
    fn unrestricted_clients_pass_anything() {
        let mut f = filter(Some("acme"), None);
        authorize_filter(&client(&[], &[]), &mut f).unwrap();
        assert_eq!(f, filter(Some("acme"), None));
    }

    #[test]
    fn restricted_clients_are_checked_and_single_values_filled_in() {
        let one = client(&["acme"], &["us"]);
        let mut f = filter(None, None);
        authorize_filter(&one, &mut f).unwrap();
        assert_eq!(f, filter(Some("acme"), Some("us")));

        let mut other = filter(Some("globex"), None);
        let denied = authorize_filter(&one, &mut other).unwrap_err();
        assert_eq!(denied.code, ErrorCode::Forbidden);
        assert!(denied.message.contains("filters.upstream"));

        let two = client(&["acme", "globex"], &[]);
        assert!(authorize_filter(&two, &mut filter(None, None)).is_err());
        authorize_filter(&two, &mut filter(Some("globex"), None)).unwrap();
        let mut wrong_region = filter(Some("acme"), Some("de"));
        assert!(authorize_filter(&one, &mut wrong_region).is_err());
    }
}

//! `POST /v1/feedback`: a client tells what a site did to it through a proxy, so the pool
//! keeps that proxy off that site's registrable domain for a while (`proxypool_core::cooldown`).
//!
//! Inside a tunnel (CONNECT, SOCKS5, https) the gateway cannot see that a site refused a
//! proxy; only the client can. By `proxy_id` (an extracted proxy, or the one a gateway
//! named in `X-Proxypool-Proxy`, with the gateway's `X-Proxypool-Ticket` as `ticket`: the
//! proof it routed this client through that proxy, good only while the proxy is in the
//! lease generation the ticket was issued under) the API computes the change from the
//! verdict, the `[cooldowns]` policy and the proxy's current entry, and applies it; by
//! `session` (a gateway sticky session, whose proxy the client does not know) it queues the
//! feedback for the gateway that holds the session. `return` gives an extracted proxy back
//! as bad: the client's extraction no longer shows its credentials, and nobody else is
//! handed it while the client may still hold them (until its hard expiry, or until the
//! vendor re-issues it). `replacement` makes a new extraction through the same code path
//! as `POST /v1/extractions`, so one call swaps a banned proxy for a fresh one.
//!
//! A client's feedback calls first pass a token bucket of their own
//! (`admission::feedback_rate`), so a flood is refused with 429 whatever its quota.
//! Every input is checked before anything is charged or changed. The feedback is charged
//! as one `inspect` unit: it is a small bounded write on the client's own view of the pool,
//! as cheap as the reads `inspect` governs, and it needs no bucket of its own to configure.
//! A replacement is charged as an extraction on top. Once the feedback is applied, a
//! replacement that cannot be made is reported inside the 200 answer (`replacement_error`),
//! never as the call's status: a client that retried the whole call on an error would
//! otherwise strike the proxy twice.

use crate::admission::auth::Principal;
use crate::admission::quota::{QuotaGrant, charge_request, refund_unserved};
use crate::body::read_json;
use crate::clients::ApiClient;
use crate::completion::RunToCompletion;
use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::routes::domain::domain_of;
use crate::routes::extractions::{prepare, run, view_of};
use crate::routes::idempotency::{REPLAYED, idempotency_key, replayed_value};
use crate::state::ApiState;
use crate::wire::{
    CooldownView, ExtractionRequestBody, FeedbackOutcome, FeedbackRequestBody, FeedbackView,
    ReplacementError,
};
use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use proxypool_config::Millis;
use proxypool_core::cooldown::{MAX_COOLDOWN_MS, SESSION_FEEDBACK_TTL_MS};
use proxypool_core::ticket::TicketSubject;
use proxypool_core::{
    CooldownChange, CooldownKey, CooldownPolicy, Domain, PoolError, ProxyId, Reporter,
    SessionFeedback, Verdict,
};
use proxypool_quota::Operation;

/// The most a feedback body may weigh: a few short fields and an extraction body.
const MAX_FEEDBACK_BODY: usize = 16 * 1024;
/// Longest gateway session id (the gateway's username selector takes the same).
const MAX_SESSION_ID: usize = 64;

fn ttl_of(raw: &str) -> Result<u64, ApiError> {
    let ttl = Millis::parse(raw).map_err(|e| ApiError::invalid(format!("ttl: {e}")))?;
    if ttl.as_ms() == 0 || ttl.as_ms() > MAX_COOLDOWN_MS {
        return Err(ApiError::invalid(format!(
            "ttl: must be between 1ms and {}h",
            MAX_COOLDOWN_MS / 3_600_000
        )));
    }
    Ok(ttl.as_ms())
}

/// A client's requested ttl, at most the policy's `cap` (and at least 1 ms).
fn clamp_ttl(ttl_ms: u64, policy: &CooldownPolicy) -> u64 {
    ttl_ms.min(policy.cap_ms).max(1)
}

fn session_of(raw: &str) -> Result<String, ApiError> {
    let valid = (1..=MAX_SESSION_ID).contains(&raw.len())
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'));
    if valid {
        Ok(raw.to_owned())
    } else {
        Err(ApiError::invalid(format!(
            "session: must be 1-{MAX_SESSION_ID} characters of [A-Za-z0-9_.], as in the gateway username"
        )))
    }
}

/// Whom the feedback is about.
#[derive(Debug)]
enum Target {
    Proxy {
        id: ProxyId,
        give_back: bool,
        ticket: Option<String>,
    },
    Session(String),
}

/// A feedback whose input is all checked.
#[derive(Debug)]
struct Checked {
    target: Target,
    domain: Domain,
    verdict: Verdict,
    ttl_ms: Option<u64>,
}

fn check(body: &FeedbackRequestBody) -> Result<Checked, ApiError> {
    let domain = domain_of("domain", &body.domain)?;
    let ttl_ms = body.ttl.as_deref().map(ttl_of).transpose()?;
    if ttl_ms.is_some() && body.verdict == Verdict::Ok {
        return Err(ApiError::invalid(
            "ttl: not with verdict ok, which ends the cooldown",
        ));
    }
    let target = match (&body.proxy_id, &body.session) {
        (Some(proxy), None) => Target::Proxy {
            id: ProxyId::new(proxy)
                .map_err(|_| ApiError::invalid("proxy_id: not a proxy id (32 hex digits)"))?,
            give_back: body.give_back,
            ticket: body.ticket.clone(),
        },
        (None, Some(session)) => {
            if body.ticket.is_some() {
                return Err(ApiError::invalid(
                    "ticket: only with proxy_id (a session is reported by its id alone)",
                ));
            }
            if body.give_back {
                return Err(ApiError::invalid(
                    "return: only with proxy_id (a session's proxy is the gateway's, not yours)",
                ));
            }
            Target::Session(session_of(session)?)
        }
        _ => {
            return Err(ApiError::invalid(
                "proxy_id, session: give exactly one of them",
            ));
        }
    };
    if body.give_back && body.verdict == Verdict::Ok {
        return Err(ApiError::invalid(
            "return: not with verdict ok (a proxy is given back as bad)",
        ));
    }
    Ok(Checked {
        target,
        domain,
        verdict: body.verdict,
        ttl_ms,
    })
}

pub(crate) async fn create(
    State(state): State<ApiState>,
    Principal(client): Principal,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // Its own bucket first: a flood of reports is refused before it costs anything.
    state.feedback_limits().check(&client.id)?;
    let key = idempotency_key(&headers)?;
    let cap = state.limits().max_body_bytes.min(MAX_FEEDBACK_BODY);
    let body: FeedbackRequestBody = read_json(&headers, body, cap).await?;
    let checked = check(&body)?;
    // The replacement is checked as an extraction would be, before anything is charged.
    let replacement = body
        .replacement
        .map(|replacement| {
            let extraction = ExtractionRequestBody {
                count: replacement.count,
                mode: replacement.mode,
                filters: replacement.filters,
                min_health_freshness_ms: replacement.min_health_freshness_ms,
                for_domain: Some(
                    replacement
                        .for_domain
                        .unwrap_or_else(|| checked.domain.as_str().to_owned()),
                ),
            };
            prepare(&state, &client, key, &request_id, extraction).map_err(|error| {
                ApiError::new(error.code, format!("replacement.{}", error.message))
            })
        })
        .transpose()?;

    let applied = {
        let state = state.clone();
        let client = client.clone();
        let request_id = request_id.clone();
        RunToCompletion::new(async move { apply(&state, &client, &request_id, checked).await })
            .await?
    };
    let (mut view, grant) = applied;

    let mut extraction_headers = None;
    if let Some(prepared) = replacement {
        match run(&state, client, prepared).await {
            Ok((grant, outcome)) => {
                view.replacement = Some(view_of(&outcome));
                extraction_headers = Some((grant.headers, Some(outcome.replayed)));
            }
            Err(error) => {
                view.replacement_error = Some(ReplacementError {
                    code: error.code.as_str().to_owned(),
                    message: error.message.into_owned(),
                });
                extraction_headers = Some((error.headers, None));
            }
        }
    }
    let mut response = Json(view).into_response();
    let out = response.headers_mut();
    match extraction_headers {
        // The extraction's quota headers, the scarcer resource, when there was one.
        Some((headers, replayed)) => {
            for (name, value) in headers {
                out.insert(name, value);
            }
            if let Some(replayed) = replayed {
                out.insert(REPLAYED, replayed_value(replayed));
            }
        }
        None => {
            for (name, value) in grant.headers {
                out.insert(name, value);
            }
        }
    }
    Ok(response)
}

/// Charges the feedback and applies it; a store that cannot answer is refunded.
async fn apply(
    state: &ApiState,
    client: &ApiClient,
    request_id: &RequestId,
    checked: Checked,
) -> Result<(FeedbackView, QuotaGrant), ApiError> {
    let grant = charge_request(state, client, Operation::Inspect, request_id.as_str()).await?;
    let Checked {
        target,
        domain,
        verdict,
        ttl_ms,
    } = checked;
    // A client's estimate never outlasts what the operator allows a ban to last: one
    // client could otherwise keep a proxy off a site for everyone for a day.
    let ttl_ms = ttl_ms.map(|ttl| clamp_ttl(ttl, &state.cooldown_policy()));
    let result = match target {
        Target::Proxy {
            id,
            give_back,
            ticket,
        } => {
            let report = ProxyReport {
                proxy: id,
                give_back,
                ticket,
            };
            on_proxy(state, client, report, domain, verdict, ttl_ms).await
        }
        Target::Session(session) => {
            let feedback = SessionFeedback {
                // The session's cooldown goes where this client's reports go.
                project: client.feedback_scope(),
                // Request ids are unique across replicas, so the feedback id is too.
                id: format!("fb-{request_id}"),
                client: client.id.clone(),
                session,
                domain,
                verdict,
                ttl_ms,
                expires_at_ms: state.now().saturating_add(SESSION_FEEDBACK_TTL_MS),
            };
            on_session(state, feedback).await
        }
    };
    let result = result.map_err(|error| error.with_headers(grant.headers.clone()));
    let view = refund_unserved(state, &grant, result).await?;
    Ok((view, grant))
}

fn store_error(state: &ApiState, error: PoolError) -> ApiError {
    match error {
        PoolError::NotFound => unknown_proxy(),
        error => ApiError::from_pool(error, state.retry_after()),
    }
}

/// The one answer for every proxy a client may not report on, whatever the reason.
fn unknown_proxy() -> ApiError {
    ApiError::not_found(
        "no proxy you may report on (an unknown id, another client's extracted proxy, a proxy given back, a proxy you did not extract without a gateway's good ticket for it from its current lease, or, to return it, one you do not hold)",
    )
}

/// A feedback by `proxy_id`.
#[derive(Debug)]
struct ProxyReport {
    proxy: ProxyId,
    give_back: bool,
    /// The gateway's ticket, for a proxy the client did not extract.
    ticket: Option<String>,
}

async fn on_proxy(
    state: &ApiState,
    client: &ApiClient,
    report: ProxyReport,
    domain: Domain,
    verdict: Verdict,
    ttl_ms: Option<u64>,
) -> Result<FeedbackView, ApiError> {
    let ProxyReport {
        proxy,
        give_back,
        ticket,
    } = report;
    let store = &state.ports().cooldowns;
    // One read decides, and a proxy the pool does not hold is refused exactly as one held
    // by another client's extraction: same status, same body, after the same single call,
    // so the answer is no oracle of which proxy ids exist.
    let reporter = crate::metrics::timed(
        "cooldowns",
        "may_report",
        store.may_report(state.now(), &client.id, &proxy),
    )
    .await
    .map_err(|error| store_error(state, error))?;
    // A proxy nobody extracted is reported only by a client a gateway routed through it
    // while it was in its current lease generation (the gateway's ticket, bound to that
    // lease's epoch); without a good one it is refused as an unknown id is. A proxy not
    // leased since it last entered the pool has no generation any ticket could name.
    let allowed = match (reporter, ticket.as_deref()) {
        (Reporter::Holder, _) => true,
        (
            Reporter::Unheld {
                lease_epoch: Some(lease_epoch),
            },
            Some(ticket),
        ) => {
            let subject = TicketSubject {
                client: &client.id,
                proxy: &proxy,
                lease_epoch,
            };
            state
                .ticket_verifies(ticket, subject)
                .await
                .map_err(|error| store_error(state, error))?
        }
        (Reporter::Unheld { .. }, _) | (Reporter::No, _) => false,
    };
    if !allowed {
        return Err(unknown_proxy());
    }
    // Returned first: it is the step that checks the client holds the proxy, so a proxy
    // that is not the client's changes nothing at all.
    if give_back {
        crate::metrics::timed(
            "cooldowns",
            "return_extracted",
            store.return_extracted(state.now(), &client.id, &proxy),
        )
        .await
        .map_err(|error| store_error(state, error))?;
    }
    let now = state.now();
    let known = crate::metrics::timed(
        "cooldowns",
        "cooldowns_of",
        store.cooldowns_of(now, std::slice::from_ref(&proxy)),
    )
    .await
    .map_err(|error| store_error(state, error))?;
    // The client's report lives in its own scope (its project's, or the shared one for a
    // client trusted with shared feedback): it grows, shortens or clears only that entry.
    let key = CooldownKey {
        proxy_id: proxy.clone(),
        domain: domain.clone(),
        project: client.feedback_scope(),
    };
    let previous = known.iter().find(|entry| key.names(entry));
    let policy = state.cooldown_policy();
    let change = verdict.change(&policy, key.clone(), previous, ttl_ms, now);
    let report = crate::metrics::timed(
        "cooldowns",
        "apply_cooldowns",
        store.apply_cooldowns(now, std::slice::from_ref(&change)),
    )
    .await
    .map_err(|error| store_error(state, error))?;
    if report.applied == 0 {
        return Err(unknown_proxy());
    }
    let (outcome, cooldown, applied_ttl) = match &change {
        CooldownChange::Set(entry) => {
            let stored = crate::metrics::timed(
                "cooldowns",
                "cooldowns_of",
                store.cooldowns_of(now, std::slice::from_ref(&proxy)),
            )
            .await
            .map_err(|error| store_error(state, error))?;
            let stored_entry = stored
                .iter()
                .find(|entry| key.names(entry))
                .map(CooldownView::from);
            // The verdict's own cooldown; the stored entry may end later (merged).
            let applied_ttl = entry.until_ms.saturating_sub(now);
            (FeedbackOutcome::Cooling, stored_entry, Some(applied_ttl))
        }
        CooldownChange::Clear { .. } => (FeedbackOutcome::Cleared, None, None),
    };
    Ok(FeedbackView {
        outcome,
        domain,
        verdict,
        proxy_id: Some(proxy),
        session: None,
        cooldown,
        ttl_ms: applied_ttl,
        feedback_id: None,
        expires_at: None,
        returned: give_back,
        replacement: None,
        replacement_error: None,
    })
}

async fn on_session(state: &ApiState, feedback: SessionFeedback) -> Result<FeedbackView, ApiError> {
    let view = FeedbackView {
        outcome: FeedbackOutcome::Queued,
        domain: feedback.domain.clone(),
        verdict: feedback.verdict,
        proxy_id: None,
        session: Some(feedback.session.clone()),
        cooldown: None,
        ttl_ms: feedback.ttl_ms,
        feedback_id: Some(feedback.id.clone()),
        expires_at: Some(feedback.expires_at_ms),
        returned: false,
        replacement: None,
        replacement_error: None,
    };
    crate::metrics::timed(
        "cooldowns",
        "add_session_feedback",
        state
            .ports()
            .cooldowns
            .add_session_feedback(state.now(), feedback),
    )
    .await
    .map_err(|error| store_error(state, error))?;
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_are_bounded() {
        assert_eq!(ttl_of("30s").unwrap(), 30_000);
        assert_eq!(ttl_of("24h").unwrap(), MAX_COOLDOWN_MS);
        for bad in ["0s", "25h", "30", "soon"] {
            assert!(
                ttl_of(bad).unwrap_err().message.starts_with("ttl: "),
                "{bad}"
            );
        }
    }
}

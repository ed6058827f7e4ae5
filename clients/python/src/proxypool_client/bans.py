"""Reporting a ban a site answered through the gateway, shared by the `requests` session
and the Scrapy middleware.

Which report a ban gets depends on what the client knows:

- the answer named its proxy (`X-Proxypool-Proxy`, on every plain-HTTP answer the gateway
  forwards, and on every https answer of a tunnel the gateway inspects, `-inspect`):
  feedback by that proxy id with the answer's ticket, applied at once;
- it did not (a ban inside a plain HTTPS tunnel: the proxy id came with the `CONNECT`
  answer, which neither `requests` nor Scrapy shows), but the request rode a sticky
  session: feedback by session, queued for the gateway that holds it;
- neither: the ban cannot be reported (`unattributed`); retrying through the rotating
  gateway still moves the request to another proxy.

A report never raises: a refused or failed report is recorded in the :class:`BanReport`
(the API's status and code) so a crawl goes on and the caller can count it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from .api import Client
from .errors import ApiError, InvalidArgument, TransportError
from .gateway import GatewayAnswer


@dataclass(frozen=True)
class BanReport:
    """One ban and what became of its report."""

    status: int
    """The site's answer status (403, 429, ...)."""
    domain: str
    """The site, as reported (the API reduces it to its registrable domain)."""
    proxy_id: Optional[str]
    """The proxy that carried the ban, when the answer named it."""
    session: Optional[str]
    """The sticky session it was reported by, when there was no proxy id."""
    feedback_status: int
    """200 when the API applied (or queued) the report; the API's error status when it
    refused it; 0 when nothing was sent (unattributed) or the API was unreachable."""
    outcome: Optional[str] = None
    """The API's outcome: `cooling` (by proxy id) or `queued` (by session)."""
    error: Optional[str] = None
    """Why there is no outcome: the API's error code (`not_found`, `rate_limited`, ...),
    `unreachable`, `unattributed`, `no_api` (nothing to report with) or `invalid: ...` for a URL with no host to report."""

    @property
    def reported(self) -> bool:
        """Whether the API took the report."""
        return 200 <= self.feedback_status < 300


def report_ban(
    api: Optional[Client],
    answer: GatewayAnswer,
    status: int,
    url: str,
    *,
    session: Optional[str] = None,
    verdict: str = "banned",
) -> BanReport:
    """Reports the ban `url` answered with `status` as the module doc says (nothing is
    sent without an `api`: the report says `no_api`)."""
    domain = urlsplit(url).hostname or url

    def made(feedback_status: int, outcome: Optional[str] = None, error: Optional[str] = None) -> BanReport:
        by_session = session if answer.proxy_id is None else None
        return BanReport(status, domain, answer.proxy_id, by_session, feedback_status, outcome, error)

    if api is None:
        return made(0, error="no_api")
    if answer.proxy_id is None and session is None:
        return made(0, error="unattributed")
    try:
        if answer.proxy_id is not None:
            feedback = api.feedback(domain, verdict, proxy_id=answer.proxy_id, ticket=answer.ticket)
        else:
            feedback = api.feedback(domain, verdict, session=session)
    except ApiError as refused:
        return made(refused.status, error=refused.code)
    except TransportError:
        return made(0, error="unreachable")
    except InvalidArgument as bad:
        return made(0, error=f"invalid: {bad}")
    return made(200, outcome=feedback.outcome)

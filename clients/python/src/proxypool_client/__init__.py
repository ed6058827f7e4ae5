"""proxypool-client: use a proxypool deployment from Python.

- :class:`Client`: the client API (exclusive extraction, feedback with tickets, usage),
  with typed errors and the retries the API asks for.
- :func:`gateway_url` / :func:`gateway_username`: the gateway as a proxy URL, with
  selectors (region, city, sticky session, rotation) in the username.
- :class:`GatewaySession`: a `requests.Session` through the gateway that reports the bans
  sites answer with.
- :mod:`proxypool_client.scrapy`: the Scrapy add-on
  (`ADDONS = {"proxypool_client.scrapy.Addon": 0}`); needs the `scrapy` extra.
"""

from ._version import __version__
from .api import Client, new_idempotency_key
from .bans import BanReport, report_ban
from .errors import (
    ApiError,
    Conflict,
    Forbidden,
    GatewayError,
    InvalidArgument,
    InvalidRequest,
    NotFound,
    ProxypoolError,
    RateLimited,
    TransportError,
    Unauthenticated,
    Unavailable,
)
from .gateway import GatewayAnswer, gateway_url, gateway_username, new_session_id
from .models import ClientUsage, Cooldown, Extraction, Feedback, Me, Proxy, UpstreamUsage, Usage, UsageBucket
from .session import GatewaySession, answer_of

__all__ = [
    "__version__",
    "ApiError",
    "BanReport",
    "Client",
    "ClientUsage",
    "Conflict",
    "Cooldown",
    "Extraction",
    "Feedback",
    "Forbidden",
    "GatewayAnswer",
    "GatewayError",
    "GatewaySession",
    "InvalidArgument",
    "InvalidRequest",
    "Me",
    "NotFound",
    "Proxy",
    "ProxypoolError",
    "RateLimited",
    "TransportError",
    "Unauthenticated",
    "Unavailable",
    "UpstreamUsage",
    "Usage",
    "UsageBucket",
    "answer_of",
    "gateway_url",
    "gateway_username",
    "new_idempotency_key",
    "new_session_id",
    "report_ban",
]

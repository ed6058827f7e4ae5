"""The exceptions of proxypool-client.

Every error the client API answers is one JSON body, `{"error": {"code", "message"},
"request_id"}`, with a fixed code; :func:`api_error` turns it into the exception class of
its status, carrying the code, the message, the request id and, on 429 and 503, the
`Retry-After` the server asked for. The gateway's own refusals (bad credentials, a bad
selector, no eligible proxy) carry their code in the `X-Proxypool-Error` header instead:
:class:`GatewayError`.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Type


class ProxypoolError(Exception):
    """Base class of every error this package raises."""


class InvalidArgument(ProxypoolError, ValueError):
    """An argument or setting this package cannot use, named in the message; raised before
    anything is sent, so nothing was charged or changed."""


class TransportError(ProxypoolError):
    """The API could not be reached, or its answer could not be read."""


class ApiError(ProxypoolError):
    """An error answer of the client API.

    Attributes:
        status: the HTTP status.
        code: the API's fixed error code (`invalid_request`, `not_found`, ...).
        message: the API's message, which names the field or header at fault.
        request_id: the answer's request id, to find the request in the server's logs.
        retry_after: seconds the server asked to wait before the same request (429, 503).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.retry_after = retry_after


class InvalidRequest(ApiError):
    """400: a bad field or header; nothing was charged or changed."""


class Unauthenticated(ApiError):
    """401: no valid bearer token."""


class Forbidden(ApiError):
    """403: the client may not do this (an upstream or region it is not allowed)."""


class NotFound(ApiError):
    """404: no such object for this client (also a proxy it may not report on)."""


class Conflict(ApiError):
    """409: `idempotency_conflict`, `idempotency_key_expired`, `insufficient_inventory`
    (an all-or-nothing extraction that could not be met; nothing changed) or `conflict`."""


class RateLimited(ApiError):
    """429: `rate_limited`, `quota_exceeded` or `too_many_requests_in_flight`."""


class Unavailable(ApiError):
    """503: a store could not decide, the server is saturated or the request timed out."""


_BY_STATUS: Mapping[int, Type[ApiError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: RateLimited,
    503: Unavailable,
}


def retry_after_seconds(value: Optional[str]) -> Optional[float]:
    """`Retry-After` as seconds (proxypool sends whole seconds); None when absent or not a
    number of seconds (an HTTP date is not something proxypool sends)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def api_error(status: int, body: Any, headers: Mapping[str, str]) -> ApiError:
    """The exception for an error answer: `body` is its decoded JSON (or anything else when
    the answer was not the API's JSON, e.g. from a balancer in front of it)."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code", "unknown"))
        message = str(error.get("message", ""))
    else:
        code, message = "unknown", "the answer is not the API's error body"
    request_id = body.get("request_id") if isinstance(body, dict) else None
    cls = _BY_STATUS.get(status, ApiError)
    return cls(
        status,
        code,
        message,
        request_id=str(request_id) if request_id is not None else None,
        retry_after=retry_after_seconds(headers.get("Retry-After")),
    )


class GatewayError(ProxypoolError):
    """The gateway refused a request itself (its answer names the code in
    `X-Proxypool-Error`): `auth_required`, `bad_selector`, `no_eligible_proxy`,
    `domain_cooling_down`, ...

    Attributes:
        status: the HTTP status the gateway answered.
        code: the `X-Proxypool-Error` code.
        message: the gateway's text, which names the problem.
        retry_after: seconds to wait, when the gateway said (503).
    """

    def __init__(
        self, status: int, code: str, message: str, retry_after: Optional[float] = None
    ) -> None:
        super().__init__(f"gateway refused ({status} {code}): {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after

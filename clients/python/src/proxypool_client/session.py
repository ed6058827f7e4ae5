"""`requests` through the gateway: :class:`GatewaySession`, a `requests.Session` whose
every request goes through the gateway, and that reports the bans sites answer with.

On a ban status (403 and 429 unless told otherwise) the session reports the proxy that
carried the answer, by the id and ticket the gateway put in its headers, to
`POST /v1/feedback` (see :mod:`proxypool_client.bans`), then hands the answer back as it
came: whether to try again is the caller's choice (through a rotating gateway the next
request takes another proxy; a sticky session is moved off the proxy by the gateway, which
saw the ban too). Refusals of the gateway's own (wrong password, a bad selector, no
eligible proxy) raise :class:`~proxypool_client.errors.GatewayError` with their code.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Deque, Iterable, Optional, Union

import requests

from .api import Client
from .bans import BanReport, report_ban
from .errors import GatewayError, InvalidArgument, retry_after_seconds
from .gateway import GatewayAnswer, gateway_url


def answer_of(response: requests.Response) -> GatewayAnswer:
    """The gateway's `X-Proxypool-*` headers of a `requests` answer."""
    return GatewayAnswer.from_headers(response.headers.get)


class GatewaySession(requests.Session):
    """A `requests.Session` through the gateway.

    Args:
        client, password, host, port: the gateway, as for
            :func:`~proxypool_client.gateway.gateway_url`.
        api: the :class:`~proxypool_client.api.Client` bans are reported with; None
            reports nothing (bans are still recorded).
        ban_statuses: the site statuses that mean a ban.
        raise_gateway_errors: raise :class:`GatewayError` on the gateway's own refusals
            (otherwise they come back as answers, with `X-Proxypool-Error`).
        on_ban: called with each banned answer and its :class:`BanReport`.
        keep_bans: how many of the latest reports :attr:`bans` keeps.
        selectors: the username selectors of :func:`gateway_url` (`region`, `city`,
            `session`, `rotate`, ...).

    Proxies and settings from the environment are not used (`trust_env` is off): every
    request goes through the gateway, whatever `HTTP_PROXY` or `NO_PROXY` say.
    """

    def __init__(
        self,
        client: str,
        password: str,
        host: str = "127.0.0.1",
        port: int = 18080,
        *,
        api: Optional[Client] = None,
        ban_statuses: Iterable[int] = (403, 429),
        raise_gateway_errors: bool = True,
        on_ban: Optional[Callable[[requests.Response, BanReport], None]] = None,
        keep_bans: int = 100,
        **selectors: Any,
    ) -> None:
        super().__init__()
        statuses = frozenset(ban_statuses)
        if not all(isinstance(s, int) and 100 <= s <= 599 for s in statuses):
            raise InvalidArgument(f"ban_statuses must be HTTP statuses, got {sorted(statuses, key=str)!r}")
        self.proxy_url = gateway_url(client, password, host, port, **selectors)
        self.session_id: Optional[str] = selectors.get("session")
        self.api = api
        self.ban_statuses = statuses
        self.raise_gateway_errors = raise_gateway_errors
        self.on_ban = on_ban
        self.bans: Deque[BanReport] = deque(maxlen=keep_bans)
        self.trust_env = False
        self.proxies.update({"http": self.proxy_url, "https": self.proxy_url})

    def __repr__(self) -> str:
        # The password stays out of logs.
        return f"GatewaySession(session={self.session_id!r})"

    def request(
        self, method: Union[str, bytes], url: Union[str, bytes], *args: Any, **kwargs: Any
    ) -> requests.Response:
        """`requests.Session.request`, then the gateway's refusal raised or the ban
        reported as the class doc says."""
        response = super().request(method, url, *args, **kwargs)
        answer = answer_of(response)
        if answer.error is not None:
            if self.raise_gateway_errors:
                raise GatewayError(
                    response.status_code,
                    answer.error,
                    response.text.strip(),
                    retry_after_seconds(response.headers.get("Retry-After")),
                )
            return response
        if response.status_code in self.ban_statuses:
            report = report_ban(self.api, answer, response.status_code, response.url, session=self.session_id)
            self.bans.append(report)
            if self.on_ban is not None:
                self.on_ban(response, report)
        return response

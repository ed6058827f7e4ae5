"""`requests` through the gateway: :class:`GatewaySession`, a `requests.Session` whose
every request goes through the gateway, and that reports the bans sites answer with.

On a ban status (403 and 429 unless told otherwise) the session reports the proxy that
carried the answer, by the id and ticket the gateway put in its headers, to
`POST /v1/feedback` (see :mod:`proxypool_client.bans`), then hands the answer back as it
came: whether to try again is the caller's choice (through a rotating gateway the next
request takes another proxy; a sticky session is moved off the proxy by the gateway, which
saw the ban too). Refusals of the gateway's own (wrong password, a bad selector, no
eligible proxy) raise :class:`~proxypool_client.errors.GatewayError` with their code.

https: `requests` sends an https URL through the gateway as a `CONNECT` tunnel. A plain
tunnel carries TLS from this process to the site, so the gateway cannot name the proxy in
the answer (the headers are the site's own) and a ban is reported by sticky session, or
not at all without one. With `inspect=True` (a client whose `inspection` is `allowed`)
the gateway ends the TLS itself with a certificate from its own CA and forwards each
request, so an https answer carries the proxy id and ticket as a plain-http one does, and
a ban is reported by proxy id. The session must then trust the gateway's CA: `verify` is
the one CA bundle `requests` checks every certificate of this session against, so it
must hold the gateway's CA, the public roots for sites on the gateway's bypass list (they
are tunnelled as they are), and, with `scheme="https"`, the CA of the gateway's TLS
listener::

    cat "$(python -m certifi)" gateway-ca.pem > bundle.pem   # public roots + the gateway's CA

Never `verify=False`: it would accept anyone between this process and the gateway.

Through the TLS listener `requests` alone would check the listener's certificate only for
https URLs: for an http URL it turns verification off on the connection, which is then
the TLS link to the proxy (its `cert_verify` looks at the URL's scheme alone). The
session's adapters keep it on: every request through the listener checks its certificate
against `verify`.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any, Callable, Deque, Iterable, Optional, Union

import requests
from requests.adapters import HTTPAdapter

from .api import Client
from .bans import BanReport, report_ban
from .errors import GatewayError, InvalidArgument, retry_after_seconds
from .gateway import GatewayAnswer, gateway_url


def answer_of(response: requests.Response) -> GatewayAnswer:
    """The gateway's `X-Proxypool-*` headers of a `requests` answer."""
    return GatewayAnswer.from_headers(response.headers.get)


class _ProxyVerifyingAdapter(HTTPAdapter):
    """An adapter that checks an https proxy's certificate for http URLs too (see the
    module doc)."""

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # For an http URL through an https proxy the pool is the TLS link to the proxy:
        # verify it as requests verifies an https URL's server.
        if getattr(conn, "scheme", None) == "https" and not url.lower().startswith("https"):
            url = "https" + url[url.index(":"):]
        super().cert_verify(conn, url, verify, cert)


class GatewaySession(requests.Session):
    """A `requests.Session` through the gateway.

    Args:
        client, password, host, port: the gateway, as for
            :func:`~proxypool_client.gateway.gateway_url`; `scheme="https"` (a selector
            keyword) reaches its TLS listener.
        api: the :class:`~proxypool_client.api.Client` bans are reported with; None
            reports nothing (bans are still recorded).
        ban_statuses: the site statuses that mean a ban.
        raise_gateway_errors: raise :class:`GatewayError` on the gateway's own refusals
            (otherwise they come back as answers, with `X-Proxypool-Error`).
        on_ban: called with each banned answer and its :class:`BanReport`.
        keep_bans: how many of the latest reports :attr:`bans` keeps.
        verify: the CA bundle (a file or directory) every certificate is checked against,
            see the module doc; True: the public roots (`requests`' default).
        selectors: the username selectors of :func:`gateway_url` (`region`, `city`,
            `session`, `rotate`, `inspect`, ...).

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
        verify: Union[bool, str, "os.PathLike[str]"] = True,
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
        if isinstance(verify, os.PathLike):
            verify = os.fspath(verify)
        if verify is not True and not (isinstance(verify, str) and verify):
            raise InvalidArgument(
                f"verify must be a CA bundle's path (or True for the public roots), got {verify!r}"
            )
        self.verify = verify
        if self.proxy_url.startswith("https:"):
            for prefix in ("http://", "https://"):
                self.mount(prefix, _ProxyVerifyingAdapter())
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

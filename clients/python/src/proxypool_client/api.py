"""The client API: exclusive extraction, feedback with tickets, usage.

:class:`Client` speaks `POST /v1/extractions`, `GET /v1/extractions/{id}`,
`POST /v1/feedback`, `GET /v1/usage` and `GET /v1/me` with the client's bearer token.

Retries, as the API asks a client to make them: a 429 or 503 carries `Retry-After`, and
the same request is sent again after that many seconds, up to `retries` times, but only
when the wait is at most `max_retry_wait` (a quota window that resets in ten minutes is
an error to show, not a wait to hide). A lost connection is retried only for requests
that cannot act twice: reads, and extractions, which always carry an `Idempotency-Key` (a
random one unless the caller gives theirs), so a retry is answered with the stored
extraction instead of taking more proxies. Feedback without a replacement has no key, so
its lost answer is raised rather than risk striking a proxy twice.

The API is reached directly: proxies from the environment (`HTTP_PROXY`, often the
gateway itself in a scraper's environment) are not used unless `trust_env=True`.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import requests

from ._version import __version__
from .errors import InvalidArgument, TransportError, api_error, retry_after_seconds
from .models import Extraction, Feedback, Me, Usage

MODES = ("partial", "all_or_nothing")
VERDICTS = ("banned", "captcha", "slow", "ok")
PROTOCOLS = ("http", "https", "socks5")

# The API's pattern for Idempotency-Key; a bad key is refused here, before any request.
_IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,254}$")


def new_idempotency_key() -> str:
    """A fresh random `Idempotency-Key`."""
    return f"ppc-{uuid.uuid4().hex}"


class Client:
    """A client of proxypool's client API.

    Args:
        api_url: the client API's base URL (`http://127.0.0.1:17080`).
        token: the client's API token (sent as `Authorization: Bearer`).
        ca: a CA bundle (PEM file) the API's certificate must chain to, for an API behind
            TLS with a private CA; None trusts the system's roots.
        timeout: seconds to wait for each answer.
        retries: how many times a 429/503 (or a lost connection, where safe) is retried.
        max_retry_wait: the longest `Retry-After` (seconds) worth waiting for; a longer
            one is raised at once with its `retry_after`.
        trust_env: use proxies and settings from the environment for the API's calls.

    A client may be shared between threads: each thread gets its own connection pool.
    """

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        ca: Optional[str] = None,
        timeout: float = 10.0,
        retries: int = 3,
        max_retry_wait: float = 10.0,
        trust_env: bool = False,
    ) -> None:
        if not isinstance(api_url, str) or not re.match(r"^https?://[^/]+", api_url):
            raise InvalidArgument(f"api_url must be an http:// or https:// URL, got {api_url!r}")
        if not isinstance(token, str) or not token.strip():
            raise InvalidArgument("token must be the client's API token")
        if ca is not None and not os.path.isfile(ca):
            raise InvalidArgument(f"ca: no such file {ca!r}")
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise InvalidArgument(f"retries must be a whole number >= 0, got {retries!r}")
        if not timeout > 0:
            raise InvalidArgument(f"timeout must be above 0 seconds, got {timeout!r}")
        if not max_retry_wait >= 0:
            raise InvalidArgument(f"max_retry_wait must be >= 0 seconds, got {max_retry_wait!r}")
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.max_retry_wait = max_retry_wait
        self._token = token
        self._verify: Union[str, bool] = ca if ca is not None else True
        self._trust_env = trust_env
        self._local = threading.local()

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, **kwargs: Any) -> "Client":
        """A client from `PROXYPOOL_API` (default `http://127.0.0.1:17080`),
        `PROXYPOOL_TOKEN` and, when set, `PROXYPOOL_CA`."""
        env = os.environ if environ is None else environ
        token = env.get("PROXYPOOL_TOKEN")
        if not token:
            raise InvalidArgument("PROXYPOOL_TOKEN is not set")
        kwargs.setdefault("ca", env.get("PROXYPOOL_CA") or None)
        return cls(env.get("PROXYPOOL_API", "http://127.0.0.1:17080"), token, **kwargs)

    def __repr__(self) -> str:
        # The token stays out of logs and tracebacks.
        return f"Client({self.api_url!r})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes this thread's connections (other threads' close when they end)."""
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None

    # -- the routes -------------------------------------------------------------------

    def extract(
        self,
        count: int = 1,
        mode: str = "partial",
        *,
        protocol: Optional[str] = None,
        region: Optional[str] = None,
        country: Optional[str] = None,
        city: Optional[str] = None,
        state: Optional[str] = None,
        asn: Optional[Union[str, int]] = None,
        carrier: Optional[str] = None,
        upstream: Optional[str] = None,
        min_health_freshness_ms: Optional[int] = None,
        for_domain: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Extraction:
        """Takes `count` proxies for this client alone (`POST /v1/extractions`).

        `mode` is `partial` (as many as there are, maybe none) or `all_or_nothing`
        (:class:`~proxypool_client.errors.Conflict` `insufficient_inventory` when fewer
        match; nothing taken). The filters match the proxies' labels (`country` is
        `region`'s other name; give one); `for_domain` skips proxies cooling down for that
        site. The request always carries an `Idempotency-Key` (`idempotency_key`, or a
        random one): the same key and body get the same answer, charged once, and the
        returned :class:`Extraction` says so in `replayed`.
        """
        body: Dict[str, Any] = {"count": _count(count), "mode": _choice("mode", mode, MODES)}
        filters = _filters(
            protocol=protocol,
            region=region,
            country=country,
            city=city,
            state=state,
            asn=asn,
            carrier=carrier,
            upstream=upstream,
        )
        if filters:
            body["filters"] = filters
        if min_health_freshness_ms is not None:
            body["min_health_freshness_ms"] = _whole("min_health_freshness_ms", min_health_freshness_ms)
        if for_domain is not None:
            body["for_domain"] = for_domain
        key = _key(idempotency_key) or new_idempotency_key()
        answer, headers = self._call(
            "POST", "/v1/extractions", body=body, headers={"Idempotency-Key": key}, replayable=True
        )
        return Extraction.from_json(answer, replayed=headers.get("Idempotent-Replayed") == "true")

    def extraction(self, extraction_id: str) -> Extraction:
        """This client's extraction while the server keeps it (`GET /v1/extractions/{id}`)."""
        if not re.match(r"^ex_[0-9a-f]{32}$", extraction_id or ""):
            raise InvalidArgument(f"extraction id must be ex_ and 32 hex digits, got {extraction_id!r}")
        answer, _ = self._call("GET", f"/v1/extractions/{extraction_id}", replayable=True)
        return Extraction.from_json(answer)

    def feedback(
        self,
        domain: str,
        verdict: str = "banned",
        *,
        proxy_id: Optional[str] = None,
        ticket: Optional[str] = None,
        session: Optional[str] = None,
        ttl: Optional[str] = None,
        return_proxy: bool = False,
        replacement: Union[None, int, Mapping[str, Any]] = None,
        idempotency_key: Optional[str] = None,
    ) -> Feedback:
        """Tells what `domain` did through a proxy (`POST /v1/feedback`).

        Name the proxy by `proxy_id` (one this client extracted, or one a gateway answer
        named in `X-Proxypool-Proxy`, then with that answer's `X-Proxypool-Ticket` as
        `ticket`) or by the gateway sticky `session` it rode (the `S` of `-session-S`).
        `verdict`: `banned` or `captcha` (the cooldown grows), `slow`, `ok` (the cooldown
        ends). `ttl` (`"30s"`, `"10m"`) is the client's own estimate of the cooldown.
        `return_proxy` gives an extracted proxy back as bad; `replacement` (a count, or an
        extraction body as for :meth:`extract`'s JSON) extracts a new one in the same call,
        keyed by `idempotency_key` (random unless given).
        """
        if (proxy_id is None) == (session is None):
            raise InvalidArgument("feedback needs exactly one of proxy_id and session")
        if ticket is not None and proxy_id is None:
            raise InvalidArgument("ticket goes only with proxy_id")
        if return_proxy and proxy_id is None:
            raise InvalidArgument("return_proxy needs proxy_id (only an extracted proxy is returned)")
        _choice("verdict", verdict, VERDICTS)
        if verdict == "ok" and (return_proxy or ttl is not None):
            raise InvalidArgument("verdict ok takes neither return_proxy nor ttl")
        if not isinstance(domain, str) or not domain:
            raise InvalidArgument("domain must name the site (a host name, an address or a URL)")
        body: Dict[str, Any] = {"domain": domain, "verdict": verdict}
        if proxy_id is not None:
            body["proxy_id"] = proxy_id
        if ticket is not None:
            body["ticket"] = ticket
        if session is not None:
            body["session"] = session
        if ttl is not None:
            body["ttl"] = ttl
        if return_proxy:
            body["return"] = True
        headers: Dict[str, str] = {}
        if replacement is not None:
            body["replacement"] = (
                {"count": _count(replacement)} if isinstance(replacement, int) else dict(replacement)
            )
            headers["Idempotency-Key"] = _key(idempotency_key) or new_idempotency_key()
        elif idempotency_key is not None:
            raise InvalidArgument("idempotency_key keys a replacement; there is none")
        answer, _ = self._call("POST", "/v1/feedback", body=body, headers=headers, replayable=False)
        return Feedback.from_json(answer)

    def report_ban(
        self,
        proxy_id: str,
        domain: str,
        ticket: Optional[str] = None,
        *,
        verdict: str = "banned",
        ttl: Optional[str] = None,
    ) -> Feedback:
        """Reports that `domain` banned the proxy: :meth:`feedback` by `proxy_id`."""
        return self.feedback(domain, verdict, proxy_id=proxy_id, ticket=ticket, ttl=ttl)

    def return_proxy(
        self,
        proxy_id: str,
        domain: str,
        *,
        verdict: str = "banned",
        replacement: Union[None, int, Mapping[str, Any]] = None,
        idempotency_key: Optional[str] = None,
    ) -> Feedback:
        """Gives an extracted proxy back as bad for `domain`, with a `replacement` if asked.
        The extraction then shows it `returned`, without its credentials; nobody else gets
        it until its hard expiry unless the vendor re-issues it."""
        return self.feedback(
            domain,
            verdict,
            proxy_id=proxy_id,
            return_proxy=True,
            replacement=replacement,
            idempotency_key=idempotency_key,
        )

    def usage(self, client: Optional[str] = None) -> Usage:
        """Usage per client and upstream (`GET /v1/usage`): this client's own, or for an
        admin every client's (one with `client`)."""
        params = {"client": client} if client is not None else None
        answer, _ = self._call("GET", "/v1/usage", params=params, replayable=True)
        return Usage.from_json(answer)

    def me(self) -> Me:
        """The client the token belongs to (`GET /v1/me`)."""
        answer, _ = self._call("GET", "/v1/me", replayable=True)
        return Me.from_json(answer)

    # -- one call, with its retries ------------------------------------------------------

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.trust_env = self._trust_env
            session.headers.update(
                {
                    "Authorization": f"Bearer {self._token}",
                    "Accept": "application/json",
                    "User-Agent": f"proxypool-client/{__version__}",
                }
            )
            self._local.session = session
        return session

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Optional[Mapping[str, Any]] = None,
        params: Optional[Mapping[str, str]] = None,
        headers: Optional[Mapping[str, str]] = None,
        replayable: bool,
    ) -> Tuple[Any, Mapping[str, str]]:
        """Sends one request, retrying as the module doc says; (JSON answer, headers)."""
        attempt = 0
        while True:
            try:
                answer = self._session().request(
                    method,
                    self.api_url + path,
                    json=body,
                    params=params,
                    headers=headers,
                    timeout=self.timeout,
                    verify=self._verify,
                )
            except requests.RequestException as failure:
                if replayable and attempt < self.retries:
                    # Nothing told us how long: a short backoff that doubles.
                    time.sleep(min(0.25 * 2**attempt, max(self.max_retry_wait, 0.25)))
                    attempt += 1
                    continue
                raise TransportError(f"{method} {path}: {failure}") from failure
            if answer.status_code in (429, 503) and attempt < self.retries:
                wait = _retry_after(answer)
                if wait <= self.max_retry_wait:
                    time.sleep(wait)
                    attempt += 1
                    continue
            try:
                decoded = answer.json()
            except ValueError:
                decoded = None
            if 200 <= answer.status_code < 300:
                if decoded is None:
                    raise TransportError(f"{method} {path}: the answer is not JSON")
                return decoded, answer.headers
            raise api_error(answer.status_code, decoded, answer.headers)


def _retry_after(answer: requests.Response) -> float:
    # proxypool always sends it on 429 and 503; a missing one (a balancer's 503) waits 1 s.
    seconds = retry_after_seconds(answer.headers.get("Retry-After"))
    return 1.0 if seconds is None else seconds


def _count(count: Any) -> int:
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise InvalidArgument(f"count must be a whole number >= 1, got {count!r}")
    return count


def _whole(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(f"{name} must be a whole number >= 0, got {value!r}")
    return value


def _choice(name: str, value: Any, allowed: Tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidArgument(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _key(key: Optional[str]) -> Optional[str]:
    if key is not None and not _IDEMPOTENCY_KEY.match(key):
        raise InvalidArgument(
            "idempotency_key must be 1-255 characters of [A-Za-z0-9._:/-] starting with a letter or digit"
        )
    return key


def _filters(**given: Any) -> Dict[str, Any]:
    if given.get("region") is not None and given.get("country") is not None:
        raise InvalidArgument("region and country are one filter (country is region's other name): give one")
    if given.get("protocol") is not None:
        _choice("protocol", given["protocol"], PROTOCOLS)
    # The server reads the values as written (any case, `AS7922` or 7922) and names a bad
    # one in its 400.
    return {name: str(value) for name, value in given.items() if value is not None}

"""Scrapy through the gateway: a downloader middleware and the add-on that turns it on.

Enable it in a project's settings (Scrapy 2.10 or later)::

    ADDONS = {"proxypool_client.scrapy.Addon": 0}
    PROXYPOOL_GATEWAY = "127.0.0.1:18080"     # the gateway's HTTP listener
    PROXYPOOL_USERNAME = "dev"                # the client id
    PROXYPOOL_PASSWORD = "..."                # the gateway password
    PROXYPOOL_API = "http://127.0.0.1:17080"  # the client API (to report bans)
    PROXYPOOL_TOKEN = "..."                   # the API token

Every request goes through the gateway, which rotates it over its proxies. When a site
answers with a ban status the middleware reports it (:mod:`proxypool_client.bans`: by the
proxy id and ticket of the answer's headers, or by sticky session inside a plain HTTPS
tunnel) and retries the request; through the rotating gateway (or a session the gateway
moves off the banned proxy) the retry leaves from another exit. The spider can read every ban a
request met in `response.meta["proxypool_bans"]` (a list of
:class:`~proxypool_client.bans.BanReport`).

Optional settings:

- `PROXYPOOL_SELECTORS`: username selectors for every request, as the keyword arguments of
  :func:`~proxypool_client.gateway.gateway_username` (`{"country": "us", "rotate": 5}`);
  a request's `meta["proxypool_selectors"]` adds to them.
- `PROXYPOOL_SESSION`: `None` (default: rotate), `"spider"` (one sticky session, so one
  exit, per spider run) or a session id of your own.
- `PROXYPOOL_SESSION_META_KEY` (default `"proxypool_session"`): a request whose meta has
  this key rides the session it names (requests naming one session share its exit), or
  rotates when it is `None`.
- `PROXYPOOL_BAN_STATUSES` (default `[403, 429]`), `PROXYPOOL_BAN_RETRIES` (default 5;
  a ban past them reaches the spider, and Scrapy's RetryMiddleware does not retry it).
- `PROXYPOOL_REPORT_BANS` (default True; without it, API and token are not needed),
  `PROXYPOOL_CA` (the API's CA bundle).

https with inspection: with `PROXYPOOL_SELECTORS = {"inspect": True}` (a client whose
`inspection` is `allowed`) the gateway ends each https tunnel itself with a certificate
from its own CA and forwards the requests inside, so https answers carry the proxy id and
ticket and bans are reported by proxy id, as for plain http. Scrapy does not verify
certificates unless `DOWNLOAD_VERIFY_CERTIFICATES = True`; with it, Scrapy trusts
OpenSSL's default store, so give that store the gateway's CA: install the CA into the
system's store, or point `SSL_CERT_FILE` (in the crawl's environment) at a bundle of the
public roots and the gateway's CA. Scrapy has no setting for a CA bundle of its own.

The gateway's TLS listener (`https://`) cannot be used: Scrapy's HTTP/1.1 download
handler does not send https requests through an https proxy. `PROXYPOOL_GATEWAY` is the
plain listener's `HOST:PORT`.

Stats: `proxypool/bans`, `proxypool/feedback/<status>` (0 when nothing could be sent),
`proxypool/unattributed_bans`, `proxypool/ban_retry/...` (Scrapy's retry counters).

A request that names its own `meta["proxy"]` (or None, for none) keeps it. The
middleware's priority (740) is below 750, so Scrapy's HttpProxyMiddleware turns the
credentials of `meta["proxy"]` into the `Proxy-Authorization` header.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from scrapy import signals
from scrapy.downloadermiddlewares.retry import get_retry_request
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from .api import Client
from .bans import BanReport, report_ban
from .errors import InvalidArgument
from .gateway import GatewayAnswer, check_selector_keys, gateway_url, split_address

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.settings import BaseSettings

PRIORITY = 740
# Marks a request whose proxy this middleware set, so its retries get a fresh URL (a
# `-newip`) while a request's own proxy is left alone. A flag, not the URL: Scrapy's
# HttpProxyMiddleware rewrites `meta["proxy"]` without its credentials.
_OURS = "_proxypool_proxy"
_NEWIP = "_proxypool_newip"


class ProxypoolMiddleware:
    """The downloader middleware (see the module doc for its settings)."""

    def __init__(self, crawler: "Crawler") -> None:
        settings = crawler.settings
        self.crawler = crawler

        def required(name: str) -> str:
            value = settings.get(name)
            if not value or not isinstance(value, str):
                raise InvalidArgument(f"{name} is required by proxypool_client.scrapy")
            return value

        if not settings.getbool("HTTPPROXY_ENABLED", True):
            raise InvalidArgument("HTTPPROXY_ENABLED is off: Scrapy would not send the gateway's credentials")
        gateway = required("PROXYPOOL_GATEWAY")
        if "://" in gateway:
            raise InvalidArgument(
                f"PROXYPOOL_GATEWAY is the gateway's plain listener as HOST:PORT, got {gateway!r} "
                "(Scrapy cannot send https requests through the gateway's TLS listener)"
            )
        self.gateway = split_address(gateway)
        self.client = required("PROXYPOOL_USERNAME")
        self.password = required("PROXYPOOL_PASSWORD")
        self.selectors: Dict[str, Any] = dict(settings.getdict("PROXYPOOL_SELECTORS"))
        check_selector_keys("PROXYPOOL_SELECTORS", self.selectors)
        self.meta_key = settings.get("PROXYPOOL_SESSION_META_KEY", "proxypool_session")
        self.spider_session: Optional[str] = settings.get("PROXYPOOL_SESSION") or None
        try:
            self.ban_statuses = {int(s) for s in settings.getlist("PROXYPOOL_BAN_STATUSES", [403, 429])}
            self.ban_retries = settings.getint("PROXYPOOL_BAN_RETRIES", 5)
        except ValueError as bad:
            raise InvalidArgument(f"PROXYPOOL_BAN_STATUSES / PROXYPOOL_BAN_RETRIES: {bad}") from None
        if self.ban_retries < 0:
            raise InvalidArgument(f"PROXYPOOL_BAN_RETRIES must be >= 0, got {self.ban_retries}")
        self.api: Optional[Client] = None
        if settings.getbool("PROXYPOOL_REPORT_BANS", True):
            self.api = Client(
                required("PROXYPOOL_API"), required("PROXYPOOL_TOKEN"), ca=settings.get("PROXYPOOL_CA") or None
            )
        # Every value is checked now, so a typo stops the crawl before any request.
        self.proxy_for(None, {}, newip=False)
        if self.spider_session not in (None, "spider"):
            self.proxy_for(self.spider_session, {}, newip=False)

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "ProxypoolMiddleware":
        middleware = cls(crawler)
        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        return middleware

    def spider_opened(self, spider: "Spider") -> None:
        if self.spider_session == "spider":
            # One session per run: the spider's name (what the session grammar allows of
            # it) and a random part, so two runs never share an exit by accident.
            name = re.sub(r"[^A-Za-z0-9_.]", "_", spider.name)[:40] or "spider"
            self.spider_session = f"{name}_{uuid.uuid4().hex[:12]}"

    def proxy_for(self, session: Optional[str], extra: Dict[str, Any], newip: bool) -> str:
        """The gateway URL for one request."""
        selectors = {**self.selectors, **extra}
        if "session" in selectors:
            raise InvalidArgument(
                f"selectors take no session: sessions are set with PROXYPOOL_SESSION or meta[{self.meta_key!r}]"
            )
        newip = bool(selectors.pop("newip", False)) or newip
        return gateway_url(
            self.client, self.password, session=session, newip=newip, **self.gateway, **selectors
        )

    def session_of(self, request: "Request") -> Optional[str]:
        """The sticky session a request rides: its meta's, else the spider's."""
        if self.meta_key in request.meta:
            value = request.meta[self.meta_key]
            return None if value is None else str(value)
        return None if self.spider_session == "spider" else self.spider_session

    def process_request(self, request: "Request", spider: "Optional[Spider]" = None) -> None:
        if "proxy" in request.meta and not request.meta.get(_OURS):
            return
        extra = request.meta.get("proxypool_selectors") or {}
        check_selector_keys('meta["proxypool_selectors"]', extra)
        url = self.proxy_for(self.session_of(request), dict(extra), bool(request.meta.get(_NEWIP)))
        request.meta["proxy"] = url
        request.meta[_OURS] = True

    async def process_response(
        self, request: "Request", response: "Response", spider: "Optional[Spider]" = None
    ) -> Union["Request", "Response"]:
        if response.status not in self.ban_statuses or not request.meta.get(_OURS):
            return response
        answer = GatewayAnswer.from_headers(lambda name: _header(response, name))
        if answer.error is not None:
            # The gateway's own refusal (credentials, selectors, every proxy cooling
            # down for the site): not a site's ban, nothing to report or retry here.
            return response
        session = self.session_of(request)
        # A blocking call, in a thread: the crawl goes on meanwhile.
        report: BanReport = await maybe_deferred_to_future(
            deferToThread(self.report_ban_blocking, request, response, answer, session)
        )
        return self.after_ban(request, response, answer, session, report, spider or self.crawler.spider)

    def after_ban(
        self,
        request: "Request",
        response: "Response",
        answer: GatewayAnswer,
        session: Optional[str],
        report: BanReport,
        spider: "Optional[Spider]",
    ) -> Union["Request", "Response"]:
        """Records the ban's report in the request's meta; then the retry, or the banned
        answer once the request is out of retries."""
        bans: List[BanReport] = list(request.meta.get("proxypool_bans", []))
        bans.append(report)
        request.meta["proxypool_bans"] = bans
        if spider is None:
            # Not in a crawl (nothing to retry for): the answer as it came.
            return response
        retry = get_retry_request(
            request,
            spider=spider,
            reason=f"banned ({response.status})",
            max_retry_times=self.ban_retries,
            stats_base_key="proxypool/ban_retry",
        )
        if retry is None:
            # Out of retries: the spider gets the ban itself, not a retry of Scrapy's
            # RetryMiddleware (which would retry a 429 through the gateway again).
            request.meta["dont_retry"] = True
            return response
        # In a session the gateway moves off a proxy it saw banned; inside a tunnel it saw
        # nothing, so the retry asks for another proxy itself.
        retry.meta[_NEWIP] = session is not None and answer.proxy_id is None
        return retry

    def report_ban_blocking(
        self, request: "Request", response: "Response", answer: GatewayAnswer, session: Optional[str]
    ) -> BanReport:
        """Reports one ban and counts it (blocking: run in a thread)."""
        report = report_ban(self.api, answer, response.status, request.url, session=session)
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value("proxypool/bans")
            stats.inc_value(f"proxypool/feedback/{report.feedback_status}")
            if report.error == "unattributed":
                stats.inc_value("proxypool/unattributed_bans")
        if self.crawler.spider is not None:
            self.crawler.spider.logger.info("proxypool: ban %s", report)
        return report


class Addon:
    """The Scrapy add-on: `ADDONS = {"proxypool_client.scrapy.Addon": 0}` turns
    :class:`ProxypoolMiddleware` on at priority 740 (unless the project placed it itself)."""

    def update_settings(self, settings: "BaseSettings") -> None:
        setdefault = getattr(settings, "setdefault_in_component_priority_dict", None)
        if setdefault is not None:
            setdefault("DOWNLOADER_MIDDLEWARES", ProxypoolMiddleware, PRIORITY)
        else:
            # Scrapy before 2.13: the dictionary setting is changed in place.
            middlewares = settings["DOWNLOADER_MIDDLEWARES"]
            if ProxypoolMiddleware not in middlewares and _PATH not in middlewares:
                middlewares[ProxypoolMiddleware] = PRIORITY


_PATH = f"{ProxypoolMiddleware.__module__}.{ProxypoolMiddleware.__qualname__}"


def _header(response: "Response", name: str) -> Optional[str]:
    value = response.headers.get(name)
    return value.decode("latin-1") if value is not None else None

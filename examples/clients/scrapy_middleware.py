"""A Scrapy downloader middleware that sends every request through the proxypool gateway
and, when a site answers with a ban status, reports the proxy that carried the answer to
`POST /v1/feedback` and retries the request, which the gateway then routes through
another proxy.

On plain HTTP the gateway already sends a banned bodyless GET again, once, through another
proxy; what reaches this middleware there are bans on requests with a body (the gateway
never sends those twice) and bans the gateway's retry met too. On https:// pages Scrapy
keeps the gateway's CONNECT answer, which carries the proxy id and the ticket, to itself:
a ban there is retried (the gateway rotates) but cannot be reported by proxy, and is
counted in the stat `proxypool/unattributed_bans`.

Enable it in your project's settings:

    DOWNLOADER_MIDDLEWARES = {"scrapy_middleware.ProxypoolMiddleware": 740}
    PROXYPOOL_GATEWAY = "127.0.0.1:18080"     # the gateway's HTTP listener
    PROXYPOOL_USERNAME = "dev"                # the client id, selectors allowed
    PROXYPOOL_PASSWORD = "..."                # the gateway password
    PROXYPOOL_API = "http://127.0.0.1:17080"  # the client API
    PROXYPOOL_TOKEN = "..."                   # the API token
    PROXYPOOL_BAN_STATUSES = [403, 429]       # optional
    PROXYPOOL_BAN_RETRIES = 5                 # optional: retries after bans, per request

Its priority must stay below 750, so Scrapy's HttpProxyMiddleware turns the credentials
in `meta["proxy"]` into the `Proxy-Authorization` header. It needs the asyncio reactor,
Scrapy's default: a report waits in a thread through asyncio.
"""

import asyncio
import json
import urllib.error
import urllib.request
from urllib.parse import quote, urlparse

from scrapy.downloadermiddlewares.retry import get_retry_request
from scrapy.exceptions import NotConfigured


class ProxypoolMiddleware:
    def __init__(self, crawler):
        settings = crawler.settings
        self.crawler = crawler
        self.gateway = settings.get("PROXYPOOL_GATEWAY")
        self.username = settings.get("PROXYPOOL_USERNAME")
        self.password = settings.get("PROXYPOOL_PASSWORD")
        self.api = settings.get("PROXYPOOL_API", "").rstrip("/")
        self.token = settings.get("PROXYPOOL_TOKEN")
        if not all((self.gateway, self.username, self.password, self.api, self.token)):
            raise NotConfigured("PROXYPOOL_GATEWAY, _USERNAME, _PASSWORD, _API and _TOKEN are required")
        self.ban_statuses = {int(s) for s in settings.getlist("PROXYPOOL_BAN_STATUSES", [403, 429])}
        self.ban_retries = settings.getint("PROXYPOOL_BAN_RETRIES", 5)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def process_request(self, request):
        # A request that names its own proxy (or None for none) keeps it.
        request.meta.setdefault(
            "proxy",
            f"http://{quote(self.username, safe='')}:{quote(self.password, safe='')}@{self.gateway}",
        )

    async def process_response(self, request, response):
        if response.status not in self.ban_statuses:
            return response
        proxy_id = response.headers.get("X-Proxypool-Proxy")
        if proxy_id is None:
            self.crawler.stats.inc_value("proxypool/unattributed_bans")
        else:
            report = await self.report_ban(request, response, proxy_id.decode())
            request.meta["proxypool_bans"] = request.meta.get("proxypool_bans", []) + [report]
        retry = get_retry_request(
            request,
            spider=self.crawler.spider,
            reason=f"banned ({response.status})",
            max_retry_times=self.ban_retries,
            stats_base_key="proxypool/ban_retry",
        )
        # Out of retries, the spider gets the ban itself.
        return retry or response

    async def report_ban(self, request, response, proxy_id):
        """Reports the proxy the gateway named; what the spider can read about it (the
        retry's `meta["proxypool_bans"]` lists every ban the request met)."""
        ticket = response.headers.get("X-Proxypool-Ticket")
        body = {
            "proxy_id": proxy_id,
            "ticket": ticket.decode() if ticket else None,
            "domain": urlparse(request.url).hostname,
            "verdict": "banned",
        }
        # A blocking call, in a thread: the crawl goes on meanwhile.
        status, answer = await asyncio.to_thread(self.send_feedback, body)
        self.crawler.stats.inc_value(f"proxypool/feedback/{status}")
        report = {
            "proxy": proxy_id,
            "status": response.status,
            "feedback": status,
            "outcome": answer.get("outcome") or answer.get("error", {}).get("code"),
        }
        self.crawler.spider.logger.info("ban reported: %s", report)
        return report

    def send_feedback(self, report):
        """`POST /v1/feedback`: (HTTP status, JSON answer)."""
        feedback = urllib.request.Request(
            f"{self.api}/v1/feedback",
            data=json.dumps(report).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        # The API is reached directly, never through a proxy from the environment.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(feedback, timeout=10) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as refused:
            try:
                return refused.code, json.load(refused)
            except ValueError:
                return refused.code, {}
        except OSError as failure:
            return 0, {"error": {"code": "unreachable", "message": str(failure)}}

"""A Scrapy downloader middleware that sends every request through the proxypool gateway
and, when a site answers with a ban status, reports the proxy that carried the answer to
`POST /v1/feedback` and retries the request, which the gateway then routes through
another proxy.

The gateway already retries a banned bodyless GET once by itself; what reaches this
middleware are bans inside HTTPS tunnels (the gateway cannot see their status), on
requests with a body (never sent twice by the gateway), and bans its retry met too.

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
in `meta["proxy"]` into the `Proxy-Authorization` header.
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
        self.ban_statuses = set(settings.getlist("PROXYPOOL_BAN_STATUSES", [403, 429]))
        self.ban_statuses = {int(status) for status in self.ban_statuses}
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
        ticket = response.headers.get("X-Proxypool-Ticket")
        if proxy_id is None:
            # Not the gateway's answer (a request that named another proxy): nothing to report.
            return response
        proxy_id = proxy_id.decode()
        report = {
            "proxy_id": proxy_id,
            "ticket": ticket.decode() if ticket else None,
            "domain": urlparse(request.url).hostname,
            "verdict": "banned",
        }
        # The report is a blocking call in a thread, so the crawl goes on meanwhile.
        status, answer = await asyncio.to_thread(self.send_feedback, report)
        self.crawler.stats.inc_value(f"proxypool/feedback/{status}")
        reported = {"proxy": proxy_id, "status": response.status, "feedback": status,
                    "outcome": answer.get("outcome") or answer.get("error", {}).get("code")}
        self.crawler.spider.logger.info("ban reported: %s", reported)

        retry = get_retry_request(
            request,
            spider=self.crawler.spider,
            reason=f"banned ({response.status})",
            max_retry_times=self.ban_retries,
            stats_base_key="proxypool/ban_retry",
        )
        if retry is None:
            return response
        # What the spider can read on the final answer: the bans this request met.
        retry.meta["proxypool_bans"] = request.meta.get("proxypool_bans", []) + [reported]
        return retry

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

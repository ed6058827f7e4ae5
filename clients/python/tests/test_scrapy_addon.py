"""The Scrapy add-on against a real `proxypool dev`: enabled by `ADDONS` alone, it rotates
through the gateway, keeps sticky sessions per spider and per request meta key, reports a
ban with the proxy id and ticket and retries it through another proxy, reports a ban it
cannot attribute by session, and refuses bad settings before any request."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List
from urllib.parse import unquote, urlsplit

import pytest
import requests
from scrapy import Request, Spider
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from conftest import Dev, run_crawl
from proxypool_client import BanReport, GatewayAnswer, GatewaySession, InvalidArgument, answer_of, new_session_id
from proxypool_client.scrapy import ProxypoolMiddleware

Crawl = Callable[..., Dict[str, Any]]


def gets(url: str, n: int, **meta: Any) -> List[Dict[str, Any]]:
    return [{"url": f"{url}?n={i}", "meta": dict(meta)} for i in range(n)]


def proxies(items: List[Dict[str, Any]]) -> "set[str]":
    return {item["proxy"] for item in items}


def test_the_addon_alone_rotates_requests_through_the_gateway(crawl: Crawl, dev: Dev) -> None:
    report = crawl({"requests": gets(dev.site, 8)})
    items = report["items"]
    assert report["returncode"] == 0, report["stderr"][-3000:]
    assert [i["status"] for i in items] == [200] * 8
    assert "" not in proxies(items) and len(proxies(items)) > 1, items
    assert len({i["exit"] for i in items}) > 1


def test_sticky_sessions_per_spider_and_per_request_meta_key(crawl: Crawl, dev: Dev) -> None:
    a, b = new_session_id("a"), new_session_id("b")
    planned = (
        gets(dev.site, 6)  # the spider's session
        + gets(dev.site, 6, proxypool_session=None)  # rotating
        + gets(dev.site, 3, proxypool_session=a)
        + gets(dev.site, 3, proxypool_session=b)
    )
    # One request at a time: concurrent first requests of a new session can each be
    # pinned by the gateway (a race on the session's creation this test is not about).
    report = crawl({"requests": planned}, {"PROXYPOOL_SESSION": "spider", "CONCURRENT_REQUESTS": 1})
    assert report["returncode"] == 0, report["stderr"][-3000:]
    items = report["items"]
    assert [i["status"] for i in items] == [200] * 18
    spider, rotating, in_a, in_b = items[:6], items[6:12], items[12:15], items[15:]
    assert len(proxies(spider)) == 1 and len({i["exit"] for i in spider}) == 1, spider
    assert len(proxies(rotating)) > 1, rotating
    assert len(proxies(in_a)) == 1 and len(proxies(in_b)) == 1
    # The meta key's sessions are the gateway's sessions of those names.
    with GatewaySession(dev.client, dev.password, dev.host, dev.port, session=a) as http:
        assert answer_of(http.get(dev.site, timeout=10)).proxy_id in proxies(in_a)


def test_a_ban_is_reported_with_its_ticket_and_retried_through_another_proxy(crawl: Crawl, dev: Dev) -> None:
    session, banned_proxy, exit = dev.pinned_session()
    # A POST through the session pinned to the exit the site bans: the gateway never
    # sends it twice, so the ban reaches the middleware.
    search = {"url": dev.banning_site(exit) + "search", "formdata": {"q": "1"}, "meta": {"proxypool_session": session}}
    report = crawl({"requests": [search]})
    assert report["returncode"] == 0, report["stderr"][-3000:]
    [item] = report["items"]
    assert item["status"] == 200, item
    [ban] = item["bans"]
    assert ban["proxy_id"] == banned_proxy and ban["status"] in (403, 429)
    assert (ban["feedback_status"], ban["outcome"], ban["domain"]) == (200, "cooling", dev.bans[exit])
    assert item["proxy"] != banned_proxy, "retried through another proxy"
    stats = report["stats"]
    assert stats["proxypool/bans"] == 1 and stats["proxypool/feedback/200"] == 1
    assert stats["proxypool/ban_retry/count"] == 1


def test_out_of_retries_the_spider_gets_the_ban(crawl: Crawl, dev: Dev) -> None:
    # A 429: the status Scrapy's own RetryMiddleware would retry.
    session, banned_proxy, exit = dev.pinned_session(status=429)
    search = {"url": dev.banning_site(exit), "formdata": {"q": "1"}, "meta": {"proxypool_session": session}}
    report = crawl({"requests": [search]}, {"PROXYPOOL_BAN_RETRIES": 0, "PROXYPOOL_BAN_STATUSES": [403, 429]})
    [item] = report["items"]
    # Scrapy's own RetryMiddleware does not send it again either.
    assert item["status"] == 429, item
    assert item["proxy"] == banned_proxy
    assert [b["outcome"] for b in item["bans"]] == ["cooling"]
    assert "retry/count" not in report["stats"], report["stats"]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"PROXYPOOL_PASSWORD": ""}, "PROXYPOOL_PASSWORD is required"),
        ({"PROXYPOOL_GATEWAY": "nohost"}, "gateway address must be HOST:PORT"),
        ({"PROXYPOOL_GATEWAY": "https://127.0.0.1:18443"}, "cannot send https requests through the gateway's TLS"),
        ({"PROXYPOOL_SELECTORS": {"inspect": "yes"}}, "inspect must be True or False"),
        ({"PROXYPOOL_SELECTORS": {"city": "a.b"}}, "city 'a.b' must be letters and digits"),
        ({"PROXYPOOL_SELECTORS": {"colour": "red"}}, "PROXYPOOL_SELECTORS: unknown selector colour"),
        ({"PROXYPOOL_SELECTORS": {"session": "x"}}, "sessions are set with PROXYPOOL_SESSION"),
        ({"PROXYPOOL_SESSION": "a-b"}, "session 'a-b' must be"),
        ({"PROXYPOOL_TOKEN": ""}, "PROXYPOOL_TOKEN is required"),
        ({"PROXYPOOL_API": "localhost:17080"}, "api_url must be"),
        ({"PROXYPOOL_BAN_RETRIES": -1}, "PROXYPOOL_BAN_RETRIES must be >= 0"),
        ({"PROXYPOOL_BAN_STATUSES": ["forbidden"]}, "PROXYPOOL_BAN_STATUSES"),
        ({"HTTPPROXY_ENABLED": False}, "HTTPPROXY_ENABLED is off"),
    ],
)
def test_bad_settings_are_refused_naming_them(dev: Dev, settings: Dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        middleware(dev, **settings)


def test_a_bad_setting_stops_the_crawl_before_any_request(dev: Dev) -> None:
    report = run_crawl(dev, {"requests": gets(dev.site, 1)}, {"PROXYPOOL_SELECTORS": {"city": "a.b"}})
    assert report["returncode"] != 0
    assert "city 'a.b' must be letters and digits" in report["stderr"], report["stderr"][-3000:]
    assert report.get("items", []) == []


def test_without_reports_no_api_is_needed(crawl: Crawl, dev: Dev) -> None:
    report = run_crawl(
        None,
        {"requests": gets(dev.site, 2)},
        {
            "PROXYPOOL_GATEWAY": f"{dev.host}:{dev.port}",
            "PROXYPOOL_USERNAME": dev.client,
            "PROXYPOOL_PASSWORD": dev.password,
            "PROXYPOOL_REPORT_BANS": False,
        },
    )
    assert report["returncode"] == 0, report["stderr"][-3000:]
    assert [i["status"] for i in report["items"]] == [200, 200]


def middleware(dev: Dev, **settings: Any) -> ProxypoolMiddleware:
    crawler = get_crawler(
        settings_dict={
            "PROXYPOOL_GATEWAY": f"{dev.host}:{dev.port}",
            "PROXYPOOL_USERNAME": dev.client,
            "PROXYPOOL_PASSWORD": dev.password,
            "PROXYPOOL_API": dev.api,
            "PROXYPOOL_TOKEN": dev.token,
            **settings,
        }
    )
    return ProxypoolMiddleware(crawler)


def username_of(request: Request) -> str:
    return unquote(urlsplit(request.meta["proxy"]).username or "")


def test_requests_get_the_gateway_with_their_selectors_and_keep_their_own_proxy(dev: Dev) -> None:
    mw = middleware(dev, PROXYPOOL_SELECTORS={"country": "JP", "rotate": 5})
    plain = Request(dev.site)
    mw.process_request(plain)
    assert username_of(plain) == f"{dev.client}-country-jp-rotate-5"
    sticky = Request(dev.site, meta={"proxypool_session": "s1", "proxypool_selectors": {"city": "New York"}})
    mw.process_request(sticky)
    assert username_of(sticky) == f"{dev.client}-country-jp-city-new_york-session-s1-rotate-5"
    own = Request(dev.site, meta={"proxy": "http://elsewhere:3128"})
    mw.process_request(own)
    assert own.meta["proxy"] == "http://elsewhere:3128"
    direct = Request(dev.site, meta={"proxy": None})
    mw.process_request(direct)
    assert direct.meta["proxy"] is None
    with pytest.raises(InvalidArgument):
        mw.process_request(Request(dev.site, meta={"proxypool_session": "no-dashes"}))
    # Inspection is a selector like the others: for every request, or one request's.
    inspecting = middleware(dev, PROXYPOOL_SELECTORS={"inspect": True})
    every = Request("https://shop.test/")
    inspecting.process_request(every)
    assert username_of(every) == f"{dev.client}-inspect"
    one = Request("https://shop.test/", meta={"proxypool_selectors": {"inspect": True}})
    mw.process_request(one)
    assert username_of(one) == f"{dev.client}-country-jp-rotate-5-inspect"
    # Scrapy's HttpProxyMiddleware leaves `meta["proxy"]` without its credentials; a
    # retry of a ban inside a tunnel gets the gateway again, asking for another proxy.
    retry = sticky.replace(meta={**sticky.meta, "proxy": "http://127.0.0.1:1", "_proxypool_newip": True})
    mw.process_request(retry)
    assert username_of(retry) == f"{dev.client}-country-jp-city-new_york-session-s1-rotate-5-newip"


def test_a_ban_without_a_proxy_id_is_reported_by_session(dev: Dev) -> None:
    # Inside an HTTPS tunnel the proxy id came with the CONNECT answer, which Scrapy
    # keeps to itself: the banned answer carries no proxypool header. In a session the
    # middleware reports by session, queued for the gateway that holds it. (dev's site
    # is plain HTTP, so the banned answer is made here; the report is real.)
    session, proxy, _ = dev.pinned_session()
    mw = middleware(dev)
    request = Request(dev.site, meta={"proxypool_session": session})
    report = mw.report_ban_blocking(request, Response(dev.site, status=403), GatewayAnswer(), session)
    assert (report.feedback_status, report.outcome, report.session, report.proxy_id) == (200, "queued", session, None)
    # The gateway applies it to the session's proxy, which then cools down for the site:
    # the session moves off it. (The site bans nobody: only the report can move it.)
    deadline = time.monotonic() + 30
    while True:
        answer = requests.get(dev.site, proxies={"http": dev.gateway(session=session)}, timeout=10)
        assert answer.status_code == 200
        if answer_of(answer).proxy_id != proxy:
            break
        assert time.monotonic() < deadline, "the session's feedback never reached its gateway"
        time.sleep(0.2)
    assert answer_of(answer).session == "reassigned"
    # Without a session there is nothing to report it by.
    unattributed = mw.report_ban_blocking(Request(dev.site), Response(dev.site, status=403), GatewayAnswer(), None)
    assert (unattributed.feedback_status, unattributed.error) == (0, "unattributed")


def test_after_a_ban_the_retry_asks_for_another_proxy_only_inside_a_tunnel(dev: Dev) -> None:
    mw = middleware(dev, PROXYPOOL_BAN_RETRIES=1)
    spider = Spider.from_crawler(mw.crawler, name="after_ban")
    report = BanReport(403, "shop.test", None, "s1", 200, "queued")
    request = Request(dev.site, meta={"proxypool_session": "s1"})
    mw.process_request(request)
    # Inside a tunnel the gateway saw no status: the retry leaves the session's proxy.
    tunnelled = mw.after_ban(request, Response(dev.site, status=403), GatewayAnswer(), "s1", report, spider)
    assert isinstance(tunnelled, Request) and tunnelled.meta["proxypool_bans"] == [report]
    mw.process_request(tunnelled)
    assert username_of(tunnelled) == f"{dev.client}-session-s1-newip"
    # On plain HTTP the gateway saw the ban and moves the session itself.
    plain = Request(dev.site, meta={"proxypool_session": "s1"})
    mw.process_request(plain)
    seen = GatewayAnswer(proxy_id="ab" * 16, ticket="v1.1.00")
    retried = mw.after_ban(plain, Response(dev.site, status=403), seen, "s1", report, spider)
    assert isinstance(retried, Request)
    mw.process_request(retried)
    assert username_of(retried) == f"{dev.client}-session-s1"
    # Out of retries, the ban is the answer, marked so Scrapy's RetryMiddleware keeps it.
    banned = Response(dev.site, status=429)
    assert mw.after_ban(retried, banned, seen, "s1", report, spider) is banned
    assert retried.meta["dont_retry"] is True
    assert retried.meta["proxypool_bans"] == [report, report]

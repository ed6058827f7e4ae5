"""https through the gateway of a real `proxypool dev`: a plain tunnel (TLS end to end, so
the answer cannot name its proxy and a ban is reported by session), an inspected one
(`-inspect`: the gateway's certificate, every answer naming its proxy and ticket, a ban
reported by proxy id, with requests and with the Scrapy add-on), what each client must
trust (verification stays on, and fails without the gateway's CA), and the TLS listener
(`https://` gateway URLs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
import requests

from conftest import HttpsDev, bundle
from proxypool_client import BanReport, Client, GatewaySession, NotFound, answer_of

Crawl = Callable[..., Dict[str, Any]]


def session_for(https: HttpsDev, verify: str, **kwargs: Any) -> GatewaySession:
    dev = https.dev
    return GatewaySession(dev.client, dev.password, dev.host, dev.port, verify=verify, **kwargs)


def test_an_inspected_answer_names_its_proxy_and_ticket(https_dev: HttpsDev, tmp_path: Path) -> None:
    trusted = bundle(tmp_path, https_dev.gateway_ca)
    with session_for(https_dev, trusted, inspect=True) as http:
        # One tunnel (requests keeps the connection), every request inside routed anew.
        answers = [http.get(https_dev.site, timeout=10) for _ in range(8)]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    named = [answer_of(a) for a in answers]
    assert all(n.proxy_id and (n.ticket or "").startswith("v2.") for n in named), named
    assert len({n.proxy_id for n in named}) > 1, "requests inside one tunnel rotate"
    assert len({https_dev.dev.exit_of(a) for a in answers}) > 1


def test_a_plain_tunnel_is_tls_end_to_end_and_names_no_proxy(https_dev: HttpsDev, tmp_path: Path) -> None:
    # The client trusts the site's own CA: the certificate is the origin's, not the gateway's.
    with session_for(https_dev, bundle(tmp_path, https_dev.site_ca)) as http:
        answer = http.get(https_dev.site, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer_of(answer).proxy_id is None and answer_of(answer).ticket is None
    assert (https_dev.dev.exit_of(answer) or "").startswith("127.0.0.")


def test_verification_stays_on_each_mode_needs_its_ca(https_dev: HttpsDev, tmp_path: Path) -> None:
    # Inspected, the certificate is the gateway's: the site's CA (or the public roots
    # alone) does not vouch for it.
    with session_for(https_dev, bundle(tmp_path, https_dev.site_ca), inspect=True) as http:
        with pytest.raises(requests.exceptions.SSLError):
            http.get(https_dev.site, timeout=10)
    # Through a plain tunnel it is the origin's: the gateway's CA does not vouch for it.
    with session_for(https_dev, bundle(tmp_path, https_dev.gateway_ca)) as http:
        with pytest.raises(requests.exceptions.SSLError):
            http.get(https_dev.site, timeout=10)


def test_an_https_ban_is_reported_by_proxy_id_when_inspected(
    https_dev: HttpsDev, api: Client, tmp_path: Path
) -> None:
    session, _, _ = https_dev.dev.pinned_session()
    seen: List[BanReport] = []
    trusted = bundle(tmp_path, https_dev.gateway_ca)
    with session_for(
        https_dev, trusted, inspect=True, session=session, api=api, on_ban=lambda _a, report: seen.append(report)
    ) as http:
        # A POST: never sent twice by the gateway, so the ban reaches the client.
        banned = http.post(https_dev.banning_page(), data={"q": "1"}, timeout=10)
        assert banned.status_code == 403, banned.text
        named = answer_of(banned)
        assert named.proxy_id and (named.ticket or "").startswith("v2."), named
        [report] = seen
        assert (report.proxy_id, report.session) == (named.proxy_id, None)
        assert (report.feedback_status, report.outcome, report.domain) == (200, "cooling", "shop-a.test")
        # The gateway saw the ban as well: the session leaves that proxy for the site.
        after = http.post(https_dev.banning_page(), data={"q": "2"}, timeout=10)
        assert answer_of(after).proxy_id not in (None, named.proxy_id), answer_of(after)
        assert answer_of(after).session == "reassigned"
    # The ticket made the report acceptable: this client never extracted that proxy.
    with pytest.raises(NotFound):
        api.report_ban(named.proxy_id, "shop-a.test")


def test_an_https_ban_in_a_plain_tunnel_is_reported_by_session(
    https_dev: HttpsDev, api: Client, tmp_path: Path
) -> None:
    session, _, _ = https_dev.dev.pinned_session()
    with session_for(https_dev, bundle(tmp_path, https_dev.site_ca), session=session, api=api) as http:
        banned = http.post(https_dev.banning_page(), data={"q": "1"}, timeout=10)
    assert banned.status_code == 403, banned.text
    report = http.bans[-1]
    assert (report.proxy_id, report.session, report.outcome) == (None, session, "queued")


def test_the_tls_listener_carries_the_proxy_protocol_inside_tls(https_dev: HttpsDev, tmp_path: Path) -> None:
    dev = https_dev.dev
    listener = dict(host=https_dev.tls_host, port=https_dev.tls_port, scheme="https")
    # Plain http through it: the gateway forwards and names the proxy.
    with GatewaySession(dev.client, dev.password, verify=bundle(tmp_path, https_dev.tls_ca), **listener) as http:
        answer = http.get(dev.site, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer_of(answer).proxy_id
    # https inspected inside it: TLS to the gateway, and the gateway's leaf inside that.
    both = bundle(tmp_path, https_dev.tls_ca, https_dev.gateway_ca)
    with GatewaySession(dev.client, dev.password, verify=both, inspect=True, **listener) as http:
        answer = http.get(https_dev.site, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer_of(answer).proxy_id
    # A client that does not trust the listener's certificate sends nothing through it,
    # for an http URL too (requests alone would not check the proxy's certificate there).
    untrusted = bundle(tmp_path, https_dev.gateway_ca)
    for url in (dev.site, https_dev.site):
        with GatewaySession(dev.client, dev.password, verify=untrusted, inspect=True, **listener) as http:
            with pytest.raises(requests.exceptions.ProxyError, match="CERTIFICATE_VERIFY_FAILED"):
                http.get(url, timeout=10)


def test_scrapy_reports_an_inspected_https_ban_by_proxy_id(crawl: Crawl, https_dev: HttpsDev, tmp_path: Path) -> None:
    session, _, _ = https_dev.dev.pinned_session()
    search = {"url": https_dev.banning_page(), "formdata": {"q": "1"}, "meta": {"proxypool_session": session}}
    inspected = {
        "PROXYPOOL_SELECTORS": {"inspect": True},
        "DOWNLOAD_VERIFY_CERTIFICATES": True,
        # The page bans every exit: one retry, then the spider gets the ban.
        "PROXYPOOL_BAN_RETRIES": 1,
    }
    # Scrapy verifies against OpenSSL's default store: SSL_CERT_FILE holds the gateway's CA.
    trusted = {"SSL_CERT_FILE": bundle(tmp_path, https_dev.gateway_ca)}
    report = crawl({"requests": [search]}, inspected, trusted)
    assert report["returncode"] == 0, report["stderr"][-3000:]
    [item] = report["items"]
    assert item["status"] == 403, item
    first, second = item["bans"]
    for ban in (first, second):
        assert ban["proxy_id"] and ban["session"] is None, ban
        assert (ban["status"], ban["feedback_status"], ban["outcome"]) == (403, 200, "cooling"), ban
    # Reported by the id of the proxy that carried each answer; the retry took another.
    assert first["proxy_id"] != second["proxy_id"] == item["proxy"]
    assert report["stats"]["proxypool/feedback/200"] == 2
    # Without the gateway's CA in that store, verification refuses the gateway's leaf: the
    # request fails, nothing is answered.
    untrusted = {"SSL_CERT_FILE": bundle(tmp_path, https_dev.site_ca, public_roots=False)}
    refused = crawl({"requests": [{"url": https_dev.site}]}, inspected, untrusted)
    assert refused["items"] == [], refused["items"]
    assert "certificate verify failed" in refused["stderr"], refused["stderr"][-3000:]

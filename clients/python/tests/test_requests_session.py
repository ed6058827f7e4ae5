"""`requests` through the gateway of a real `proxypool dev` with GatewaySession: rotation,
a sticky session, a ban reported with the answer's proxy id and ticket, the gateway's
own refusals as GatewayError, and selectors the gateway takes as written."""

from __future__ import annotations

from typing import List

import pytest
import requests

from conftest import Dev
from proxypool_client import (
    BanReport,
    Client,
    GatewayError,
    GatewaySession,
    NotFound,
    answer_of,
    new_session_id,
)


def session_for(dev: Dev, **kwargs: object) -> GatewaySession:
    return GatewaySession(dev.client, dev.password, dev.host, dev.port, **kwargs)  # type: ignore[arg-type]


def test_without_a_session_requests_rotate_over_the_gateways_proxies(dev: Dev) -> None:
    with session_for(dev) as http:
        answers = [http.get(dev.site, timeout=10) for _ in range(8)]
    assert all(a.status_code == 200 for a in answers)
    proxies = {answer_of(a).proxy_id for a in answers}
    exits = {dev.exit_of(a) for a in answers}
    assert None not in proxies and len(proxies) > 1, proxies
    assert len(exits) > 1, exits
    # Every answer carries a ticket for the proxy it names.
    assert all((answer_of(a).ticket or "").startswith("v2.") for a in answers)


def test_a_sticky_session_keeps_one_exit(dev: Dev) -> None:
    session = new_session_id()
    with session_for(dev, session=session, sesstime=10) as http:
        answers = [http.get(dev.site, timeout=10) for _ in range(5)]
    assert {answer_of(a).proxy_id for a in answers} != {None}
    assert len({answer_of(a).proxy_id for a in answers}) == 1
    assert len({dev.exit_of(a) for a in answers}) == 1
    assert [answer_of(a).session for a in answers] == ["new"] + ["pinned"] * 4


def test_a_ban_is_reported_with_the_proxy_id_and_ticket(dev: Dev, api: Client) -> None:
    session, proxy, exit = dev.pinned_session()
    banning = dev.banning_site(exit) + "search"
    seen: List[BanReport] = []
    with session_for(dev, session=session, api=api, on_ban=lambda _answer, report: seen.append(report)) as http:
        # A POST: the gateway never sends a request with a body twice, so the ban
        # reaches the client.
        banned = http.post(banning, data={"q": "1"}, timeout=10)
        assert banned.status_code in (403, 429), banned.text
        assert answer_of(banned).proxy_id == proxy
        report = http.bans[-1]
        assert seen == [report]
        assert report.proxy_id == proxy
        assert (report.feedback_status, report.outcome, report.error) == (200, "cooling", None)
        assert report.reported and report.domain == dev.bans[exit]
        # The gateway saw the ban too: the session leaves that proxy for this site.
        after = http.post(banning, data={"q": "2"}, timeout=10)
        assert after.status_code == 200
        assert answer_of(after).proxy_id != proxy
        assert answer_of(after).session == "reassigned"
    # The ticket is what made the report acceptable: without it, the proxy this client
    # never extracted is not its to report.
    with pytest.raises(NotFound):
        api.report_ban(proxy, dev.bans[exit])


def test_without_an_api_a_ban_is_recorded_not_reported(dev: Dev) -> None:
    session, proxy, exit = dev.pinned_session()
    with session_for(dev, session=session, ban_statuses=[403, 429]) as http:
        assert http.post(dev.banning_site(exit), data={"q": "x"}, timeout=10).status_code in (403, 429)
    report = http.bans[-1]
    assert (report.proxy_id, report.error, report.reported) == (proxy, "no_api", False)


def test_the_gateways_own_refusals_raise_gateway_error(dev: Dev) -> None:
    with GatewaySession(dev.client, "not-the-password", dev.host, dev.port) as http:
        with pytest.raises(GatewayError) as refused:
            http.get(dev.site, timeout=10)
    assert (refused.value.status, refused.value.code) == (407, "auth_required")
    assert "407" in str(refused.value)
    with session_for(dev, region="zz") as http:
        with pytest.raises(GatewayError) as none:
            http.get(dev.site, timeout=10)
    assert (none.value.status, none.value.code) == (503, "no_eligible_proxy")
    assert none.value.retry_after is not None and none.value.retry_after >= 1
    # Or handed back as answers, when the caller wants to read them.
    with session_for(dev, region="zz", raise_gateway_errors=False) as http:
        assert answer_of(http.get(dev.site, timeout=10)).error == "no_eligible_proxy"


def test_selectors_written_here_are_taken_by_the_gateway(dev: Dev) -> None:
    # dev's simulated proxies carry the carrier label `simnet`; every key the gateway
    # knows is written in its grammar (a mistake would be its 400 bad_selector).
    url = dev.gateway(carrier="SimNet", protocol="http", session=new_session_id(), idle=5, rotate=3, newip=True)
    answer = requests.get(dev.site, proxies={"http": url}, timeout=10)
    assert answer.status_code == 200, answer.text
    url = dev.gateway(rotate="least")
    assert requests.get(dev.site, proxies={"http": url}, timeout=10).status_code == 200

"""The API client against a real `proxypool dev`: extraction (exclusive, idempotent,
all-or-nothing), feedback by proxy with a return and a replacement, the typed errors the
API answers, a rate limit waited out, and usage."""

from __future__ import annotations

import requests

import pytest

from conftest import Dev
from proxypool_client import (
    Client,
    Conflict,
    InvalidRequest,
    NotFound,
    RateLimited,
    Unauthenticated,
    new_idempotency_key,
)


def test_an_extracted_proxy_carries_requests_straight_to_the_vendor(dev: Dev, api: Client) -> None:
    extraction = api.extract(2, protocol="http")
    assert extraction.returned == 2 and extraction.replayed is False
    first, second = extraction.proxies
    assert first.id != second.id
    page = requests.get(dev.site, proxies=first.requests_proxies(), timeout=10)
    assert page.status_code == 200
    assert dev.exit_of(page), page.text
    # Not through the gateway: no proxypool header.
    assert "X-Proxypool-Proxy" not in page.headers
    # The extraction stays readable by its id.
    assert [p.id for p in api.extraction(extraction.id).proxies] == [first.id, second.id]


def test_a_key_replays_its_extraction_and_refuses_another_body(api: Client) -> None:
    key = new_idempotency_key()
    first = api.extract(1, idempotency_key=key)
    again = api.extract(1, idempotency_key=key)
    assert again.replayed is True
    assert (again.id, [p.id for p in again.proxies]) == (first.id, [p.id for p in first.proxies])
    with pytest.raises(Conflict) as conflict:
        api.extract(1, "all_or_nothing", idempotency_key=key)
    assert conflict.value.code == "idempotency_conflict"


def test_all_or_nothing_takes_nothing_when_it_cannot_take_all(api: Client) -> None:
    with pytest.raises(Conflict) as conflict:
        api.extract(100, "all_or_nothing")
    assert conflict.value.status == 409 and conflict.value.code == "insufficient_inventory"
    # Nothing was taken: a partial extraction still gets a proxy.
    assert api.extract(1).returned == 1


def test_a_returned_proxy_is_replaced_in_the_same_call(api: Client) -> None:
    extraction = api.extract(1)
    proxy = extraction.proxies[0]
    assert not proxy.returned and proxy.password is not None
    feedback = api.return_proxy(proxy.id, "https://www.shop-a.test/cart", replacement=1)
    assert (feedback.outcome, feedback.returned, feedback.domain) == ("cooling", True, "shop-a.test")
    assert feedback.cooldown is not None and feedback.cooldown.strikes == 1
    assert feedback.replacement is not None and feedback.replacement.returned == 1
    assert feedback.replacement.proxies[0].id != proxy.id
    # Given back, it is no longer this client's to return, and its extraction no longer
    # shows its credentials.
    with pytest.raises(NotFound):
        api.return_proxy(proxy.id, "shop-a.test")
    shown = api.extraction(extraction.id).proxies[0]
    assert (shown.id, shown.returned, shown.username, shown.password) == (proxy.id, True, None, None)


def test_a_proxy_this_client_may_not_report_is_not_found(api: Client) -> None:
    with pytest.raises(NotFound) as missing:
        api.report_ban("0" * 32, "shop-a.test")
    assert missing.value.code == "not_found" and missing.value.request_id


def test_bad_input_is_the_apis_400_naming_the_field(api: Client) -> None:
    with pytest.raises(InvalidRequest, match="city") as bad:
        api.extract(1, city="a.b")
    assert bad.value.code == "invalid_request"
    with pytest.raises(InvalidRequest, match="ttl"):
        api.report_ban("0" * 32, "shop-a.test", ttl="forever")


def test_a_wrong_token_is_unauthenticated(dev: Dev) -> None:
    with pytest.raises(Unauthenticated) as refused:
        Client(dev.api, "not-the-token").me()
    assert refused.value.status == 401
    assert dev.client_api().me().client == dev.client


def test_a_rate_limit_is_waited_out_within_the_bound(dev: Dev, api: Client) -> None:
    proxy = api.extract(1).proxies[0]
    impatient = dev.client_api(retries=0)
    # The client's feedback bucket (a burst of 20 by default) runs out: 429 with
    # Retry-After, raised at once without retries.
    with pytest.raises(RateLimited) as limited:
        for _ in range(100):
            impatient.feedback("shop-c.test", "slow", proxy_id=proxy.id)
    assert limited.value.code == "rate_limited"
    assert limited.value.retry_after is not None and 1 <= limited.value.retry_after <= 10
    # A client that retries waits what it is told, and its call goes through.
    patient = dev.client_api(retries=5, max_retry_wait=10)
    assert patient.feedback("shop-c.test", "slow", proxy_id=proxy.id).outcome == "cooling"


def test_usage_counts_extractions(dev: Dev, api: Client) -> None:
    before = api.usage().of(dev.client)
    before_extracted = before.total("extracted") if before else 0
    api.extract(1)
    after = api.usage(client=dev.client).of(dev.client)
    assert after is not None
    assert after.total("extracted") == before_extracted + 1
    assert after.minutes and after.hours

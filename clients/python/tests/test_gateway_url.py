"""Unit tests of the gateway usernames and URLs: the selector grammar as the gateway reads
it, values written the way the pool stores them, and every bad value refused here with a
message naming it. (That the gateway takes what is written here: test_requests_session.)"""

from __future__ import annotations

from typing import Any, Dict, Tuple
from urllib.parse import unquote, urlsplit

import pytest

from proxypool_client import GatewayAnswer, InvalidArgument, gateway_url, gateway_username, new_session_id


def test_a_plain_username_is_the_client_id() -> None:
    assert gateway_username("dev") == "dev"
    assert gateway_username("team-b.scrapers") == "team-b.scrapers"


def test_every_selector_in_the_gateways_grammar() -> None:
    username = gateway_username(
        "alice",
        country="US",
        city="New York",
        state="NY",
        asn="AS7922",
        carrier="Verizon",
        upstream="acme_resi",
        protocol="socks5",
        session="s1",
        idle=10,
        rotate="30s",
        newip=True,
    )
    assert username == (
        "alice-country-us-city-new_york-state-ny-asn-7922-carrier-verizon-upstream-acme_resi"
        "-protocol-socks5-session-s1-idle-10-rotate-30s-newip"
    )
    assert gateway_username("alice", region="de", session="x.1", sesstime=30) == "alice-region-de-session-x.1-sesstime-30"


@pytest.mark.parametrize(
    "written, stored",
    [
        ("New York", "new_york"),
        ("new+york", "new_york"),
        ("NEW-YORK", "new_york"),
        ("  new   york ", "new_york"),
        ("new__york", "new_york"),
        ("São Paulo", "são_paulo"),
        ("İstanbul", "istanbul"),
    ],
)
def test_places_are_written_as_the_pool_stores_them(written: str, stored: str) -> None:
    assert gateway_username("a", city=written) == f"a-city-{stored}"


@pytest.mark.parametrize(
    "rotate, written",
    [(5, "5"), ("5", "5"), (1_000_000, "1000000"), ("30s", "30s"), ("5m", "5m"), ("least", "least"), ("request", "request")],
)
def test_rotation_values(rotate: object, written: str) -> None:
    assert gateway_username("a", rotate=rotate) == f"a-rotate-{written}"  # type: ignore[arg-type]


def test_asn_is_its_number() -> None:
    assert gateway_username("a", asn=7922) == "a-asn-7922"
    assert gateway_username("a", asn="as4294967295") == "a-asn-4294967295"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"region": "us", "country": "us"}, "region and country are one selector"),
        ({"region": "u-s"}, "region 'u-s' must be"),
        ({"region": "_us"}, "region '_us' must be"),
        ({"carrier": ""}, "carrier '' must be"),
        ({"city": "a.b"}, "city 'a.b' must be letters and digits"),
        ({"city": " - "}, "must name a place"),
        ({"state": "x" * 65}, "at most 64 bytes"),
        ({"asn": "ASx"}, "asn 'ASx' must be a number"),
        ({"asn": 4294967296}, "must be a number"),
        ({"protocol": "ftp"}, "protocol 'ftp' must be one of"),
        ({"session": "a-b"}, "session 'a-b' must be"),
        ({"session": "x" * 65}, "must be 1-64 characters"),
        ({"sesstime": 5}, "sesstime needs a session"),
        ({"idle": 5}, "idle needs a session"),
        ({"session": "s", "sesstime": 5, "idle": 5}, "exclusive"),
        ({"session": "s", "sesstime": 0}, "sesstime must be a whole number of minutes"),
        ({"session": "s", "idle": True}, "idle must be a whole number"),
        ({"rotate": 0}, "rotate 0 must be"),
        ({"rotate": 1_000_001}, "rotate 1000001 must be"),
        ({"rotate": "0s"}, "rotate '0s' must be"),
        ({"rotate": "5h"}, "rotate '5h' must be"),
        ({"rotate": "most"}, "rotate 'most' must be"),
        ({"session": "s", "rotate": "request"}, "cannot go with a session"),
    ],
)
def test_bad_selectors_are_refused_naming_the_value(kwargs: Dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        gateway_username("alice", **kwargs)


@pytest.mark.parametrize("client", ["", "-alice", "al ice", "a" * 129, "alice/x"])
def test_bad_client_ids_are_refused(client: str) -> None:
    with pytest.raises(InvalidArgument, match="client"):
        gateway_username(client)


def test_the_url_carries_the_username_and_password_percent_encoded() -> None:
    url = gateway_url("dev", "p@ss:w/rd %", "gw.example", 18080, city="São Paulo", session="s1")
    parts = urlsplit(url)
    assert parts.scheme == "http"
    assert (parts.hostname, parts.port) == ("gw.example", 18080)
    assert unquote(parts.username or "") == "dev-city-são_paulo-session-s1"
    assert unquote(parts.password or "") == "p@ss:w/rd %"
    assert gateway_url("dev", "pw") == "http://dev:pw@127.0.0.1:18080"
    assert gateway_url("dev", "pw", "::1", 1080, scheme="socks5h") == "socks5h://dev:pw@[::1]:1080"


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("dev", ""), {}, "password"),
        (("dev", "pw", "a/b"), {}, "host"),
        (("dev", "pw", "h", 0), {}, "port"),
        (("dev", "pw", "h", 70000), {}, "port"),
        (("dev", "pw"), {"scheme": "ftp"}, "scheme"),
        (("dev", "pw"), {"scheme": "HTTPS"}, "scheme"),
        (("dev", "pw"), {"inspect": "yes"}, "inspect must be True or False"),
        (("dev", "pw"), {"inspect": 1}, "inspect must be True or False"),
        (("dev", "pw"), {"newip": "no"}, "newip must be True or False"),
    ],
)
def test_bad_gateway_urls_are_refused(args: Tuple[Any, ...], kwargs: Dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        gateway_url(*args, **kwargs)


def test_the_inspect_flag_and_the_tls_listener() -> None:
    assert gateway_username("dev", inspect=True) == "dev-inspect"
    assert gateway_username("dev", inspect=False) == "dev"
    # A flag, after every keyed selector, as the gateway reads it (after `newip` too).
    assert gateway_username("dev", country="us", session="s1", newip=True, inspect=True) == (
        "dev-country-us-session-s1-newip-inspect"
    )
    assert gateway_url("dev", "pw", inspect=True) == "http://dev-inspect:pw@127.0.0.1:18080"
    # The TLS listener: the same proxy inside TLS, `https://` (with or without inspection).
    url = gateway_url("dev", "p@ss", "gw.example", 8443, scheme="https", inspect=True)
    assert url == "https://dev-inspect:p%40ss@gw.example:8443"
    assert gateway_url("dev", "pw", "::1", 8443, scheme="https") == "https://dev:pw@[::1]:8443"


def test_session_ids_are_fresh_and_valid() -> None:
    first, second = new_session_id(), new_session_id("crawl")
    assert first != second and second.startswith("crawl")
    gateway_username("a", session=first)
    gateway_username("a", session=second)


def test_the_answer_headers_are_read() -> None:
    headers = {
        "X-Proxypool-Proxy": "5cea58d05aedb95bb34735e1d375ba91",
        "X-Proxypool-Ticket": "v1.1796648383672.e307",
        "X-Proxypool-Attempts": "2",
        "X-Proxypool-Session": "reassigned",
    }
    answer = GatewayAnswer.from_headers(headers.get)
    assert answer == GatewayAnswer("5cea58d05aedb95bb34735e1d375ba91", "v1.1796648383672.e307", 2, "reassigned", None)
    empty: Dict[str, str] = {}
    assert GatewayAnswer.from_headers(empty.get) == GatewayAnswer()

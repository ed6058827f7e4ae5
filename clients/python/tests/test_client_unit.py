"""Unit tests of the API client's own behaviour: arguments checked before anything is
sent, error answers as typed exceptions, and retries within their bounds.

What the API answers comes from a scripted HTTP server on loopback (the answers are the
API's documented shapes); what proxypool itself does with these calls is tested against
`proxypool dev` in test_api.py.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from proxypool_client import (
    ApiError,
    Client,
    Conflict,
    InvalidArgument,
    InvalidRequest,
    RateLimited,
    TransportError,
    Unavailable,
)

Answer = Tuple[int, Dict[str, str], Any]  # status, headers, JSON body (None: close the connection)
EXTRACTION = {"id": "ex_" + "0" * 32, "requested": 1, "returned": 0, "created_at": 1, "proxies": []}


def error(status: int, code: str, retry_after: Optional[str] = None) -> Answer:
    headers = {"Retry-After": retry_after} if retry_after else {}
    return status, headers, {"error": {"code": code, "message": f"{code} happened"}, "request_id": "req-1"}


class Scripted:
    """A loopback HTTP server answering from a script, recording each request."""

    def __init__(self) -> None:
        self.script: List[Answer] = []
        self.seen: List[Dict[str, Any]] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                scripted.seen.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )
                status, headers, answer = scripted.script.pop(0) if scripted.script else (200, {}, EXTRACTION)
                if answer is None:
                    self.close_connection = True
                    return
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = handle_one

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def server() -> Iterator[Scripted]:
    scripted = Scripted()
    yield scripted
    scripted.close()


def test_a_503_is_retried_after_retry_after_with_the_same_idempotency_key(server: Scripted) -> None:
    server.script = [error(503, "unavailable", "1"), error(503, "unavailable", "1"), (200, {}, EXTRACTION)]
    started = time.monotonic()
    extraction = Client(server.url, "t0k").extract(1)
    assert extraction.id == EXTRACTION["id"]
    assert time.monotonic() - started >= 2, "it waited what Retry-After said, twice"
    keys = {seen["headers"]["Idempotency-Key"] for seen in server.seen}
    assert len(server.seen) == 3 and len(keys) == 1, server.seen
    assert server.seen[0]["headers"]["Authorization"] == "Bearer t0k"
    assert json.loads(server.seen[0]["body"]) == {"count": 1, "mode": "partial"}


def test_a_retry_after_beyond_the_bound_is_raised_at_once(server: Scripted) -> None:
    server.script = [error(429, "quota_exceeded", "3600")]
    started = time.monotonic()
    with pytest.raises(RateLimited) as raised:
        Client(server.url, "t", max_retry_wait=10).usage()
    assert time.monotonic() - started < 5
    assert (raised.value.status, raised.value.code, raised.value.retry_after) == (429, "quota_exceeded", 3600)
    assert raised.value.request_id == "req-1"
    assert len(server.seen) == 1


def test_retries_end_with_the_last_answer(server: Scripted) -> None:
    server.script = [error(503, "store_recovering", "0")] * 3
    with pytest.raises(Unavailable) as raised:
        Client(server.url, "t", retries=2).me()
    assert raised.value.code == "store_recovering"
    assert len(server.seen) == 3
    server.seen.clear()
    server.script = [error(429, "rate_limited", "0")]
    with pytest.raises(RateLimited):
        Client(server.url, "t", retries=0).me()
    assert len(server.seen) == 1


def test_each_status_has_its_exception(server: Scripted) -> None:
    server.script = [error(400, "invalid_request"), error(409, "idempotency_conflict"), (502, {}, b"bad gateway")]
    client = Client(server.url, "t")
    with pytest.raises(InvalidRequest, match="invalid_request happened"):
        client.extract(1)
    with pytest.raises(Conflict) as conflict:
        client.extract(1, idempotency_key="k1")
    assert conflict.value.code == "idempotency_conflict"
    with pytest.raises(ApiError) as other:
        client.usage()
    assert (type(other.value), other.value.status, other.value.code) == (ApiError, 502, "unknown")


def test_a_lost_answer_is_retried_only_where_a_retry_cannot_act_twice(server: Scripted) -> None:
    client = Client(server.url, "t", retries=2, max_retry_wait=0.1)
    # Feedback has no key: its lost answer is raised, never sent again.
    server.script = [(200, {}, None)] * 3
    with pytest.raises(TransportError):
        client.report_ban("0" * 32, "shop.test")
    assert len(server.seen) == 1
    # An extraction carries its key: sent again, and the replay is what comes back.
    server.seen.clear()
    server.script = [(200, {}, None), (200, {"Idempotent-Replayed": "true"}, EXTRACTION)]
    assert client.extract(1).replayed is True
    assert len(server.seen) == 2
    assert server.seen[0]["headers"]["Idempotency-Key"] == server.seen[1]["headers"]["Idempotency-Key"]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda c: c.extract(0), "count must be"),
        (lambda c: c.extract(True), "count must be"),
        (lambda c: c.extract(1, "some"), "mode must be one of"),
        (lambda c: c.extract(1, region="us", country="us"), "region and country"),
        (lambda c: c.extract(1, protocol="ftp"), "protocol must be"),
        (lambda c: c.extract(1, min_health_freshness_ms=-1), "min_health_freshness_ms"),
        (lambda c: c.extract(1, idempotency_key="-bad"), "idempotency_key"),
        (lambda c: c.extraction("ex_1"), "extraction id"),
        (lambda c: c.feedback("shop.test"), "exactly one of proxy_id and session"),
        (lambda c: c.feedback("shop.test", proxy_id="a", session="s"), "exactly one"),
        (lambda c: c.feedback("shop.test", session="s", ticket="v1.1.0"), "ticket goes only with proxy_id"),
        (lambda c: c.feedback("shop.test", session="s", return_proxy=True), "return_proxy needs proxy_id"),
        (lambda c: c.feedback("shop.test", "blocked", proxy_id="a"), "verdict must be one of"),
        (lambda c: c.feedback("shop.test", "ok", proxy_id="a", ttl="1m"), "verdict ok takes neither"),
        (lambda c: c.feedback("", proxy_id="a"), "domain"),
        (lambda c: c.feedback("shop.test", proxy_id="a", idempotency_key="k"), "keys a replacement"),
        (lambda c: c.return_proxy("a", "shop.test", replacement=0), "count must be"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(server: Scripted, call: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        call(Client(server.url, "t"))
    assert server.seen == []


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("127.0.0.1:17080", "t"), {}, "api_url"),
        (("http://h", ""), {}, "token"),
        (("http://h", "t"), {"ca": "/no/such/ca.pem"}, "ca: no such file"),
        (("http://h", "t"), {"retries": -1}, "retries"),
        (("http://h", "t"), {"timeout": 0}, "timeout"),
    ],
)
def test_bad_client_settings_are_refused(args: Tuple[Any, ...], kwargs: Dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Client(*args, **kwargs)


def test_the_token_stays_out_of_the_clients_repr() -> None:
    client = Client("http://127.0.0.1:1", "s3cret-token")
    assert "s3cret" not in repr(client)
    assert Client.from_env({"PROXYPOOL_TOKEN": "t"}).api_url == "http://127.0.0.1:17080"
    with pytest.raises(InvalidArgument, match="PROXYPOOL_TOKEN"):
        Client.from_env({})


def test_a_proxy_given_back_reads_returned_without_credentials(server: Scripted) -> None:
    held = {"id": "ab" * 16, "protocol": "http", "host": "10.0.0.1", "port": 8080, "username": "u",
            "password": "p", "upstream": "acme", "usable_until": 2, "expires_at": 3, "returned": False}
    given_back = dict(held, id="cd" * 16, username=None, password=None, returned=True)
    older = {k: v for k, v in held.items() if k != "returned"}
    server.script = [(200, {}, dict(EXTRACTION, returned=3, proxies=[held, given_back, older]))]
    extraction = Client(server.url, "t").extraction(EXTRACTION["id"])
    kept, back, old = extraction.proxies
    assert not kept.returned and kept.password == "p"
    assert back.returned and back.username is None and back.password is None
    assert not old.returned, "an answer without the field is a proxy still held"

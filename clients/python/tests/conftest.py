"""Fixtures of the package's tests.

The unit tests need nothing. The others run against a real `proxypool dev`, whose
settings come from the environment (the suite's `crates/cli/tests/it/clients.rs` starts
dev and sets them; by hand, export them from dev's banner):

    PROXYPOOL_API, PROXYPOOL_TOKEN       the client API and the API token
    PROXYPOOL_GATEWAY                    the gateway's HTTP listener, HOST:PORT
    PROXYPOOL_USERNAME, PROXYPOOL_PASSWORD   the client id and the gateway password
    PROXYPOOL_TEST_SITE                  a site under .test that bans no exit
                                         (http://shop-b.test:PORT/, PORT the origin's)
    PROXYPOOL_TEST_BANS                  the bans dev was started with, as its
                                         --ban-exit values joined by commas
                                         (127.0.0.2=shop-2.test:403,...); every exit
                                         must be banned on some site, so whichever
                                         proxies the gateway holds, one can be banned

The https tests (test_https.py) need four more, from dev's banner and data directory:

    PROXYPOOL_TEST_HTTPS_SITE            dev's https origin under a .test name that bans
                                         no exit (https://shop-b.test:PORT/)
    PROXYPOOL_GATEWAY_CA                 the gateway's inspection CA ("inspection CA")
    PROXYPOOL_TEST_SITE_CA               the https origin's CA (DATA_DIR/dev-origin-ca.pem),
                                         which a plain tunnel's client must trust
    PROXYPOOL_GATEWAY_TLS                the TLS listener, HOST:PORT ("gateway HTTPS"), and
    PROXYPOOL_GATEWAY_TLS_CA             the certificate it presents ("gateway TLS cert")

dev must run with `--proxy-ttl 0`: the tests count proxies, which must not rotate away
meanwhile. Without these settings the tests that need dev are skipped (the suite fails on
any skip).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional
from urllib.parse import urlsplit

import pytest
import requests

import certifi

from proxypool_client import Client, GatewaySession, gateway_url, new_session_id

SETTINGS = (
    "PROXYPOOL_API",
    "PROXYPOOL_TOKEN",
    "PROXYPOOL_GATEWAY",
    "PROXYPOOL_USERNAME",
    "PROXYPOOL_PASSWORD",
    "PROXYPOOL_TEST_SITE",
    "PROXYPOOL_TEST_BANS",
)
HTTPS_SETTINGS = (
    "PROXYPOOL_TEST_HTTPS_SITE",
    "PROXYPOOL_GATEWAY_CA",
    "PROXYPOOL_TEST_SITE_CA",
    "PROXYPOOL_GATEWAY_TLS",
    "PROXYPOOL_GATEWAY_TLS_CA",
)
TESTS = Path(__file__).parent
# Exits already handed to a test by Dev.pinned_session in this run.
_SPENT_EXITS: "set[str]" = set()


@dataclass(frozen=True)
class Dev:
    """A running `proxypool dev`, as the environment describes it."""

    api: str
    token: str
    host: str
    port: int
    client: str
    password: str
    site: str
    """A site that bans no exit."""
    bans: Dict[str, str]
    """Exit address -> the host name of the site that bans it."""
    ban_statuses: Dict[str, int]
    """Exit address -> the status that site answers it with."""

    def client_api(self, **kwargs: Any) -> Client:
        return Client(self.api, self.token, **kwargs)

    def gateway(self, **selectors: Any) -> str:
        return gateway_url(self.client, self.password, self.host, self.port, **selectors)

    def site_of(self, host: str) -> str:
        """The test site's URL under another host name (same origin port)."""
        port = urlsplit(self.site).port
        return f"http://{host}:{port}/"

    def exit_of(self, answer: requests.Response) -> Optional[str]:
        """The exit address dev's origin echoes."""
        try:
            return str(answer.json()["exit"])
        except (ValueError, KeyError):
            return None

    def pinned_session(self, status: Optional[int] = None) -> "tuple[str, str, str]":
        """A fresh sticky session and the (proxy id, exit) it is pinned to, an exit no
        earlier test of this run was given (a ban test leaves its exit cooling down for
        its banning site, so the next one needs another) and, when `status` is given, one
        its site bans with that status."""
        for _ in range(64):
            session = new_session_id("pin")
            with GatewaySession(self.client, self.password, self.host, self.port, session=session) as http:
                answer = http.get(self.site, timeout=10)
                answer.raise_for_status()
            exit = self.exit_of(answer)
            assert exit is not None, answer.text
            if exit not in _SPENT_EXITS and status in (None, self.ban_statuses.get(exit)):
                _SPENT_EXITS.add(exit)
                return session, answer.headers["X-Proxypool-Proxy"], exit
        raise AssertionError(f"no exit left that no test banned yet: {sorted(_SPENT_EXITS)}")

    def banning_site(self, exit: str) -> str:
        """The URL of the site that bans `exit`."""
        assert exit in self.bans, f"dev was started without a ban for {exit}: {self.bans}"
        return self.site_of(self.bans[exit])


@dataclass(frozen=True)
class HttpsDev:
    """What the https tests need of dev beyond :class:`Dev`."""

    dev: Dev
    site: str
    """dev's https origin under a name that bans no exit."""
    gateway_ca: str
    """The gateway's inspection CA."""
    site_ca: str
    """The https origin's own CA (what a client of a plain tunnel must trust)."""
    tls_host: str
    tls_port: int
    """The gateway's TLS listener."""
    tls_ca: str
    """The certificate the TLS listener presents."""

    def banning_page(self) -> str:
        """An https page that bans every exit: dev's https origin answers `/status/403`
        with 403 whoever asks, and `shop-a.test` is a name its certificate covers (it
        covers shop-a.test and shop-b.test, not every name under .test). Bans there cool
        proxies down for shop-a.test only, which no other test uses through the gateway."""
        return f"https://shop-a.test:{urlsplit(self.site).port}/status/403"


def bundle(directory: Path, *cas: str, public_roots: bool = True) -> str:
    """A CA bundle under `directory`: the public roots (certifi's, unless told not to) and
    the PEM files `cas`; its path."""
    parts = [Path(certifi.where()).read_text()] if public_roots else []
    parts += [Path(ca).read_text() for ca in cas]
    path = Path(tempfile.mkstemp(suffix=".pem", dir=directory)[1])
    path.write_text("\n".join(parts))
    return str(path)


def _bans(spec: str) -> "tuple[Dict[str, str], Dict[str, int]]":
    """`EXIT=HOST[:STATUS],...` (dev's `--ban-exit` values) as (exit -> host, exit -> status)."""
    hosts, statuses = {}, {}
    for entry in filter(None, spec.split(",")):
        exit, _, site = entry.partition("=")
        host, _, status = site.partition(":")
        hosts[exit], statuses[exit] = host, int(status or 403)
    return hosts, statuses


@pytest.fixture(scope="session")
def dev() -> Dev:
    missing = [name for name in SETTINGS if not os.environ.get(name)]
    if missing:
        pytest.skip(f"no proxypool dev to test against: {', '.join(missing)} not set")
    env = os.environ
    host, _, port = env["PROXYPOOL_GATEWAY"].rpartition(":")
    hosts, statuses = _bans(env["PROXYPOOL_TEST_BANS"])
    return Dev(
        api=env["PROXYPOOL_API"],
        token=env["PROXYPOOL_TOKEN"],
        host=host,
        port=int(port),
        client=env["PROXYPOOL_USERNAME"],
        password=env["PROXYPOOL_PASSWORD"],
        site=env["PROXYPOOL_TEST_SITE"],
        bans=hosts,
        ban_statuses=statuses,
    )


@pytest.fixture(scope="session")
def https_dev(dev: Dev) -> HttpsDev:
    missing = [name for name in HTTPS_SETTINGS if not os.environ.get(name)]
    if missing:
        pytest.skip(f"no https settings of proxypool dev: {', '.join(missing)} not set")
    env = os.environ
    host, _, port = env["PROXYPOOL_GATEWAY_TLS"].rpartition(":")
    return HttpsDev(
        dev=dev,
        site=env["PROXYPOOL_TEST_HTTPS_SITE"],
        gateway_ca=env["PROXYPOOL_GATEWAY_CA"],
        site_ca=env["PROXYPOOL_TEST_SITE_CA"],
        tls_host=host,
        tls_port=int(port),
        tls_ca=env["PROXYPOOL_GATEWAY_TLS_CA"],
    )


@pytest.fixture()
def api(dev: Dev) -> Iterator[Client]:
    with dev.client_api() as client:
        yield client


def run_crawl(
    dev: Optional[Dev],
    spec: Dict[str, Any],
    settings: Optional[Dict[str, Any]] = None,
    env: Optional[Dict[str, str]] = None,
) -> Dict[str, Any]:
    """Runs `tests/crawl.py` (a Scrapy crawl, in a process of its own: Twisted's reactor
    starts once per process) with dev's settings, then `settings`, and `env` added to its
    environment; its JSON report, with `returncode` and `stderr` added."""
    merged: Dict[str, Any] = {}
    if dev is not None:
        merged.update(
            PROXYPOOL_GATEWAY=f"{dev.host}:{dev.port}",
            PROXYPOOL_USERNAME=dev.client,
            PROXYPOOL_PASSWORD=dev.password,
            PROXYPOOL_API=dev.api,
            PROXYPOOL_TOKEN=dev.token,
        )
    merged.update(settings or {})
    spec = {**spec, "settings": merged}
    done = subprocess.run(
        [sys.executable, str(TESTS / "crawl.py")],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
    )
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "{}"
    report: Dict[str, Any] = json.loads(last)
    report["returncode"] = done.returncode
    report["stderr"] = done.stderr
    return report


@pytest.fixture()
def crawl(dev: Dev) -> Callable[..., Dict[str, Any]]:
    """`crawl(spec, settings, env)`: :func:`run_crawl` against dev."""
    return lambda spec, settings=None, env=None: run_crawl(dev, spec, settings, env)

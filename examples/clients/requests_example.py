"""proxypool from Python `requests`, with the proxypool-client package
(`pip install ./clients/python`): extract a proxy through the client API and use it, then
go through the gateway, rotating and with a sticky session, reading which proxy carried
each answer from `X-Proxypool-Proxy`.

Settings come from the environment (or the matching flags; `--help` lists them):

    PROXYPOOL_API       client API URL             (default http://127.0.0.1:17080)
    PROXYPOOL_TOKEN     API token                  (required)
    PROXYPOOL_GATEWAY   gateway HTTP address       (default 127.0.0.1:18080)
    PROXYPOOL_USERNAME  client id, no selectors    (default dev)
    PROXYPOOL_PASSWORD  gateway password           (required)
    TARGET_URL          the page to fetch          (required; with `proxypool dev`, an
                                                    "origin by name" URL it prints)

Exits 0 when every step did what it says, 1 otherwise (or when the API or the gateway
refused, saying why on stderr).
"""

import argparse
import os
import sys

import requests

from proxypool_client import Client, GatewaySession, ProxypoolError, answer_of, gateway_username, new_session_id
from proxypool_client.gateway import split_address

TIMEOUT = 10


def exit_of(response):
    """The exit address `proxypool dev`'s origin echoes; None from any other site."""
    try:
        return response.json().get("exit")
    except ValueError:
        return None


def extract_and_use(args, api):
    """Takes one HTTP proxy for this client alone and fetches the target through it."""
    extraction = api.extract(1, protocol="http")
    if not extraction.proxies:
        print("extraction: no proxy available")
        return False
    proxy = extraction.proxies[0]
    page = requests.get(args.target, proxies=proxy.requests_proxies(), timeout=TIMEOUT)
    # Straight to the vendor's proxy: the gateway is not involved, so no proxypool header.
    print(f"extracted proxy {proxy.id} ({proxy.host}:{proxy.port}): "
          f"status {page.status_code}, exit {exit_of(page)}")
    return page.ok and "X-Proxypool-Proxy" not in page.headers


def fetch_through_gateway(args, api, times, session=None):
    """`times` GETs through the gateway: the (proxy id, exit) of each. A ban status would
    be reported to the API with the answer's proxy id and ticket."""
    seen = []
    gateway = split_address(args.gateway)
    with GatewaySession(args.username, args.password, **gateway, api=api, session=session) as http:
        for _ in range(times):
            page = http.get(args.target, timeout=TIMEOUT)
            page.raise_for_status()
            seen.append((answer_of(page).proxy_id, exit_of(page)))
    return seen


def rotation(args, api):
    """Without a session every request may take another proxy."""
    seen = fetch_through_gateway(args, api, 8)
    proxies = {proxy for proxy, _ in seen}
    print(f"rotation: {len(seen)} requests through {len(proxies)} proxies, "
          f"exits {sorted({exit for _, exit in seen if exit})}")
    return len(proxies) > 1


def sticky_session(args, api):
    """`-session-NAME` keeps one proxy, so one exit, for as long as the session lives."""
    session = new_session_id()
    seen = fetch_through_gateway(args, api, 5, session=session)
    proxies = {proxy for proxy, _ in seen}
    exits = {exit for _, exit in seen}
    print(f"sticky session {gateway_username(args.username, session=session)}: {len(seen)} requests "
          f"through {len(proxies)} proxy, exits {sorted(e for e in exits if e)}")
    return len(proxies) == 1 and len(exits) == 1


def main():
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", default=env("PROXYPOOL_API", "http://127.0.0.1:17080"))
    parser.add_argument("--token", default=env("PROXYPOOL_TOKEN"))
    parser.add_argument("--gateway", default=env("PROXYPOOL_GATEWAY", "127.0.0.1:18080"))
    parser.add_argument("--username", default=env("PROXYPOOL_USERNAME", "dev"))
    parser.add_argument("--password", default=env("PROXYPOOL_PASSWORD"))
    parser.add_argument("--target", default=env("TARGET_URL"))
    args = parser.parse_args()
    for name in ("token", "password", "target"):
        if not getattr(args, name):
            parser.error(f"--{name} (or its environment variable) is required")

    try:
        with Client(args.api, args.token) as api:
            results = {
                "extraction": extract_and_use(args, api),
                "rotation": rotation(args, api),
                "sticky session": sticky_session(args, api),
            }
    except (ProxypoolError, requests.RequestException) as failure:
        # The API's or the gateway's refusal, with its status and code.
        print(f"error: {failure}", file=sys.stderr)
        return 1
    failed = [step for step, ok in results.items() if not ok]
    print("FAILED: " + ", ".join(failed) if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

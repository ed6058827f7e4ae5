"""proxypool from Python `requests`, with the proxypool-client package
(`pip install ./clients/python`): extract a proxy through the client API and use it, then
go through the gateway, rotating and with a sticky session, reading which proxy carried
each answer from `X-Proxypool-Proxy`; then an https page both ways: through a plain
tunnel (TLS from here to the site: the answer cannot name its proxy) and inspected by the
gateway (`-inspect`: every answer names its proxy and carries a ticket, as on plain http).

Settings come from the environment (or the matching flags; `--help` lists them):

    PROXYPOOL_API       client API URL             (default http://127.0.0.1:17080)
    PROXYPOOL_TOKEN     API token                  (required)
    PROXYPOOL_GATEWAY   gateway HTTP address       (default 127.0.0.1:18080)
    PROXYPOOL_USERNAME  client id, no selectors    (default dev)
    PROXYPOOL_PASSWORD  gateway password           (required)
    TARGET_URL          the page to fetch          (required; with `proxypool dev`, an
                                                    "origin by name" URL it prints)
    HTTPS_TARGET_URL    an https page              (optional: the https steps run with it)
    PROXYPOOL_GATEWAY_CA  the gateway's CA, which inspected tunnels' certificates chain to
    SITE_CA             the https site's CA when it is a private one (dev's), else unset

The https steps trust one bundle: the public roots (certifi's, which `requests` uses), the
gateway's CA and SITE_CA. Verification stays on.

Exits 0 when every step did what it says, 1 otherwise (or when the API or the gateway
refused, saying why on stderr).
"""

import argparse
import os
import sys
import tempfile

import certifi
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


def trust_bundle(*cas):
    """A CA bundle file: the public roots and each of `cas` (PEM files)."""
    parts = [open(certifi.where()).read()] + [open(ca).read() for ca in cas if ca]
    bundle = tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False)
    with bundle:
        bundle.write("\n".join(parts))
    return bundle.name


def https_both_ways(args, api):
    """An https page through a plain tunnel, then inspected by the gateway."""
    bundle = trust_bundle(args.gateway_ca, args.site_ca)
    gateway = split_address(args.gateway)
    try:
        # A plain tunnel: the gateway relays TLS it cannot read; the answer is the site's
        # alone (the proxy id came with the CONNECT answer, which requests keeps to itself).
        with GatewaySession(args.username, args.password, **gateway, api=api, verify=bundle) as http:
            page = http.get(args.https_target, timeout=TIMEOUT)
            page.raise_for_status()
        tunnel_id = answer_of(page).proxy_id
        print(f"https tunnel: status {page.status_code}, exit {exit_of(page)}, "
              f"proxy named in the answer: {tunnel_id or 'no (TLS end to end)'}")
        # Inspected: the gateway ends the TLS with a certificate from its CA, forwards each
        # request and names the proxy of every answer, with the ticket a ban report needs.
        with GatewaySession(args.username, args.password, **gateway, api=api, verify=bundle,
                            inspect=True) as http:
            answers = [http.get(args.https_target, timeout=TIMEOUT) for _ in range(6)]
        for page in answers:
            page.raise_for_status()
        named = [answer_of(page) for page in answers]
        proxies = {answer.proxy_id for answer in named}
        print(f"https inspected: {len(answers)} requests through {len(proxies)} proxies, "
              f"{sum(1 for a in named if a.proxy_id and a.ticket)} answers naming their proxy "
              f"and ticket, e.g. {named[0].proxy_id} {str(named[0].ticket)[:16]}...")
    finally:
        os.unlink(bundle)
    return tunnel_id is None and all(answer.proxy_id and answer.ticket for answer in named)


def main():
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", default=env("PROXYPOOL_API", "http://127.0.0.1:17080"))
    parser.add_argument("--token", default=env("PROXYPOOL_TOKEN"))
    parser.add_argument("--gateway", default=env("PROXYPOOL_GATEWAY", "127.0.0.1:18080"))
    parser.add_argument("--username", default=env("PROXYPOOL_USERNAME", "dev"))
    parser.add_argument("--password", default=env("PROXYPOOL_PASSWORD"))
    parser.add_argument("--target", default=env("TARGET_URL"))
    parser.add_argument("--https-target", default=env("HTTPS_TARGET_URL"))
    parser.add_argument("--gateway-ca", default=env("PROXYPOOL_GATEWAY_CA"))
    parser.add_argument("--site-ca", default=env("SITE_CA"))
    args = parser.parse_args()
    for name in ("token", "password", "target"):
        if not getattr(args, name):
            parser.error(f"--{name} (or its environment variable) is required")
    if args.https_target and not args.gateway_ca:
        parser.error("--https-target needs --gateway-ca (or PROXYPOOL_GATEWAY_CA): the inspected step trusts it")

    try:
        with Client(args.api, args.token) as api:
            results = {
                "extraction": extract_and_use(args, api),
                "rotation": rotation(args, api),
                "sticky session": sticky_session(args, api),
            }
            if args.https_target:
                results["https"] = https_both_ways(args, api)
    except (ProxypoolError, requests.RequestException) as failure:
        # The API's or the gateway's refusal, with its status and code.
        print(f"error: {failure}", file=sys.stderr)
        return 1
    failed = [step for step, ok in results.items() if not ok]
    print("FAILED: " + ", ".join(failed) if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

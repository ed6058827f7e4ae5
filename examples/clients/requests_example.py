"""proxypool from Python `requests`: extract a proxy through the client API and use it,
then go through the gateway, rotating and with a sticky session, reading which proxy
carried each answer from `X-Proxypool-Proxy`.

Settings come from the environment (or the matching flags; `--help` lists them):

    PROXYPOOL_API       client API URL             (default http://127.0.0.1:17080)
    PROXYPOOL_TOKEN     API token                  (required)
    PROXYPOOL_GATEWAY   gateway HTTP address       (default 127.0.0.1:18080)
    PROXYPOOL_USERNAME  client id, no selectors    (default dev)
    PROXYPOOL_PASSWORD  gateway password           (required)
    TARGET_URL          the page to fetch          (required; with `proxypool dev`, an
                                                    "origin by name" URL it prints)

Exits 0 when every step did what it says, 1 otherwise.
"""

import argparse
import os
import sys
import uuid
from urllib.parse import quote

import requests

TIMEOUT = 10


def gateway_proxy(args, username):
    """The gateway as a `requests` proxy URL; selectors ride in the username."""
    url = f"http://{quote(username, safe='')}:{quote(args.password, safe='')}@{args.gateway}"
    return {"http": url, "https": url}


def exit_of(response):
    """The exit address `proxypool dev`'s origin echoes; None from any other site."""
    try:
        return response.json().get("exit")
    except ValueError:
        return None


def extract_and_use(args):
    """Takes one HTTP proxy for this client alone and fetches the target through it."""
    answer = requests.post(
        f"{args.api}/v1/extractions",
        headers={"Authorization": f"Bearer {args.token}"},
        json={"count": 1, "filters": {"protocol": "http"}},
        timeout=TIMEOUT,
    )
    answer.raise_for_status()
    proxies = answer.json()["proxies"]
    if not proxies:
        print("extraction: no proxy available")
        return False
    proxy = proxies[0]
    credentials = ""
    if proxy.get("username"):
        credentials = f"{quote(proxy['username'], safe='')}:{quote(proxy['password'] or '', safe='')}@"
    url = f"http://{credentials}{proxy['host']}:{proxy['port']}"
    page = requests.get(args.target, proxies={"http": url, "https": url}, timeout=TIMEOUT)
    # Straight to the vendor's proxy: the gateway is not involved, so no proxypool header.
    print(f"extracted proxy {proxy['id']} ({proxy['host']}:{proxy['port']}): "
          f"status {page.status_code}, exit {exit_of(page)}")
    return page.ok and "X-Proxypool-Proxy" not in page.headers


def fetch_through_gateway(args, username, times):
    """`times` GETs through the gateway as `username`: the (proxy id, exit) of each."""
    seen = []
    with requests.Session() as session:
        session.proxies.update(gateway_proxy(args, username))
        for _ in range(times):
            page = session.get(args.target, timeout=TIMEOUT)
            page.raise_for_status()
            seen.append((page.headers["X-Proxypool-Proxy"], exit_of(page)))
    return seen


def rotation(args):
    """Without a session every request may take another proxy."""
    seen = fetch_through_gateway(args, args.username, 8)
    proxies = {proxy for proxy, _ in seen}
    print(f"rotation: {len(seen)} requests through {len(proxies)} proxies, "
          f"exits {sorted({exit for _, exit in seen if exit})}")
    return len(proxies) > 1


def sticky_session(args):
    """`-session-NAME` keeps one proxy, so one exit, for as long as the session lives."""
    username = f"{args.username}-session-{uuid.uuid4().hex[:12]}"
    seen = fetch_through_gateway(args, username, 5)
    proxies = {proxy for proxy, _ in seen}
    exits = {exit for _, exit in seen}
    print(f"sticky session {username}: {len(seen)} requests through {len(proxies)} proxy, "
          f"exits {sorted(e for e in exits if e)}")
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

    results = {
        "extraction": extract_and_use(args),
        "rotation": rotation(args),
        "sticky session": sticky_session(args),
    }
    failed = [step for step, ok in results.items() if not ok]
    print("FAILED: " + ", ".join(failed) if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

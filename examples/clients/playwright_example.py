"""proxypool from Playwright: Chromium browses through the gateway, with selectors in the
proxy username (written by proxypool-client's `gateway_username`). A sticky session (`-session-NAME`) keeps one proxy, so one exit, across
page loads; the plain username rotates.

Settings come from the environment (or the matching flags; `--help` lists them):

    PROXYPOOL_GATEWAY   gateway HTTP address       (default 127.0.0.1:18080)
    PROXYPOOL_USERNAME  client id, no selectors    (default dev)
    PROXYPOOL_PASSWORD  gateway password           (required)
    TARGET_URL          the page to load           (required; a host name: Chromium never
                                                    sends loopback addresses to a proxy)
    CHROMIUM_PATH       the browser                (default /usr/bin/chromium, Debian's;
                                                    Playwright's own download is not needed)

Exits 0 when the session kept one proxy and rotation used more than one, 1 otherwise.
"""

import argparse
import json
import os
import sys
from playwright.sync_api import sync_playwright
from proxypool_client import gateway_username, new_session_id

LOADS = 4


def load_pages(browser, args, username):
    """LOADS page loads in a fresh context as `username`: (proxy id, exit) of each."""
    context = browser.new_context(proxy={
        "server": f"http://{args.gateway}",
        "username": username,
        "password": args.password,
    })
    page = context.new_page()
    seen = []
    for n in range(LOADS):
        # A new query each time: the browser must not answer from its cache.
        response = page.goto(f"{args.target}?load={n}")
        if response is None or not response.ok:
            raise SystemExit(f"{username}: load {n} failed: {response and response.status}")
        try:
            exit = json.loads(page.inner_text("body")).get("exit")
        except ValueError:
            exit = None  # not `proxypool dev`'s origin
        seen.append((response.headers.get("x-proxypool-proxy"), exit))
    context.close()
    return seen


def main():
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateway", default=env("PROXYPOOL_GATEWAY", "127.0.0.1:18080"))
    parser.add_argument("--username", default=env("PROXYPOOL_USERNAME", "dev"))
    parser.add_argument("--password", default=env("PROXYPOOL_PASSWORD"))
    parser.add_argument("--target", default=env("TARGET_URL"))
    parser.add_argument("--chromium", default=env("CHROMIUM_PATH", "/usr/bin/chromium"))
    args = parser.parse_args()
    for name in ("password", "target"):
        if not getattr(args, name):
            parser.error(f"--{name} (or its environment variable) is required")

    session = gateway_username(args.username, session=new_session_id())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium)
        sticky = load_pages(browser, args, session)
        rotating = load_pages(browser, args, args.username)
        browser.close()

    ok = True
    for label, seen, holds in (
        (f"sticky session {session}", sticky, lambda proxies: len(proxies) == 1),
        (f"rotation as {args.username}", rotating, lambda proxies: len(proxies) > 1),
    ):
        proxies = {proxy for proxy, _ in seen}
        exits = sorted({exit for _, exit in seen if exit})
        print(f"{label}: {len(seen)} page loads through {len(proxies)} proxies {sorted(proxies)}, exits {exits}")
        ok = ok and None not in proxies and holds(proxies)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

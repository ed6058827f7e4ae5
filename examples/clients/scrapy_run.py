"""Runs a small spider through proxypool-client's Scrapy add-on
(`ADDONS = {"proxypool_client.scrapy.Addon": 0}`; `pip install "./clients/python[scrapy]"`):
it submits a site's search form for a few queries (POST, so the gateway never resends a
banned one itself) and prints, for each answer, the proxy that carried it and the bans it
met, which the add-on reported to the API with the proxy's id and ticket and retried.

With `--inspect` the target may be an https site: the gateway inspects the tunnels
(`-inspect`; the client's `inspection` must be `allowed`), so https answers name their
proxy and bans are reported by proxy id as on plain http. Scrapy then verifies
certificates (`DOWNLOAD_VERIFY_CERTIFICATES`) against OpenSSL's default store, which this
script points at a bundle of the public roots, the gateway's CA and SITE_CA
(`SSL_CERT_FILE`; Scrapy has no setting for a CA bundle of its own).

Settings come from the environment (or the matching flags; `--help` lists them):

    PROXYPOOL_API       client API URL             (default http://127.0.0.1:17080)
    PROXYPOOL_TOKEN     API token                  (required)
    PROXYPOOL_GATEWAY   gateway HTTP address       (default 127.0.0.1:18080)
    PROXYPOOL_USERNAME  client id, selectors allowed (default dev)
    PROXYPOOL_PASSWORD  gateway password           (required)
    TARGET_URL          the search form's URL      (required)
    PROXYPOOL_GATEWAY_CA  the gateway's CA (with --inspect)
    SITE_CA             the https site's CA when it is a private one (dev's), else unset

Exits 0 when every query was answered 200 and every ban on the way was reported (a 2xx
feedback answer) and retried through another proxy; with `--require-ban`, also only if
at least one ban happened (against `proxypool dev --ban-exit ...`).
"""

import argparse
import os
import sys
import tempfile

import certifi

import scrapy
from scrapy.crawler import CrawlerProcess



class SearchSpider(scrapy.Spider):
    name = "search"

    def __init__(self, target, queries, **kwargs):
        super().__init__(**kwargs)
        self.target = target
        self.queries = queries

    async def start(self):
        for query in self.queries:
            yield scrapy.FormRequest(self.target, formdata={"q": query}, cb_kwargs={"query": query})

    def parse(self, response, query):
        yield {
            "query": query,
            "status": response.status,
            "proxy": response.headers.get("X-Proxypool-Proxy", b"").decode(),
            "bans": response.meta.get("proxypool_bans", []),
        }


def main():
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", default=env("PROXYPOOL_API", "http://127.0.0.1:17080"))
    parser.add_argument("--token", default=env("PROXYPOOL_TOKEN"))
    parser.add_argument("--gateway", default=env("PROXYPOOL_GATEWAY", "127.0.0.1:18080"))
    parser.add_argument("--username", default=env("PROXYPOOL_USERNAME", "dev"))
    parser.add_argument("--password", default=env("PROXYPOOL_PASSWORD"))
    parser.add_argument("--target", default=env("TARGET_URL"))
    parser.add_argument("--queries", type=int, default=12)
    parser.add_argument("--require-ban", action="store_true")
    parser.add_argument("--inspect", action="store_true")
    parser.add_argument("--gateway-ca", default=env("PROXYPOOL_GATEWAY_CA"))
    parser.add_argument("--site-ca", default=env("SITE_CA"))
    args = parser.parse_args()
    for name in ("token", "password", "target"):
        if not getattr(args, name):
            parser.error(f"--{name} (or its environment variable) is required")
    if args.inspect and not args.gateway_ca:
        parser.error("--inspect needs --gateway-ca (or PROXYPOOL_GATEWAY_CA): Scrapy must trust it")
    inspection = {}
    if args.inspect:
        # OpenSSL reads SSL_CERT_FILE when Scrapy asks for its default store: the public
        # roots (for sites the gateway does not inspect) and the gateway's CA.
        bundle = tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False)
        with bundle:
            for ca in (certifi.where(), args.gateway_ca, args.site_ca):
                if ca:
                    bundle.write(open(ca).read() + "\n")
        os.environ["SSL_CERT_FILE"] = bundle.name
        inspection = {"PROXYPOOL_SELECTORS": {"inspect": True}, "DOWNLOAD_VERIFY_CERTIFICATES": True}

    items = []
    process = CrawlerProcess(settings={
        "ADDONS": {"proxypool_client.scrapy.Addon": 0},
        "PROXYPOOL_GATEWAY": args.gateway,
        "PROXYPOOL_USERNAME": args.username,
        "PROXYPOOL_PASSWORD": args.password,
        "PROXYPOOL_API": args.api,
        "PROXYPOOL_TOKEN": args.token,
        "PROXYPOOL_BAN_RETRIES": 8,
        "ITEM_PIPELINES": {},
        "LOG_LEVEL": "INFO",
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        **inspection,
    })
    crawler = process.create_crawler(SearchSpider)
    def collect(item):
        items.append(item)

    # Signals hold their receivers weakly: `collect` lives as long as this function.
    crawler.signals.connect(collect, signal=scrapy.signals.item_scraped)
    process.crawl(crawler, target=args.target, queries=[f"query-{n}" for n in range(args.queries)])
    process.start()

    problems = []
    bans = 0
    for item in sorted(items, key=lambda item: int(item["query"].split("-")[1])):
        # Each ban is a proxypool_client.BanReport.
        for ban in item["bans"]:
            bans += 1
            print(f"{item['query']}: proxy {ban.proxy_id} answered {ban.status}, "
                  f"reported: feedback {ban.feedback_status} {ban.outcome or ban.error}")
            if not ban.reported:
                problems.append(f"{item['query']}: the report of {ban.proxy_id} was refused")
            if ban.proxy_id == item["proxy"]:
                problems.append(f"{item['query']}: retried through the banned proxy {ban.proxy_id}")
            if args.inspect and not ban.proxy_id:
                problems.append(f"{item['query']}: a ban in an inspected tunnel without its proxy id")
        print(f"{item['query']}: {item['status']} through proxy {item['proxy']}")
    answered = {item["query"] for item in items if item["status"] == 200}
    if len(answered) != args.queries:
        problems.append(f"{args.queries - len(answered)} queries without a 200 answer")
    if args.require_ban and bans == 0:
        problems.append("no ban met (--require-ban)")
    print(f"{len(answered)} of {args.queries} queries answered, {bans} bans reported and retried")
    print("FAILED: " + "; ".join(problems) if problems else "OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

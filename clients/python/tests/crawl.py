"""One Scrapy crawl for the add-on's tests, in a process of its own.

Reads a JSON spec on standard input: `settings` (Scrapy settings; the add-on is enabled
through `ADDONS` unless the spec's settings say otherwise) and `requests`, each
`{"url", "method", "formdata", "meta"}`. Prints, as its last line, a JSON report: the
`items` (one per answer: its index, status, the proxy that carried it, the exit dev's
origin saw, the bans it met) and the crawl's `stats` whose keys start with `proxypool/`
or `retry/`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any, AsyncIterator, Dict, Iterator, List

import scrapy
from scrapy.crawler import CrawlerProcess


class ListSpider(scrapy.Spider):
    name = "addon_test"

    def __init__(self, requests: List[Dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.planned = requests

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for index, spec in enumerate(self.planned):
            meta = dict(spec.get("meta", {}))
            kwargs: Dict[str, Any] = dict(meta=meta, cb_kwargs={"index": index}, dont_filter=True)
            if "formdata" in spec:
                yield scrapy.FormRequest(spec["url"], formdata=spec["formdata"], **kwargs)
            else:
                yield scrapy.Request(spec["url"], method=spec.get("method", "GET"), **kwargs)

    def parse(self, response: scrapy.http.Response, index: int) -> Iterator[Dict[str, Any]]:
        try:
            exit = json.loads(response.text).get("exit")
        except ValueError:
            exit = None
        yield {
            "index": index,
            "status": response.status,
            "proxy": (response.headers.get("X-Proxypool-Proxy") or b"").decode(),
            "exit": exit,
            "bans": [dataclasses.asdict(ban) for ban in response.meta.get("proxypool_bans", [])],
        }


def main() -> int:
    spec = json.load(sys.stdin)
    settings = {
        "ADDONS": {"proxypool_client.scrapy.Addon": 0},
        "LOG_LEVEL": "INFO",
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        # Bans are answers the spider must see (after the add-on's retries).
        "HTTPERROR_ALLOW_ALL": True,
        **spec["settings"],
    }
    items: List[Dict[str, Any]] = []
    process = CrawlerProcess(settings=settings)
    crawler = process.create_crawler(ListSpider)

    def collect(item: Dict[str, Any]) -> None:
        items.append(item)

    crawler.signals.connect(collect, signal=scrapy.signals.item_scraped)
    failures: List[str] = []
    # A crawl that cannot start (bad settings) fails its deferred; the process must say
    # so in its exit code, as `scrapy crawl` does.
    process.crawl(crawler, requests=spec["requests"]).addErrback(lambda f: failures.append(f.getTraceback()))
    process.start()
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1
    stats = {
        key: value
        for key, value in (crawler.stats.get_stats() if crawler.stats else {}).items()
        if key.startswith(("proxypool/", "retry/"))
    }
    print(json.dumps({"items": sorted(items, key=lambda i: i["index"]), "stats": stats}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time a scrape of /metrics on whatever fleet the database holds (bench/seed_large.py loads the large demo fleet:
12,500 nodes, 100,000 accelerators).

Usage:
    python bench/metrics_bench.py [--database-url URL] [--repeat N]

Default database: var/bench/large.sqlite3 (what bench/seed_large.py writes). Prints the row counts, the time of
a cold scrape (fleet gauges computed: the figure that matters, paid once per GPUOPS_METRICS_CACHE_SECONDS), of a
warm one (gauges from the cache), each section's own time, the queries a cold scrape runs, and the body size.
Requests go through Django's test client (middleware included, no network) with the scrape token.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import django_configure  # noqa: E402 (after the path is set)

TOKEN = "bench-scrape-token"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    url = django_configure(args.database_url, GPUOPS_METRICS_TOKEN=TOKEN)

    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from cmdb.models import Accelerator, Node
    from gpuops.metrics import CACHE_KEY, fleet_gauges_compute

    print(f"database: {url.split('@')[-1]}")
    print(f"fleet: {Node.objects.count():,} nodes, {Accelerator.objects.count():,} accelerators")
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}

    def scrape() -> tuple[float, int]:
        started = time.perf_counter()
        response = client.get("/metrics", **headers)
        elapsed = time.perf_counter() - started
        assert response.status_code == 200, response.status_code
        return elapsed, len(response.content)

    scrape()  # warm-up: imports, URL resolution, the first connection
    cold: list[float] = []
    warm: list[float] = []
    size = 0
    for _ in range(max(1, args.repeat)):
        cache.delete(CACHE_KEY)
        elapsed, size = scrape()
        cold.append(elapsed)
        warm.append(scrape()[0])
    cache.delete(CACHE_KEY)
    with CaptureQueriesContext(connection) as ctx:
        scrape()
    median = sorted(cold)[len(cold) // 2]
    print(f"cold scrape (gauges computed): best {min(cold) * 1000:.0f} ms, median {median * 1000:.0f} ms")
    print(f"warm scrape (gauges cached):   best {min(warm) * 1000:.0f} ms")
    print(f"queries per cold scrape: {len(ctx.captured_queries)}; body {size / 1024:.0f} KiB")
    for gauge in fleet_gauges_compute():
        if gauge.name == "gpuops_fleet_section_seconds":
            for (section,), seconds in gauge.samples:
                print(f"  section {section}: {seconds * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

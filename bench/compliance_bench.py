"""Time the firmware / driver compliance report on whatever fleet the database holds (bench/seed_large.py loads
the large demo fleet: 12,500 nodes, 100,000 accelerators, with firmware and baselines).

Usage:
    python bench/compliance_bench.py [--database-url URL] [--repeat N]

Default database: var/bench/large.sqlite3 (what bench/seed_large.py writes). Prints the row counts, then for
GET /api/cmdb/compliance/ (per-slice counts), GET /api/cmdb/compliance/components/?status=outdated (first page)
and the CSV export of the outdated rows: the best and median time of --repeat runs and the queries of one run.
Requests go through Django's test client (middleware and DRF included, no network) as a superuser.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import django_configure  # noqa: E402 (after the path is set)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    url = django_configure(args.database_url)

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.authtoken.models import Token

    from cmdb.models import FirmwareBaseline, FirmwareComponent, InstalledSoftware, Node

    print(f"database: {url.split('@')[-1]}")
    print(
        f"fleet: {Node.objects.count():,} nodes, {FirmwareComponent.objects.count():,} firmware components, "
        f"{InstalledSoftware.objects.count():,} driver packages, {FirmwareBaseline.objects.count()} baselines"
    )
    user, _ = get_user_model().objects.get_or_create(username="bench-compliance", defaults={"is_superuser": True})
    token, _ = Token.objects.get_or_create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}")

    def run(path: str) -> float:
        started = time.perf_counter()
        response = client.get(path)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        elapsed = time.perf_counter() - started
        assert response.status_code == 200, (response.status_code, body[:300])
        return elapsed

    for path in (
        "/api/cmdb/compliance/",
        "/api/cmdb/compliance/components/?status=outdated",
        "/api/cmdb/compliance/export.csv?status=outdated",
    ):
        run(path)  # warm-up
        times = sorted(run(path) for _ in range(max(1, args.repeat)))
        with CaptureQueriesContext(connection) as ctx:
            run(path)
        print(
            f"{path}: best {times[0] * 1000:.0f} ms, median {times[len(times) // 2] * 1000:.0f} ms, "
            f"{len(ctx.captured_queries)} queries"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

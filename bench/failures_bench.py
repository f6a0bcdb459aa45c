"""Time the failure analytics on whatever fleet the database holds (the large demo fleet: 12,500 nodes, 100,000
accelerators).

Usage:
    python bench/failures_bench.py [--database-url URL] [--repeat N]

Prints the row counts, then for GET /api/workflows/failures/rates/ (by model, by driver), .../signals/,
.../repeat-offenders/ and the console page /failures/: the best and median time of --repeat runs and the
queries of one run. Requests go through Django's test client (middleware and DRF included, no network) as a
superuser and as a user with a view grant on one site.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import django_configure  # noqa: E402 (after the path is set)

PATHS = [
    "/api/workflows/failures/rates/?by=model",
    "/api/workflows/failures/rates/?by=driver",
    "/api/workflows/failures/signals/",
    "/api/workflows/failures/repeat-offenders/",
    "/failures/",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    url = django_configure(args.database_url)

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from cmdb.models import Accelerator, AcceleratorPlacement, HealthEvent, Node, Site
    from cmdb.permissions import grant_scope

    print(f"database: {url.split('@')[-1]}")
    print(
        f"fleet: {Node.objects.count():,} nodes, {Accelerator.objects.count():,} cards, "
        f"{AcceleratorPlacement.objects.count():,} placements, {HealthEvent.objects.count():,} health events"
    )
    users = get_user_model().objects
    root, _ = users.get_or_create(username="bench-failures-root", defaults={"is_superuser": True})
    viewer, _ = users.get_or_create(username="bench-failures-site")
    site = Site.objects.order_by("code").first()
    grant_scope(scope_obj=site, perms=["view_scope"], users=[viewer])
    for label, user in (("superuser", root), (f"site {site.code} viewer", viewer)):
        client = Client()
        client.force_login(user)
        for path in PATHS:
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                response = client.get(path)
                times.append(time.perf_counter() - started)
                assert response.status_code == 200, (path, response.status_code)
            with CaptureQueriesContext(connection) as queries:
                client.get(path)
            print(
                f"{label:>22} {path:<45} best {min(times) * 1000:8.1f} ms  median "
                f"{statistics.median(times) * 1000:8.1f} ms  {len(queries)} queries"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

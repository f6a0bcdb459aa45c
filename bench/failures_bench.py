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
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import django_configure, pages_time  # noqa: E402 (after the path is set)

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

    from cmdb.models import Accelerator, AcceleratorPlacement, HealthEvent, Node

    print(f"database: {url.split('@')[-1]}")
    print(
        f"fleet: {Node.objects.count():,} nodes, {Accelerator.objects.count():,} cards, "
        f"{AcceleratorPlacement.objects.count():,} placements, {HealthEvent.objects.count():,} health events"
    )
    pages_time(PATHS, repeat=args.repeat, users_prefix="bench-failures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

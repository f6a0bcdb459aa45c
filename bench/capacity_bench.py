"""Time the card-hours rollup and the card-hours report on whatever fleet the database holds (the large demo
fleet: 12,500 nodes, 100,000 accelerators).

Usage:
    python bench/capacity_bench.py [--database-url URL] [--months 12] [--repeat N]

Loads the demo's node history and prices when absent (cmdb.services.demo_history.demo_capacity_load), times
`capacity_rollup` over --months months (what `manage.py capacity_rollup` and, for two months, the hourly beat
task cost) with its peak memory, then GET /api/cmdb/reports/card-hours/ for the whole period by each dimension
and the console page /lifecycle/ with that period: best and median of --repeat runs and the queries of one run,
as a superuser and as a user with a view grant on one site.
"""

from __future__ import annotations

import argparse
import datetime as dt
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import django_configure, pages_time  # noqa: E402 (after the path is set)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    url = django_configure(args.database_url)

    from django.utils import timezone

    from cmdb.models import Accelerator, AcceleratorPlacement, CardHours, ChangeRecord, Node
    from cmdb.services.capacity import capacity_rollup, month_start
    from cmdb.services.demo_history import demo_capacity_load

    print(f"database: {url.split('@')[-1]}")
    written = demo_capacity_load()
    print(
        f"fleet: {Node.objects.count():,} nodes, {Accelerator.objects.count():,} cards, "
        f"{AcceleratorPlacement.objects.count():,} placements, {ChangeRecord.objects.count():,} change records"
        + (f" ({written:,} node history records added)" if written else "")
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = capacity_rollup(months=args.months)
    took = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"rollup of {args.months} months: {took:.2f} s, {result.spans:,} node state spans, {result.rows:,} CardHours "
        f"rows (peak RSS {peak / 1024:.0f} MiB, +{(peak - before) / 1024:.0f} MiB)"
    )
    first, last = result.months[0], result.months[-1]
    period = f"from={first:%Y-%m}&to={last:%Y-%m}"
    print(f"report period {first:%Y-%m} to {last:%Y-%m}: {CardHours.objects.count():,} rollup rows in all")
    paths = [f"/api/cmdb/reports/card-hours/?{period}&by={by}" for by in ("tenant", "cluster", "site", "model")]
    paths.append(f"/lifecycle/?{period}")
    pages_time(paths, repeat=args.repeat, users_prefix="bench-capacity")
    last_month = month_start(month_start(timezone.localdate()) - dt.timedelta(days=1))
    print(f"(the page's default period is last month, {last_month:%Y-%m})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark the ops console's pages on the large demo fleet (12,500 nodes, 100,000 accelerators).

Usage:
    python bench/ui_bench.py [--database-url URL] [--repeat N]

The database and fleet are those of bench/api_bench.py (var/bench/api_bench.sqlite3 by default, loaded on first
use; for PostgreSQL create the database and pass --database-url postgres://postgres@127.0.0.1:5432/gpuops_bench).

Each page is requested --repeat times through Django's test client (middleware, sessions, template rendering; no
network) as a superuser and as a viewer of one site; the figures are the median (p50) and the slowest server time,
and the number of SQL queries of one request. The target is p50 <= 100 ms on PostgreSQL for the dashboard, the
node page, the rack page and search.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import api_bench  # noqa: E402  (the shared database set-up and fleet)


def _clients() -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from cmdb.models import Site
    from cmdb.permissions import grant_scope

    user_model = get_user_model()
    root, _ = user_model.objects.get_or_create(username="bench-root", defaults={"is_superuser": True, "is_staff": True})
    tech, created = user_model.objects.get_or_create(username="bench-wh1-viewer")
    if created:
        grant_scope(scope_obj=Site.objects.get(code="wh1"), perms=["view_scope"], users=[tech])
    clients = {}
    for label, user in (("superuser", root), ("wh1 viewer", tech)):
        client = Client()
        client.force_login(user)
        clients[label] = client
    return clients


def _pages() -> list[tuple[str, str]]:
    """(label, path) of the measured pages, on objects of site wh1 (visible to both users)."""
    from cmdb.models import Accelerator, Node, Rack

    node = Node.objects.filter(site__code="wh1").order_by("pk").select_related("rack").first()
    if node is None:
        raise SystemExit("The fleet has no node in site wh1: is the large demo loaded?")
    rack = node.rack or Rack.objects.filter(room__site__code="wh1").order_by("pk").first()
    card = Accelerator.objects.filter(node=node).order_by("slot_index").first()
    partial = card.serial[2:-2] if card is not None else node.hostname[:6]
    return [
        ("dashboard /", "/"),
        (f"node page /nodes/{node.hostname}/", f"/nodes/{node.hostname}/"),
        (f"rack page /racks/{rack.pk}/", f"/racks/{rack.pk}/"),
        (f"search exact serial ?q={card.serial}", f"/search/?q={card.serial}"),
        (f"search partial serial ?q={partial}", f"/search/?q={partial}"),
        ("node list /nodes/", "/nodes/"),
        ("accelerator list /accelerators/?health=failed", "/accelerators/?health=failed"),
    ]


def _measure(client: Any, path: str, repeat: int) -> tuple[list[float], int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(path)  # warm: URL resolving, template loading, imports
    times = []
    queries = 0
    status = 0
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(path)
            if response.streaming:
                b"".join(response.streaming_content)
            times.append(time.perf_counter() - started)
        queries, status = len(captured), response.status_code
    return times, queries, status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    url = api_bench._configure(args.database_url)
    api_bench._prepare()
    from django.db import connection

    from cmdb.models import Accelerator, Node

    clients = _clients()
    pages = _pages()
    print(
        f"\nConsole bench on {connection.vendor} ({url.split('@')[-1]}): {Node.objects.count():,} nodes, "
        f"{Accelerator.objects.count():,} accelerators; {args.repeat} requests per page "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)\n"
    )
    header = f"{'page':58} {'who':11} {'status':>6} {'queries':>7} {'p50':>9} {'max':>9}"
    print(header)
    print("-" * len(header))
    for who, client in clients.items():
        for label, path in pages:
            times, queries, status = _measure(client, path, args.repeat)
            p50 = statistics.median(times) * 1000
            print(f"{label[:58]:58} {who:11} {status:>6} {queries:>7} {p50:>6.0f} ms {max(times) * 1000:>6.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

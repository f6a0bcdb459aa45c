"""Benchmark the CMDB REST API on the large demo fleet (12,500 nodes, 100,000 accelerators).

Usage:
    python bench/api_bench.py [--database-url URL] [--repeat N]

Default database: var/bench/api_bench.sqlite3 (never the dev database var/gpuops.sqlite3). The fleet is
loaded there first if it is not (`seed_demo --scale large`, a few minutes). For PostgreSQL:

    createdb -h 127.0.0.1 -U postgres gpuops_bench
    python bench/api_bench.py --database-url postgres://postgres@127.0.0.1:5432/gpuops_bench

Requests go through Django's test client (the whole middleware + DRF stack, JSON rendering included, no network),
authenticated with API tokens, as a superuser and as a technician with a view grant on one site (the permission-
restricted query path). Timings are the best of --repeat runs; the cursor walk runs once.

Bench-only data: the large demo fleet has no failed cards, so the bench marks 1 card in 200 of site wh1 as
failed (health=failed) so the filtered query has rows to return.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _configure(database_url: str) -> str:
    url = database_url or os.environ.get("DATABASE_URL", "")
    if not url:
        path = REPO / "var" / "bench" / "api_bench.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{path}"
    if url.rstrip("/").endswith("var/gpuops.sqlite3"):
        raise SystemExit("Refusing to benchmark against the dev database var/gpuops.sqlite3.")
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuops.settings")
    import django

    django.setup()
    return url


def _prepare() -> None:
    from django.core.management import call_command

    from cmdb import models as m
    from cmdb.services.demo import demo_load, planner_statistics_refresh

    call_command("migrate", verbosity=0, interactive=False)
    if m.Accelerator.objects.count() < 100_000:
        print("Loading the large demo fleet (12,500 nodes, 100,000 accelerators); this takes a few minutes...")
        started = time.monotonic()
        demo_load(scale="large")
        print(f"  loaded in {time.monotonic() - started:.0f} s")
    wh1_h100 = m.Accelerator.objects.filter(site__code="wh1", model__name="H100-SXM5-80GB")
    if not wh1_h100.filter(health="failed").exists():
        ids = list(wh1_h100.order_by("pk").values_list("pk", flat=True)[::200])
        m.Accelerator.objects.filter(pk__in=ids).update(health="failed", health_detail="bench: XID 79")
    planner_statistics_refresh()  # as autovacuum or a periodic ANALYZE would have them in production


def _clients() -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from cmdb.models import Site
    from cmdb.permissions import grant_scope

    user_model = get_user_model()
    root, _ = user_model.objects.get_or_create(username="bench-root", defaults={"is_superuser": True, "is_staff": True})
    tech, created = user_model.objects.get_or_create(username="bench-wh1-viewer")
    if created:
        grant_scope(scope_obj=Site.objects.get(code="wh1"), perms=["view_scope"], users=[tech])
    clients = {}
    for label, user in (("superuser", root), ("wh1 viewer", tech)):
        token, _ = Token.objects.get_or_create(user=user)
        clients[label] = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    return clients


Timing = tuple[float, float]  # (wall seconds, CPU seconds of this process)


def _get(client: Any, path: str, params: dict[str, Any] | None = None) -> tuple[Timing, Any, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        wall, cpu = time.perf_counter(), time.process_time()
        response = client.get(path, params or {})
        body = response.json()
        timing = (time.perf_counter() - wall, time.process_time() - cpu)
    if response.status_code != 200:
        raise SystemExit(f"GET {path} {params} -> {response.status_code}: {body}")
    return timing, body, len(queries)


def _best(repeat: int, run: Callable[[], tuple[Timing, Any, int]]) -> tuple[Timing, Any, int]:
    results = [run() for _ in range(repeat)]
    return min(results, key=lambda r: r[0][0])


def _walk(client: Any, limit: int) -> tuple[Timing, int, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    rows = pages = 0
    response = client.get("/api/cmdb/accelerators/", {"mode": "cursor", "limit": limit})
    while True:
        body = response.json()
        rows += len(body["results"])
        pages += 1
        if not body["next"]:
            break
        response = client.get(body["next"])
    return (time.perf_counter() - wall, time.process_time() - cpu), rows, pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    url = _configure(args.database_url)
    _prepare()
    from django.db import connection

    from cmdb.models import Accelerator, Node

    clients = _clients()
    vendor = connection.vendor
    print(
        f"\nCMDB API bench on {vendor} ({url.split('@')[-1]}): {Node.objects.count():,} nodes, "
        f"{Accelerator.objects.count():,} accelerators\n"
    )
    print(
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; 'cpu' is this process's CPU time, which"
        " includes SQLite's work but not PostgreSQL's)\n"
    )
    header = f"{'request':62} {'who':11} {'rows':>7} {'queries':>7} {'wall':>9} {'cpu':>9}"
    print(header)
    print("-" * len(header))

    def line(label: str, who: str, rows: int | str, queries: int | str, timing: Timing) -> None:
        wall, cpu = timing
        print(f"{label:62} {who:11} {rows!s:>7} {queries!s:>7} {wall * 1000:>6.0f} ms {cpu * 1000:>6.0f} ms")

    filtered = {"site": "wh1", "model": "H100-SXM5-80GB", "health": "failed", "limit": 1000}
    for who, client in clients.items():
        _get(client, "/api/cmdb/accelerators/", {"limit": 10})  # warm up URL resolving, imports, token cache
        elapsed, body, queries = _best(
            args.repeat, lambda c=client: _get(c, "/api/cmdb/accelerators/", {"limit": 1000})
        )
        line("GET accelerators ?limit=1000 (nested node/rack/site/model)", who, len(body["results"]), queries, elapsed)
        elapsed, body, queries = _best(
            args.repeat, lambda c=client: _get(c, "/api/cmdb/accelerators/", {"limit": 1000, "offset": 90_000})
        )
        line("GET accelerators ?limit=1000&offset=90000", who, len(body["results"]), queries, elapsed)
        elapsed, body, queries = _best(
            args.repeat, lambda c=client: _get(c, "/api/cmdb/accelerators/", {"mode": "cursor", "limit": 1000})
        )
        line("GET accelerators ?mode=cursor&limit=1000 (one page)", who, len(body["results"]), queries, elapsed)
        elapsed, body, queries = _best(args.repeat, lambda c=client: _get(c, "/api/cmdb/accelerators/", filtered))
        line("GET accelerators ?site=wh1&model=H100-SXM5-80GB&health=failed", who, body["count"], queries, elapsed)
        elapsed, body, queries = _best(args.repeat, lambda c=client: _get(c, "/api/cmdb/summary/"))
        line("GET summary", who, body["accelerators"]["total"], queries, elapsed)
        elapsed, body, queries = _best(
            args.repeat,
            lambda c=client: _get(c, "/api/cmdb/nodes/", {"limit": 1000, "driver": "nvidia-driver:550.127.05"}),
        )
        line("GET nodes ?driver=nvidia-driver:550.127.05&limit=1000", who, body["count"], queries, elapsed)
        elapsed, rows, pages = _walk(client, 1000)
        line(f"cursor walk of all accelerators ({pages} pages of 1000)", who, rows, "-", elapsed)
        print(f"{'':62} {'':11} {'':>7} {'':>7} {rows / elapsed[0]:>6,.0f}/s {rows / elapsed[1]:>6,.0f}/s  rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

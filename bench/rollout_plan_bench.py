"""Time rollout planning: the pure planner on generated fleets, and planning from the database on the large
demo fleet when it exists.

Usage: python bench/rollout_plan_bench.py [--database-url URL] [--repeat N] [--no-db]

1. Generated fleets (no database): 1,250 / 12,500 / 50,000 nodes in clusters of about 3,000, racks of four,
   a canary of 10, waves of 5 %, one node per rack at a time, an 80 % capacity floor. Best and median of N runs.
2. The large demo fleet (`bench/seed_large.py` writes var/bench/large.sqlite3; or --database-url): the facts
   queries plus the plan, for one cluster (wh1-train, 4,096 H100 nodes) and for the whole fleet (12,500 nodes,
   of which the Ascend and Hygon ones are refused by the compatibility matrix).
3. On the same database, a driver rollout ticket for each of those selections: opening it (the service the web
   request calls: inputs checked, ticket and rollout saved, the prepare step queued) and its prepare step (plan,
   waves, node runs and node locks written in one transaction), with their query counts. Each is rolled back
   afterwards, so runs repeat on the same data.
Nothing is written to that database: a SQLite file is copied aside first and the copy gets this app's tables.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _generated(n_nodes: int, *, seed_clusters: int = 3000):
    from workflows.rollouts.planning import ClusterFacts, NodeFacts, PackageFacts, PlanOptions

    n_clusters = max(1, n_nodes // seed_clusters)
    nodes = [
        NodeFacts(
            id=i,
            hostname=f"gen-{i:06d}",
            cluster_id=i % n_clusters,
            rack_id=i // 4,
            accelerator_model_ids=(1 + i % 2,),
            installed_version="550.127.05",
            tags=frozenset({"canary"}) if i % 997 == 0 else frozenset(),
        )
        for i in range(n_nodes)
    ]
    per_cluster = -(-n_nodes // n_clusters)
    clusters = [
        ClusterFacts(id=c, name=f"gen-c{c}", in_service=per_cluster, available=per_cluster, floor_percent=80)
        for c in range(n_clusters)
    ]
    package = PackageFacts("nvidia-driver", "570.133.20", frozenset({1, 2}))
    options = PlanOptions(canary_size=10, wave_percent=5, max_per_rack=1, failure_budget_percent=2)
    return nodes, clusters, package, options


def bench_generated(repeat: int) -> None:
    from workflows.rollouts.planning import plan_build

    print("pure planner on generated fleets (canary 10, waves of 5 %, 1 per rack, floor 80 %):")
    for n in (1_250, 12_500, 50_000):
        nodes, clusters, package, options = _generated(n)
        times = []
        plan = None
        for _ in range(repeat):
            started = time.perf_counter()
            plan = plan_build(nodes, clusters, package, options)
            times.append(time.perf_counter() - started)
        assert plan is not None
        print(
            f"  {n:>7,} nodes: best {min(times) * 1000:7.1f} ms, median {statistics.median(times) * 1000:7.1f} ms"
            f"  -> {len(plan.waves)} waves, largest {max(len(w.node_ids) for w in plan.waves)} nodes"
        )


def _database(url: str) -> str:
    """A URL safe to add tables to: SQLite files are copied aside (kept until the source changes)."""
    if url:
        return url
    source = REPO / "var" / "bench" / "large.sqlite3"
    if not source.exists():
        return ""
    copy = REPO / "var" / "bench" / "rollout_plan_bench.sqlite3"
    if not copy.exists() or copy.stat().st_mtime < source.stat().st_mtime:
        shutil.copyfile(source, copy)
    return f"sqlite:///{copy}"


def bench_database(url: str, repeat: int) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuops.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    call_command("migrate", verbosity=0, interactive=False)
    from cmdb.models import DriverPackage, Node
    from workflows.rollouts.options import RolloutOptions
    from workflows.rollouts.planning import plan_build
    from workflows.rollouts.selectors import NodeSelector, node_facts, nodes_select, package_facts

    total = Node.objects.count()
    if total < 10_000:
        print(f"database {url.split('@')[-1]}: {total} nodes, not the large fleet; skipped")
        return
    package = DriverPackage.objects.get(component="nvidia-driver", version="570.133.20")
    options = RolloutOptions.from_dict(
        {"canary_size": 10, "wave_percent": 5, "max_per_rack": 1, "failure_budget_percent": 2}
    )
    print(f"planning from the database ({connection.vendor}, {total:,} nodes):")
    for label, selector in (
        ("cluster wh1-train", NodeSelector(clusters=("wh1-train",))),
        ("whole fleet (wh1, gy1)", NodeSelector(sites=("wh1", "gy1"))),
    ):
        facts_t, plan_t = [], []
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                facts, clusters = node_facts(nodes_select(selector), package)
                pkg = package_facts(package)
                facts_t.append(time.perf_counter() - started)
            started = time.perf_counter()
            plan = plan_build(facts, clusters, pkg, options.plan)
            plan_t.append(time.perf_counter() - started)
        print(
            f"  {label:<22} {len(facts):>6,} nodes: facts {statistics.median(facts_t):6.2f} s "
            f"({len(queries)} queries), plan {statistics.median(plan_t) * 1000:6.1f} ms -> {plan.node_count:,} "
            f"planned in {len(plan.waves)} waves, {len(plan.refused):,} refused"
        )
    bench_ticket(repeat)


def bench_ticket(repeat: int) -> None:
    """Open a rollout ticket (what the web request does) and run its prepare step (what a worker does)."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from workflows.engine import ticket_create
    from workflows.models import StepRun
    from workflows.rollouts.models import NodeLock, NodeRun, Rollout
    from workflows.runner import step_execute

    inputs = {
        "package": "nvidia-driver 570.133.20",
        "canary_size": 10,
        "wave_percent": 5,
        "max_per_rack": 1,
        "failure_budget_percent": 2,
    }
    print("a rollout ticket: opening it (the request) and its prepare step (a worker), each rolled back:")
    for label, selection in (
        ("cluster wh1-train", {"clusters": "wh1-train"}),
        ("whole fleet (wh1, gy1)", {"sites": "wh1 gy1"}),
    ):
        open_t, prepare_t = [], []
        for _ in range(repeat):
            with transaction.atomic():
                with CaptureQueriesContext(connection) as open_q:
                    started = time.perf_counter()
                    ticket = ticket_create(
                        type_="driver_rollout", title=f"bench: {label}", requester=None, inputs={**inputs, **selection}
                    )
                    open_t.append(time.perf_counter() - started)
                run = StepRun.objects.get(ticket=ticket, step="prepare")
                with CaptureQueriesContext(connection) as prepare_q:
                    started = time.perf_counter()
                    step_execute(str(run.pk), worker="bench")
                    prepare_t.append(time.perf_counter() - started)
                run.refresh_from_db()
                rollout = Rollout.objects.get(ticket=ticket)
                assert run.status == "succeeded", run.error
                runs = NodeRun.objects.filter(rollout=rollout).count()
                locks = NodeLock.objects.filter(owner_key=rollout.lock_key).count()
                transaction.set_rollback(True)  # measured, not kept
        print(
            f"  {label:<22} open {statistics.median(open_t) * 1000:6.1f} ms ({len(open_q)} queries), "
            f"prepare step {statistics.median(prepare_t):5.2f} s ({len(prepare_q)} queries) -> "
            f"{runs:,} node runs, {locks:,} node locks"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-db", action="store_true", help="only the generated fleets")
    args = parser.parse_args()
    bench_generated(args.repeat)
    if args.no_db:
        return 0
    url = _database(args.database_url)
    if not url:
        print("large demo fleet: absent (run bench/seed_large.py first); database part skipped")
        return 0
    bench_database(url, max(1, args.repeat // 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

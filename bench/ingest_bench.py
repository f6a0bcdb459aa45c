"""Agent report ingestion at fleet scale, through the real endpoint (POST /api/agent/reports/).

Usage: python bench/ingest_bench.py [--database-url URL] [--nodes N] [--procs P] [--skip-seed] [--phases ...]
                                    [--topology]

1. The large demo fleet (12,500 nodes, 100,000 accelerators) is loaded if absent (`demo_load(scale="large")`).
2. Every bench node gets a fresh agent token; earlier bench state (ingest state, stored reports) is cleared.
3. One report per node is built from the CMDB rows (what the agent would send if the CMDB were right).
4. Phases, each over all bench nodes, posted by P processes (each with its own Django test client and database
   connection, the nodes split between them):
   - first:     the first report of each node: full reconciliation (lock, match 8 cards, NICs, software);
   - unchanged: the same inventory again with a new collected_at: the cheap path (digest compare, one UPDATE);
   - changed:   a driver upgrade on every node (8 cards + installed software change, change records written).
   `--phases changed` alone runs the upgrade as each node's first report after the clean slate.
   With `--topology`, every report also carries an intra-node topology (`nvidia-smi topo -m` of an HGX-like board:
   the node's cards and HCAs, with `nvidia-smi nvlink -s` states of 18 links per GPU), and the changed phase also
   takes one NVLink of GPU0 down (a topology write and a departure when the model expects one). Run the bench with
   and without it to see what topology costs.
Prints reports/s, queries per report (counted with a connection execute_wrapper), latency percentiles, and the
CPU each report costs in the client process (Django: request handling, validation, reconciliation) and in its
PostgreSQL backend (read from /proc), with the throughput that CPU cost allows on idle cores: the wall figures
depend on whatever else the machine runs at the time.
The bodies are serialised before the clock starts; the timing covers the request through Django to the database.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/gpuops_ingest_bench"
# Driver versions the "changed" phase moves each node to: whichever of the two it does not run now, so the phase
# changes something on every run of the bench.
UPGRADE = {
    "nvidia": ("nvidia-driver", ("570.133.20", "550.127.05")),
    "ascend": ("ascend-driver", ("24.1.rc3", "24.1.rc2")),
    "hygon": ("hygon-driver", ("6.3.9", "6.3.8")),
}


def _setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuops.settings")
    import django

    django.setup()


def _topology(cards: int, hcas: int, down: bool) -> dict:
    """An HGX-like board's topology: NV18 between GPUs, GPU i next to HCA i % hcas (PIX), the rest SYS."""
    gpus = [f"GPU{i}" for i in range(cards)]
    nics = [f"NIC{i}" for i in range(hcas)]
    devices = [
        {
            "name": g,
            "type": "gpu",
            "alias": None,
            "cpu_affinity": "0-55" if i < cards // 2 else "56-111",
            "numa_affinity": str(int(i >= cards // 2)),
            "nvlinks": [
                {"link": n, "state": "inactive", "speed_gbps": None}
                if down and i == 0 and n == 0
                else {"link": n, "state": "active", "speed_gbps": 26.562}
                for n in range(18)
            ],
        }
        for i, g in enumerate(gpus)
    ] + [{"name": n, "type": "nic", "alias": f"mlx5_{i}"} for i, n in enumerate(nics)]
    links = []
    names = gpus + nics
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if b.startswith("GPU"):
                kind = "NV18"
            elif a.startswith("GPU"):
                kind = "PIX" if int(a[3:]) % hcas == int(b[3:]) else "SYS"
            else:
                kind = "SYS"
            links.append({"a": a, "b": b, "kind": kind, **({"b_alias": f"mlx5_{b[3:]}"} if b in nics else {})})
    return {"sources": ["nvidia-smi topo -m", "nvidia-smi nvlink -s"], "devices": devices, "links": links}


def _prepare(args) -> list[tuple[str, bytes, bytes, bytes]]:
    """(token, first body, unchanged body, changed body) per bench node."""
    from django.core.management import call_command
    from django.db import transaction
    from django.utils import timezone

    from cmdb import models as m
    from cmdb.services.demo import demo_load
    from inventory_agents.models import AgentState, AgentToken, Report
    from inventory_agents.services.synthetic import nodes_for_reports, report_for
    from inventory_agents.services.tokens import AGENT_PREFIX, _token_new, token_hash

    call_command("migrate", verbosity=0)  # a fresh database gets its tables first
    if not args.skip_seed and m.Node.objects.count() < 12_500:
        started = time.monotonic()
        print("loading the large demo fleet ...", flush=True)
        demo_load(scale="large")
        print(f"  loaded in {time.monotonic() - started:.0f} s", flush=True)
    ids = list(m.Node.objects.filter(status="active").order_by("pk").values_list("pk", flat=True)[: args.nodes])
    with transaction.atomic():
        # A clean slate for the bench nodes. Tokens are bulk-created (no change records): setup, not the subject.
        Report.objects.filter(node_id__in=ids).delete()
        AgentState.objects.filter(node_id__in=ids).delete()
        AgentToken.objects.filter(node_id__in=ids).delete()
        m.Node.objects.filter(pk__in=ids).update(is_stale=False)
        tokens = {pk: _token_new(AGENT_PREFIX) for pk in ids}
        AgentToken.objects.bulk_create(
            [
                AgentToken(node_id=pk, token_hash=token_hash(t), prefix=t[:10], description="ingest bench")
                for pk, t in tokens.items()
            ],
            batch_size=5000,
        )
    now = timezone.now()
    later, much_later = now + dt.timedelta(minutes=5), now + dt.timedelta(minutes=10)
    out = []
    for start in range(0, len(ids), 500):
        for node in nodes_for_reports(ids[start : start + 500]):
            first = report_for(node, collected_at=now)
            unchanged = {**first, "collected_at": later.strftime("%Y-%m-%dT%H:%M:%SZ")}
            changed = json.loads(json.dumps(unchanged))
            changed["collected_at"] = much_later.strftime("%Y-%m-%dT%H:%M:%SZ")
            vendor = changed["accelerators"][0]["vendor"] if changed["accelerators"] else "nvidia"
            component, versions = UPGRADE[vendor]
            current = next((s["version"] for s in changed["software"] if s["component"] == component), None)
            version = versions[1] if current == versions[0] else versions[0]
            for card in changed["accelerators"]:
                card["driver_version"] = version
            changed["software"] = [s for s in changed["software"] if s["component"] != component]
            changed["software"].append({"component": component, "version": version})
            if args.topology:
                cards, hcas = len(first["accelerators"]), max(1, len(first.get("infiniband") or []))
                first["topology"] = unchanged["topology"] = _topology(cards, hcas, down=False)
                changed["topology"] = _topology(cards, hcas, down=True)
            out.append((tokens[node.pk], *(json.dumps(r).encode() for r in (first, unchanged, changed))))
    return out


def _worker(url: str, phase: int, items: list[tuple[str, bytes]], queue) -> None:
    """Post `items` (token, body) one after the other; put (latencies, queries, errors) on the queue."""
    _setup(url)
    from django.db import connection
    from django.test import Client

    client = Client()
    counter = {"n": 0}

    def count(execute, sql, params, many, context):
        counter["n"] += 1
        return execute(sql, params, many, context)

    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    cpu_before = _cpu_seconds(os.getpid()), _cpu_seconds(backend)
    latencies, outcomes = [], {}
    with connection.execute_wrapper(count):
        for token, body in items:
            started = time.perf_counter()
            response = client.generic(
                "POST",
                "/api/agent/reports/",
                body,
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Token {token}",
            )
            latencies.append(time.perf_counter() - started)
            outcome = response.json().get("status") if response.status_code == 200 else response.status_code
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    cpu = (_cpu_seconds(os.getpid()) - cpu_before[0], _cpu_seconds(backend) - cpu_before[1])
    queue.put((latencies, counter["n"], outcomes, cpu))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (the client, or its PostgreSQL backend on this host) from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_phase(name: str, url: str, index: int, prepared, procs: int) -> None:
    from django.db import connections

    connections.close_all()  # children must not share the parent's connection
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    slices = [[(p[0], p[index]) for p in prepared[i::procs]] for i in range(procs)]
    workers = [ctx.Process(target=_worker, args=(url, index, s, queue)) for s in slices if s]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    results = [queue.get() for _ in workers]
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - started
    latencies = sorted(x for r in results for x in r[0])
    queries = sum(r[1] for r in results)
    outcomes: dict = {}
    for r in results:
        for outcome, n in r[2].items():
            outcomes[outcome] = outcomes.get(outcome, 0) + n
    n = len(latencies)
    p50, p95 = latencies[n // 2] * 1000, latencies[int(n * 0.95)] * 1000
    client_cpu = sum(r[3][0] for r in results) / n * 1000
    db_cpu = sum(r[3][1] for r in results) / n * 1000
    print(
        f"{name:<10} {n:>6} reports in {elapsed:6.1f} s = {n / elapsed:7.1f} reports/s | "
        f"{queries / n:5.1f} queries/report | p50 {p50:5.1f} ms  p95 {p95:6.1f} ms  mean "
        f"{statistics.fmean(latencies) * 1000:5.1f} ms | {outcomes}",
        flush=True,
    )
    # Wall throughput depends on what else runs on the machine; the CPU spent per report does not (much): it gives
    # the throughput the two cores would reach with nothing else running.
    per_report = (client_cpu + db_cpu) / 1000
    capacity = (os.cpu_count() or 1) / per_report if per_report else 0.0
    print(
        f"{'':<10} CPU per report: Django {client_cpu:.1f} ms + PostgreSQL {db_cpu:.1f} ms -> "
        f"{capacity:.0f} reports/s on {os.cpu_count()} idle cores",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--nodes", type=int, default=12_500, help="bench the first N active nodes")
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 2, help="client processes")
    parser.add_argument("--skip-seed", action="store_true", help="do not load the demo fleet when absent")
    parser.add_argument(
        "--phases",
        default="first,unchanged,changed",
        help="comma-separated subset of first,unchanged,changed (each starts from a clean slate)",
    )
    parser.add_argument("--topology", action="store_true", help="reports carry an intra-node topology")
    args = parser.parse_args()
    _setup(args.database_url)
    from django.db import connection

    print(
        f"database: {connection.vendor} {args.database_url.split('@')[-1]}, {args.procs} client processes, "
        f"{os.cpu_count()} cores",
        flush=True,
    )
    started = time.monotonic()
    prepared = _prepare(args)
    sample = prepared[:50]
    cards = sum(len(json.loads(p[1])["accelerators"]) for p in sample) / max(1, len(sample))
    print(
        f"prepared {len(prepared)} reports (~{cards:.0f} cards, {len(prepared[0][1]) // 1024} KiB each"
        f"{', with topology' if args.topology else ''}) in "
        f"{time.monotonic() - started:.0f} s",
        flush=True,
    )
    print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
    for index, name in enumerate(("first", "unchanged", "changed"), start=1):
        if name in args.phases.split(","):
            _run_phase(name, args.database_url, index, prepared, args.procs)
    print(f"load average after: {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every hot path of gpuops on the large fleet, served for real: one command, one table.

Usage:
    python bench/fleet_bench.py --database-url postgres://postgres@127.0.0.1:5432/gpuops_bench
        [--requests N] [--workers W] [--scale large|small] [--json PATH]
        [--compare http://127.0.0.1:8001 --compare-token TOKEN]

1. The fleet: the database is migrated and, when it holds fewer nodes than the scale's, loaded with
   `seed_demo --scale large` (12,500 nodes, 100,000 cards; minutes). A fleet already there is reused.
2. Bench state (set-up, not measured): a superuser with an API token and a console session, a scrape token for
   /metrics, agent tokens for a few nodes, and the first report of the nodes the change / unchanged phases post to.
3. gunicorn serves the database on a free loopback port with gpuops/gunicorn_conf.py (its worker class and
   threads; --workers processes, default 2; worker recycling off so the CPU and memory of each worker are seen
   whole; no access log).
4. Each phase sends --requests requests over HTTP (httpx, keep-alive) from 1 client, then --requests from each of
   2 clients at once. Printed: p50 / p95 of the 1-client run, requests per second with 1 and 2 clients, SQL
   queries of one request (Django's test client in this process with CaptureQueriesContext: same code path, no
   network), and the server CPU per request (user + system time of the gunicorn workers over both runs, divided
   by the requests; PostgreSQL's own CPU is not in it). The floor is /healthz: a Django view that runs no query,
   measured in the same run: what any request costs here before the application does anything.
5. The peak RSS (VmHWM) of the largest gunicorn worker after all phases.

With --compare URL --compare-token TOKEN, the NetBox at URL gets its own site, manufacturer, an HGX device type
with 8 module bays, a GPU module type and 1,000 devices x 8 GPU modules when absent (bench/fleet_netbox.py), and
its equivalent of each phase that has one runs right after gpuops's: machine noise hits both.

The machine matters: these are wall-clock figures on whatever else the host runs at the time; the load average is
printed with them. Targets are printed beside each figure (PASS / MISS).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import logging
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import django_configure  # noqa: E402 (after the path is set)

SCRAPE_TOKEN = "fleet-bench-scrape-token"
# The drivers the change phase moves the 8 cards of a node between (whichever of the two it does not run).
DRIVERS = {
    "nvidia": ("nvidia-driver", ("570.133.20", "550.127.05")),
    "ascend": ("ascend-driver", ("24.1.rc3", "24.1.rc2")),
    "hygon": ("hygon-driver", ("6.3.9", "6.3.8")),
}
COLLECTED_AT = "__COLLECTED_AT__"


# --- requests and their measurement ------------------------------------------------------------------------------


@dataclass
class Req:
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    expect: str = ""  # the "status" a report answer must carry (applied, unchanged); empty: any 2xx
    redirect_ok: bool = False  # a 3xx is the answer (search finding one object sends the browser to its page)


# make(client index, request index) -> the request to send; built before the clock starts.
Maker = Callable[[int, int], Req]
ClientFactory = Callable[[], httpx.Client]


@dataclass
class Series:
    latencies: list[float]
    elapsed: float
    errors: list[str]

    @property
    def rps(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0


def series_run(make_client: ClientFactory, make: Maker, requests: int, clients: int = 1) -> Series:
    """`requests` requests from each of `clients` clients at once (one thread and connection each)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    start = threading.Barrier(clients)

    def client_loop(index: int) -> None:
        with make_client() as client:
            start.wait()
            for i in range(requests):
                req = make(index, i)
                began = time.perf_counter()
                response = client.request(req.method, req.path, headers=req.headers, content=req.body)
                body = response.content
                latencies[index].append(time.perf_counter() - began)
                problem = _problem(req, response.status_code, body)
                if problem:
                    errors.append(problem)

    began = time.perf_counter()
    if clients == 1:
        client_loop(0)  # in this thread (and its database connection, which an in-process test relies on)
    else:
        threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return Series([x for part in latencies for x in part], time.perf_counter() - began, errors)


def _problem(req: Req, status: int, body: bytes) -> str:
    if status >= (400 if req.redirect_ok else 300):
        return f"{req.method} {req.path} -> {status}: {body[:200]!r}"
    if req.expect:
        got = json.loads(body).get("status")
        if got != req.expect:
            return f"{req.method} {req.path} -> status {got!r}, expected {req.expect!r}"
    return ""


def cursor_walk(make_client: ClientFactory, headers: dict[str, str], limit: int = 1000) -> tuple[int, int, float]:
    """Follow `next` from the first cursor page to the last: (rows, pages, seconds)."""
    rows = pages = 0
    began = time.perf_counter()
    with make_client() as client:
        url = f"/api/cmdb/accelerators/?mode=cursor&limit={limit}"
        while url:
            response = client.get(url, headers=headers)
            response.raise_for_status()
            body = response.json()
            rows += len(body["results"])
            pages += 1
            url = body["next"]
    return rows, pages, time.perf_counter() - began


def queries_of(req: Req) -> int:
    """SQL queries of one request through Django's test client in this process."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    headers = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in req.headers.items() if k.lower() != "cookie"}
    client = Client()
    if cookie := req.headers.get("Cookie"):
        name, _, value = cookie.partition("=")
        client.cookies[name] = value
    with CaptureQueriesContext(connection) as captured:
        response = client.generic(
            req.method, req.path, req.body or b"", content_type="application/json", secure=False, **headers
        )
        if response.streaming:
            b"".join(response.streaming_content)
    problem = _problem(req, response.status_code, response.content if not response.streaming else b"")
    if problem:
        raise SystemExit(f"in-process request failed: {problem}")
    return len(captured)


# --- the served process ------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, from /proc."""
    try:
        fields = _proc_stat(pid)
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Server:
    """gunicorn with gpuops/gunicorn_conf.py on a loopback port, against `database_url`."""

    def __init__(self, database_url: str, workers: int) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "GPUOPS_BIND": f"127.0.0.1:{self.port}",
            "GPUOPS_WEB_WORKERS": str(workers),
            "GPUOPS_WEB_MAX_REQUESTS": "0",  # no recycling: each worker's CPU and peak memory are seen whole
            "GPUOPS_WEB_ACCESS_LOG": "",
            "GPUOPS_WEB_LOG_LEVEL": "warning",
            "GPUOPS_METRICS_TOKEN": SCRAPE_TOKEN,
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:gpuops.gunicorn_conf"], cwd=REPO, env=env
        )
        self.workers = workers

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"gunicorn exited with {self.process.returncode}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200 and len(self.pids()) >= self.workers:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit("gunicorn did not answer /healthz in time")

    def pids(self) -> list[int]:
        """The worker processes (children of the gunicorn master)."""
        try:
            text = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids())

    def peak_rss_mib(self) -> float:
        return max((peak_rss_mib(pid) for pid in self.pids()), default=0.0)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


# --- the fleet and the bench state -------------------------------------------------------------------------------


@dataclass
class Fleet:
    nodes: int
    cards: int
    api: dict[str, str]  # headers of the superuser's API token
    console: dict[str, str]  # the superuser's session cookie
    agent: dict[int, str]  # node pk -> agent token
    serial: str  # a card to look up
    hostname: str  # a node with 8 cards, for the node page
    rack_id: int
    change_nodes: list[int]
    unchanged_nodes: list[int]
    first_nodes: list[int]
    reports: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)  # pk -> (as is, 8 drivers changed)


def fleet_load(scale: str) -> None:
    from django.core.management import call_command

    from cmdb.models import Node
    from cmdb.services.demo import demo_totals

    call_command("migrate", verbosity=0, interactive=False)
    if Node.objects.count() < demo_totals(scale)["nodes"]:
        print(f"loading the {scale} demo fleet (seed_demo --scale {scale}) ...", flush=True)
        call_command("seed_demo", scale=scale)


def fleet_prepare(first_pool: int, other_pool: int = 4) -> Fleet:
    """Tokens, a session and report bodies; the change and unchanged nodes get their first report here."""
    from django.contrib.auth import get_user_model
    from django.db.models import Count, Q
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from cmdb.models import Accelerator, Node
    from cmdb.services.demo import planner_statistics_refresh

    user, _ = get_user_model().objects.get_or_create(
        username="fleet-bench", defaults={"is_superuser": True, "is_staff": True}
    )
    token, _ = Token.objects.get_or_create(user=user)
    session = Client()
    session.force_login(user)
    # Active nodes with 8 installed cards, from the end of the id range (the other benches start at the front).
    eight = list(
        Node.objects.filter(status="active", rack__isnull=False)
        .annotate(n=Count("accelerators", filter=Q(accelerators__lifecycle="installed")))
        .filter(n=8)
        .order_by("-pk")
        .values_list("pk", flat=True)[: first_pool + 2 * other_pool + 1]
    )
    if len(eight) < 2 * other_pool + 2:
        raise SystemExit(f"the fleet has only {len(eight)} active racked nodes with 8 cards")
    page_node = Node.objects.get(pk=eight[0])
    change_nodes, unchanged_nodes = eight[1 : 1 + other_pool], eight[1 + other_pool : 1 + 2 * other_pool]
    first_nodes = eight[1 + 2 * other_pool :]
    card = Accelerator.objects.filter(node_id=page_node.pk).exclude(serial="").order_by("slot_index").first()
    fleet = Fleet(
        nodes=Node.objects.count(),
        cards=Accelerator.objects.count(),
        api={"Authorization": f"Token {token.key}"},
        console={"Cookie": f"sessionid={session.cookies['sessionid'].value}"},
        agent=agent_tokens(eight),
        serial=card.serial,
        hostname=page_node.hostname,
        rack_id=page_node.rack_id,
        change_nodes=change_nodes,
        unchanged_nodes=unchanged_nodes,
        first_nodes=first_nodes,
    )
    fleet.reports = report_bodies(change_nodes + unchanged_nodes + first_nodes)
    agent_state_clear(eight)
    for pk in change_nodes + unchanged_nodes:  # their first report: the phases post the second and later ones
        queries_of(report_req(fleet, pk, changed=False, expect="applied"))
    planner_statistics_refresh()
    return fleet


def agent_tokens(node_ids: list[int]) -> dict[int, str]:
    """A fresh agent token per node (bulk: bench set-up, not the subject)."""
    from inventory_agents.models import AgentToken
    from inventory_agents.services.tokens import AGENT_PREFIX, _token_new, token_hash

    tokens = {pk: _token_new(AGENT_PREFIX) for pk in node_ids}
    AgentToken.objects.filter(node_id__in=node_ids).delete()
    AgentToken.objects.bulk_create(
        [
            AgentToken(node_id=pk, token_hash=token_hash(t), prefix=t[:10], description="fleet bench")
            for pk, t in tokens.items()
        ]
    )
    return tokens


def agent_state_clear(node_ids: list[int]) -> None:
    """Make the next report of these nodes their first: no agent state, no stored report."""
    from cmdb.models import Node
    from inventory_agents.models import AgentState, Report

    Report.objects.filter(node_id__in=node_ids).delete()
    AgentState.objects.filter(node_id__in=node_ids).delete()
    Node.objects.filter(pk__in=node_ids).update(is_stale=False)


def report_bodies(node_ids: list[int]) -> dict[int, tuple[bytes, bytes]]:
    """Per node: the report of what the CMDB holds, and the same with a driver change on all its cards."""
    from inventory_agents.services.synthetic import nodes_for_reports, report_for

    out = {}
    for node in nodes_for_reports(node_ids):
        same = report_for(node)
        same["collected_at"] = COLLECTED_AT
        changed = json.loads(json.dumps(same))
        vendor = changed["accelerators"][0]["vendor"]
        component, versions = DRIVERS.get(vendor, DRIVERS["nvidia"])
        current = next((s["version"] for s in changed["software"] if s["component"] == component), None)
        version = versions[1] if current == versions[0] else versions[0]
        for card in changed["accelerators"]:
            card["driver_version"] = version
        changed["software"] = [s for s in changed["software"] if s["component"] != component]
        changed["software"].append({"component": component, "version": version})
        out[node.pk] = (json.dumps(same).encode(), json.dumps(changed).encode())
    return out


def report_req(fleet: Fleet, pk: int, *, changed: bool, expect: str) -> Req:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = fleet.reports[pk][int(changed)].replace(COLLECTED_AT.encode(), now.encode())
    headers = {"Authorization": f"Token {fleet.agent[pk]}", "Content-Type": "application/json"}
    return Req("POST", "/api/agent/reports/", headers, body, expect)


# --- the phases --------------------------------------------------------------------------------------------------


@dataclass
class Target:
    metric: str  # "p50" (ms, at most), "rps" (at least, best of 1 / 2 clients), "rows" (rows/s, at least)
    value: float

    def text(self) -> str:
        return {"p50": f"p50 <= {self.value:g} ms", "rps": f">= {self.value:g} req/s"}.get(
            self.metric, f">= {self.value:,.0f} rows/s"
        )


@dataclass
class Phase:
    key: str
    label: str
    make: Maker
    target: Target | None = None
    netbox: str = ""  # the key of NetBox's equivalent phase, if it has one
    setup: Callable[[], None] | None = None  # run before each series, outside the clock


def phases(fleet: Fleet) -> list[Phase]:
    api, console = fleet.api, fleet.console

    def get(path: str, headers: dict[str, str]) -> Maker:
        return lambda _c, _i: Req("GET", path, headers)

    # Change reports: each client posts to its own nodes, turn by turn, so two reports of one node never race;
    # every report flips the 8 cards' driver (and the installed package) to the other version.
    flips: dict[int, int] = {}

    def change(c: int, i: int) -> Req:
        own = fleet.change_nodes[c::2] or fleet.change_nodes
        pk = own[i % len(own)]
        flips[pk] = flips.get(pk, 0) + 1
        return report_req(fleet, pk, changed=flips[pk] % 2 == 1, expect="applied")

    def unchanged(c: int, i: int) -> Req:
        own = fleet.unchanged_nodes[c::2] or fleet.unchanged_nodes
        # Reports of the change nodes' last state would be changes: these nodes always report what they hold.
        return report_req(fleet, own[i % len(own)], changed=False, expect="unchanged")

    first_iter: Iterator[int] = iter(())
    lock = threading.Lock()

    def first_reset() -> None:
        nonlocal first_iter
        agent_state_clear(fleet.first_nodes)
        first_iter = iter(fleet.first_nodes)

    def first(_c: int, _i: int) -> Req:
        with lock:
            pk = next(first_iter, None)
        if pk is None:
            raise SystemExit("the first-report pool ran out: raise --first-pool")
        return report_req(fleet, pk, changed=False, expect="applied")

    ms = lambda v: Target("p50", v)  # noqa: E731
    return [
        Phase("floor", "floor: /healthz (no query)", get("/healthz", {})),
        Phase(
            "accelerators",
            "list 1,000 accelerators with context",
            get("/api/cmdb/accelerators/?limit=1000", api),
            ms(80),
            "modules",
        ),
        Phase("nodes", "list 1,000 nodes", get("/api/cmdb/nodes/?limit=1000", api), ms(80), "devices"),
        Phase("q", "find a card by serial ?q=", get(f"/api/cmdb/accelerators/?q={fleet.serial}", api), ms(10), "q"),
        Phase(
            "serial",
            "exact ?serial=",
            get(f"/api/cmdb/accelerators/?serial={fleet.serial}", api),
            ms(10),
            "serial",
        ),
        Phase("change", "agent report changing all 8 cards", change, ms(30), "patch"),
        Phase("first", "first report of a node", first, ms(40), setup=first_reset),
        Phase("unchanged", "unchanged re-report", unchanged, Target("rps", 600)),
        Phase("summary", "fleet summary", get("/api/cmdb/summary/", api), ms(50)),
        Phase("dashboard", "console dashboard /", get("/", console), ms(100)),
        Phase("node_page", "console node page", get(f"/nodes/{fleet.hostname}/", console), ms(100)),
        Phase("rack_page", "console rack page", get(f"/racks/{fleet.rack_id}/", console), ms(100)),
        Phase(
            "search_page",
            "console search, exact serial (redirect)",
            lambda _c, _i: Req("GET", f"/search/?q={fleet.serial}", console, redirect_ok=True),
            ms(100),
        ),
        Phase(
            "search_partial",
            "console search, partial serial",
            get(f"/search/?q={fleet.serial[2:-2]}", console),
            ms(100),
        ),
        Phase("metrics", "/metrics", get("/metrics", {"Authorization": f"Bearer {SCRAPE_TOKEN}"}), ms(300)),
    ]


# --- results -----------------------------------------------------------------------------------------------------


@dataclass
class Result:
    key: str
    label: str
    requests: int = 0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    rps_1: float = 0.0
    rps_2: float = 0.0
    queries: int | None = None
    cpu_ms: float | None = None  # server CPU per request
    rows_per_s: float | None = None
    target: str = ""
    verdict: str = ""
    errors: list[str] = field(default_factory=list)
    netbox_p50_ms: float | None = None
    netbox_rps_1: float | None = None

    def judge(self, target: Target | None) -> None:
        if target is None:
            return
        self.target = target.text()
        figure = {"p50": self.p50_ms, "rps": max(self.rps_1, self.rps_2), "rows": self.rows_per_s or 0.0}
        ok = figure[target.metric] <= target.value if target.metric == "p50" else figure[target.metric] >= target.value
        self.verdict = "PASS" if ok and not self.errors else "MISS"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def phase_measure(
    phase: Phase, make_client: ClientFactory, requests: int, *, server: Server | None, client_counts=(1, 2)
) -> Result:
    """Warm up, count the queries of one request, then the 1-client and 2-client series."""
    result = Result(phase.key, phase.label)
    if phase.setup:
        phase.setup()
    warm = series_run(make_client, phase.make, 1)
    result.errors += warm.errors
    result.queries = queries_of(phase.make(0, 0))
    cpu_before = server.cpu() if server else 0.0
    runs = {}
    for clients in client_counts:
        runs[clients] = series_run(make_client, phase.make, requests, clients)
        result.errors += runs[clients].errors
    total = sum(len(s.latencies) for s in runs.values())
    if server and total:
        result.cpu_ms = (server.cpu() - cpu_before) / total * 1000
    one = runs[client_counts[0]]
    result.requests = total
    result.p50_ms = statistics.median(one.latencies) * 1000
    result.p95_ms = _quantile(one.latencies, 0.95) * 1000
    result.rps_1 = one.rps
    result.rps_2 = runs[client_counts[-1]].rps if len(client_counts) > 1 else 0.0
    result.errors = result.errors[:3]
    result.judge(phase.target)
    return result


def walk_measure(fleet: Fleet, make_client: ClientFactory, *, server: Server | None) -> Result:
    from cmdb.models import Accelerator

    result = Result("walk", f"cursor walk of all {fleet.cards:,} cards")
    cpu_before = server.cpu() if server else 0.0
    rows, pages, seconds = cursor_walk(make_client, fleet.api)
    if rows != Accelerator.objects.count():
        result.errors.append(f"the walk returned {rows:,} rows of {Accelerator.objects.count():,}")
    result.requests = pages
    result.rows_per_s = rows / seconds if seconds else 0.0
    result.p50_ms = seconds / pages * 1000
    result.rps_1 = pages / seconds if seconds else 0.0
    result.queries = queries_of(Req("GET", "/api/cmdb/accelerators/?mode=cursor&limit=1000", fleet.api))
    if server and pages:
        result.cpu_ms = (server.cpu() - cpu_before) / pages * 1000
    result.judge(Target("rows", 20_000))
    return result


def table_print(results: list[Result], header: str, rss: tuple[float, str] | None, compare: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=header, title_justify="left")
    for name in ("path", "p50 ms", "p95 ms", "req/s 1c", "req/s 2c", "queries", "CPU ms/req", "target", ""):
        table.add_column(name, justify="left" if name in ("path", "target", "") else "right")
    if compare:
        table.add_column("NetBox p50", justify="right")
        table.add_column("NetBox / gpuops", justify="right")
    for r in results:
        figure = f"{r.rows_per_s:,.0f} rows/s" if r.rows_per_s is not None else ""
        cells = [
            r.label + (f" ({figure})" if figure else ""),
            f"{r.p50_ms:.1f}",
            f"{r.p95_ms:.1f}" if r.p95_ms else "-",
            f"{r.rps_1:.1f}",
            f"{r.rps_2:.1f}" if r.rps_2 else "-",
            "-" if r.queries is None else str(r.queries),
            "-" if r.cpu_ms is None else f"{r.cpu_ms:.1f}",
            r.target,
            r.verdict + (" (errors)" if r.errors else ""),
        ]
        if compare:
            nb = r.netbox_p50_ms
            cells += [f"{nb:.0f}" if nb else "-", f"{nb / r.p50_ms:.1f}x" if nb and r.p50_ms else "-"]
        table.add_row(*cells)
    console = Console(width=200)
    console.print(table)
    if rss:
        console.print(f"peak RSS of a gunicorn worker: {rss[0]:.0f} MiB (target <= 300 MiB: {rss[1]})")
    for r in results:
        for error in r.errors:
            console.print(f"[red]{r.key}: {error}[/red]")


def machine() -> dict[str, Any]:
    cpu = "?"
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "load_average_1m": os.getloadavg()[0],
        "python": platform.python_version(),
        "system": platform.platform(),
    }


# --- the run -----------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    url = django_configure(args.database_url, GPUOPS_METRICS_TOKEN=SCRAPE_TOKEN)
    from django.db import connection

    fleet_load(args.scale)
    fleet = fleet_prepare(first_pool=(3 * args.requests + 2) if args.first_pool is None else args.first_pool)
    netbox = None
    if args.compare:
        from bench import fleet_netbox

        netbox = fleet_netbox.NetBox(args.compare, args.compare_token)
        netbox.prepare()
    connection.close()  # gunicorn's workers open their own; this process keeps one for the query counts
    server = Server(url, args.workers)
    results: list[Result] = []
    try:
        server.wait_ready()

        def make_client() -> httpx.Client:
            return httpx.Client(base_url=server.url, timeout=120)

        started = time.monotonic()
        for phase in phases(fleet):
            if args.only and phase.key not in args.only:
                continue
            result = phase_measure(phase, make_client, args.requests, server=server)
            if netbox and phase.netbox:
                nb = netbox.measure(phase.netbox, args.requests)
                result.netbox_p50_ms, result.netbox_rps_1 = nb.p50_ms, nb.rps_1
            results.append(result)
            print(f"  {phase.label}: p50 {result.p50_ms:.1f} ms", flush=True)
        if not args.only or "walk" in args.only:
            results.append(walk_measure(fleet, make_client, server=server))
        rss = server.peak_rss_mib()
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    verdict = "PASS" if rss <= 300 else "MISS"
    info = machine()
    header = (
        f"gpuops fleet bench on {connection.vendor} ({url.split('@')[-1]}): {fleet.nodes:,} nodes, {fleet.cards:,} "
        f"cards; gunicorn {args.workers} workers; {args.requests} requests per client per phase; {info['cpus']} CPUs "
        f"({info['cpu_model']}), load average {info['load_average_1m']:.1f}; {elapsed:.0f} s"
    )
    table_print(results, header, (rss, verdict), compare=netbox is not None)
    if netbox is None:
        print(
            "NetBox not measured in this run (--compare URL --compare-token TOKEN). For reference only, figures "
            "recorded earlier on this machine, NetBox 4.6.8 p50: list 1,000 modules 1,094 ms, list 1,000 devices "
            "1,015 ms, ?q= 114 ms, bulk PATCH 8 modules 322 ms."
        )
    return {
        "database": url.split("@")[-1],
        "nodes": fleet.nodes,
        "cards": fleet.cards,
        "workers": args.workers,
        "requests": args.requests,
        "machine": info,
        "worker_peak_rss_mib": rss,
        "worker_rss_verdict": verdict,
        "results": [asdict(r) for r in results],
        "netbox": args.compare or None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--scale", choices=["small", "large"], default="large")
    parser.add_argument("--requests", type=int, default=20, help="requests per client per phase")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--first-pool", type=int, default=None, help="nodes for first reports (3 x requests + 2)")
    parser.add_argument("--only", nargs="*", default=[], help="phase keys to run (default: all)")
    parser.add_argument("--json", default="", help="save the figures to this file")
    parser.add_argument("--compare", default="", help="base URL of a NetBox to measure beside gpuops")
    parser.add_argument("--compare-token", default="", help="a NetBox API token with write rights")
    args = parser.parse_args(argv)
    if args.compare and not args.compare_token:
        parser.error("--compare needs --compare-token")
    report = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Prometheus metrics: the process metrics every app increments, and the fleet gauges' section registry.

Process metrics (counters, histograms) are defined here so ingestion, the engine and the adapters share one
definition without importing each other. Under several processes (gunicorn workers, Celery workers) set
PROMETHEUS_MULTIPROC_DIR (an empty directory shared by the processes of one host, wiped at start-up) in the
environment of every process before it starts: prometheus_client then keeps each process's samples in files
there and `/metrics` sums them (docs/monitoring.md).

Fleet gauges are computed at scrape time from aggregate queries, cached for GPUOPS_METRICS_CACHE_SECONDS in the
shared cache, so N scrapers or N web processes cost one set of queries per period. Each app registers a section
(`fleet_section_register`) in its AppConfig.ready - gpuops imports no app, like the hook points of cmdb.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

AGENT_REPORTS = Counter("gpuops_agent_reports", "Agent reports received, by outcome", ["outcome"])
REPORT_APPLY_SECONDS = Histogram(
    "gpuops_agent_report_apply_seconds",
    "Time to validate and reconcile an agent report that changed something",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
STEP_RUNS = Counter("gpuops_step_runs", "Workflow step attempts, by outcome", ["workflow", "step", "outcome"])
STEP_RUN_SECONDS = Histogram(
    "gpuops_step_run_seconds",
    "Duration of one workflow step attempt",
    ["workflow", "step"],
    buckets=(0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900),
)
WEBHOOK_DELIVERIES = Counter(
    "gpuops_webhook_deliveries", "Outbound webhook and notification deliveries, by outcome", ["kind", "outcome"]
)
ALERTS_RECEIVED = Counter("gpuops_alerts_received", "Monitoring alerts received, by outcome", ["source", "outcome"])


@dataclass
class GaugeData:
    """One gauge's samples as plain data (cacheable): (label values, value) pairs."""

    name: str
    documentation: str
    labels: list[str]
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)

    def add(self, values: Iterable[object], value: float) -> None:
        self.samples.append((tuple("" if v is None else str(v) for v in values), float(value)))


FleetSection = Callable[[], list[GaugeData]]
_sections: dict[str, FleetSection] = {}
CACHE_KEY = "gpuops:metrics:fleet"


def fleet_section_register(name: str, section: FleetSection) -> None:
    """An app's fleet gauges (called in its AppConfig.ready). Re-registering a name replaces it."""
    _sections[name] = section


def fleet_sections() -> dict[str, FleetSection]:
    return dict(_sections)


def fleet_gauges_compute() -> list[GaugeData]:
    """Every section's gauges, now (no cache). A failing section is logged and reported by
    gpuops_fleet_section_errors: the other sections still answer."""
    out: list[GaugeData] = []
    errors = GaugeData(
        "gpuops_fleet_section_errors", "Fleet metric sections that failed at the last computation", ["section"]
    )
    took = GaugeData("gpuops_fleet_section_seconds", "Time to compute each fleet metric section", ["section"])
    for name, section in sorted(_sections.items()):
        started = time.perf_counter()
        try:
            out.extend(section())
            errors.add([name], 0)
        except Exception:
            logger.exception("fleet metrics section %s failed", name)
            errors.add([name], 1)
        took.add([name], time.perf_counter() - started)
    return [*out, errors, took]


def fleet_gauges(cache_seconds: float) -> list[GaugeData]:
    from django.core.cache import cache

    if cache_seconds <= 0:
        return fleet_gauges_compute()
    data = cache.get(CACHE_KEY)
    if data is None:
        data = fleet_gauges_compute()
        cache.set(CACHE_KEY, data, cache_seconds)
    return data


class FleetCollector(Collector):
    """The fleet gauges as a prometheus_client collector (computed or taken from the cache at collect time)."""

    def __init__(self, cache_seconds: float) -> None:
        self.cache_seconds = cache_seconds

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for gauge in fleet_gauges(self.cache_seconds):
            family = GaugeMetricFamily(gauge.name, gauge.documentation, labels=gauge.labels)
            for values, value in gauge.samples:
                family.add_metric(list(values), value)
            yield family


class _ProcessCollector(Collector):
    """This process's own metrics (single-process mode): the default registry's collectors."""

    def collect(self):
        return REGISTRY.collect()


def is_multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def scrape_registry(cache_seconds: float) -> CollectorRegistry:
    """A registry for one scrape: the process metrics (summed over every process in multiprocess mode) and the
    fleet gauges."""
    registry = CollectorRegistry(auto_describe=False)
    if is_multiprocess():
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_ProcessCollector())
    registry.register(FleetCollector(cache_seconds))
    return registry


def process_exited(pid: int) -> None:
    """Call from gunicorn's `child_exit` hook in multiprocess mode: drops the dead worker's live gauges."""
    if is_multiprocess():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def _queue_depths() -> list[GaugeData]:
    """Messages waiting per Celery queue, asked of the broker with a short timeout (a queue the broker cannot
    size is left out rather than reported as empty)."""
    from django.conf import settings

    from gpuops.celery import app

    gauge = GaugeData("gpuops_celery_queue_depth", "Messages waiting in each Celery queue", ["queue"])
    queues = [q.strip() for q in str(getattr(settings, "CELERY_WORKER_QUEUES", "default")).split(",") if q.strip()]
    timeout = float(getattr(settings, "GPUOPS_METRICS_BROKER_TIMEOUT_SECONDS", 2))
    options = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
    with app.connection_for_read(transport_options=options) as conn:
        conn.ensure_connection(max_retries=1, timeout=timeout)
        channel = conn.default_channel
        for queue in queues:
            try:
                gauge.add([queue], channel.queue_declare(queue=queue, passive=True).message_count)
            except Exception:  # the queue does not exist yet on this broker: nothing was ever sent to it
                gauge.add([queue], 0)
    return [gauge]


fleet_section_register("celery", _queue_depths)

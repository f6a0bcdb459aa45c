"""/metrics: closed without the token or an allowed address; the fleet gauges have the fleet's values, cost the
same queries at any fleet size and are cached; process metrics add up across processes in multiprocess mode.
/healthz and /readyz for probes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from integrations.monitoring.models import ReceivedAlert
from tests.factories.cmdb import AcceleratorFactory, NodeFactory, SiteFactory, StockLocationFactory
from tests.integrations.monitoring.conftest import am_alert, am_body

pytestmark = pytest.mark.django_db
TOKEN = "scrape-secret-0123456789"
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def metrics_settings(settings):
    settings.GPUOPS_METRICS_TOKEN = TOKEN
    settings.GPUOPS_METRICS_ALLOW_FROM = []
    settings.GPUOPS_METRICS_CACHE_SECONDS = 0
    return settings


def scrape(client, token: str | None = TOKEN, **extra):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.get("/metrics", **headers, **extra)


def samples(response) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(parsed, name: str, **labels: str) -> float:
    return parsed.get((name, frozenset(labels.items())), 0.0)


def test_metrics_needs_the_token_or_an_allowed_address(client, metrics_settings):
    assert scrape(client, token=None).status_code == 403
    assert scrape(client, token="wrong").status_code == 403
    assert scrape(client).status_code == 200
    metrics_settings.GPUOPS_METRICS_TOKEN = ""
    assert scrape(client, token="").status_code == 403  # nothing configured: closed
    metrics_settings.GPUOPS_METRICS_ALLOW_FROM = ["10.0.0.0/8", "127.0.0.1/32"]
    assert scrape(client, token=None).status_code == 200  # the test client's REMOTE_ADDR is 127.0.0.1
    assert scrape(client, token=None, REMOTE_ADDR="192.0.2.7").status_code == 403
    assert scrape(client, token=None, REMOTE_ADDR="10.3.4.5").status_code == 200


def test_fleet_gauges_hold_the_fleet(client, fleet, post):
    spare_site = SiteFactory(code="sh2")
    shelf = StockLocationFactory(site=spare_site)
    AcceleratorFactory(node=None, stock_location=shelf, lifecycle="in_stock", model=fleet.card0.model)
    NodeFactory(site=fleet.site, is_cordoned=True, cordon_reason="maintenance", is_stale=True)
    post(am_body(am_alert({"alertname": "DCGMXidError", "Hostname": "gpu-a01", "gpu": "0", "xid": "79"})))
    post(am_body(am_alert({"alertname": "NodeDown", "instance": "gpu-zz99:9100"}, fingerprint="zz")))
    response = scrape(client)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    parsed = samples(response)
    card = {"vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", "site": "bj1", "lifecycle": "installed"}
    assert value(parsed, "gpuops_accelerators", **card, health="failed") == 1  # the Xid 79 card
    assert value(parsed, "gpuops_accelerators", **card, health="ok") == 1
    assert value(parsed, "gpuops_spares", site="sh2", model="NVIDIA H100 80GB HBM3") == 1
    assert value(parsed, "gpuops_nodes_stale", site="bj1") == 1
    assert value(parsed, "gpuops_nodes", site="bj1", status="active", health="ok", cordoned="true", stale="true") == 1
    assert value(parsed, "gpuops_alerts_unmatched") == 1
    assert value(parsed, "gpuops_health_events_open", kind="xid", severity="critical", source="alertmanager") == 1
    assert sum(v for (name, _), v in parsed.items() if name == "gpuops_tickets_open") == 1
    assert value(parsed, "gpuops_alerts_received_total", source="alertmanager", outcome="unmatched") >= 1
    assert value(parsed, "gpuops_fleet_section_errors", section="cmdb") == 0
    assert ("gpuops_celery_queue_depth", frozenset({("queue", "ingest")})) in parsed


def _fleet_of(n: int) -> None:
    site = SiteFactory(code=f"q{n}")
    for _ in range(n):
        node = NodeFactory(site=site)
        AcceleratorFactory(node=node)
        ReceivedAlert.objects.create(
            fingerprint=f"f{node.pk}", starts_at="2026-12-02T00:00:00Z", status="firing", labels={}
        )


def _scrape_queries(client) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert scrape(client).status_code == 200
    return len(ctx.captured_queries)


def test_a_scrape_costs_the_same_queries_at_any_fleet_size(client):
    _fleet_of(2)
    small = _scrape_queries(client)
    _fleet_of(12)
    assert _scrape_queries(client) == small
    assert small <= 15


def test_fleet_gauges_are_cached_for_the_configured_time(client, fleet, metrics_settings):
    metrics_settings.GPUOPS_METRICS_CACHE_SECONDS = 60
    from django.core.cache import cache

    cache.delete("gpuops:metrics:fleet")
    first = samples(scrape(client))
    AcceleratorFactory(node=fleet.node, model=fleet.card0.model, slot_index=63)  # a slot no fixture card holds
    with CaptureQueriesContext(connection) as ctx:
        again = samples(scrape(client))
    assert not [q for q in ctx.captured_queries if "cmdb_accelerator" in q["sql"]]
    card = {"vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", "site": "bj1", "lifecycle": "installed"}
    assert value(again, "gpuops_accelerators", **card, health="ok") == value(
        first, "gpuops_accelerators", **card, health="ok"
    )
    cache.delete("gpuops:metrics:fleet")
    assert value(samples(scrape(client)), "gpuops_accelerators", **card, health="ok") == 3


def test_process_metrics_add_up_across_processes_in_multiprocess_mode(tmp_path):
    """Two processes count agent reports into PROMETHEUS_MULTIPROC_DIR; a third's scrape registry sums them."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "gpuops.settings"}
    count = "from gpuops.metrics import AGENT_REPORTS as c; c.labels(outcome='applied').inc({n})"
    for n in (2, 3):
        subprocess.run([sys.executable, "-c", count.format(n=n)], cwd=REPO, env=env, check=True, timeout=60)
    read = (
        "from prometheus_client import CollectorRegistry, generate_latest, multiprocess\n"
        "r = CollectorRegistry(); multiprocess.MultiProcessCollector(r)\n"
        "print(generate_latest(r).decode())"
    )
    out = subprocess.run([sys.executable, "-c", read], cwd=REPO, env=env, check=True, timeout=60, capture_output=True)
    parsed = {
        (s.name, frozenset(s.labels.items())): s.value
        for f in text_string_to_metric_families(out.stdout.decode())
        for s in f.samples
    }
    assert parsed[("gpuops_agent_reports_total", frozenset({("outcome", "applied")}))] == 5


def test_healthz_answers_without_the_database(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_checks_database_migrations_and_broker(client, monkeypatch):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["checks"] == {"database": "ok", "migrations": "ok", "broker": "ok"}
    from gpuops.celery import app

    connect = app.connection_for_read
    # A Redis broker where nothing listens (port 1), whatever the configured broker is.
    monkeypatch.setattr(app, "connection_for_read", lambda **kw: connect(url="redis://127.0.0.1:1/0", **kw))
    down = client.get("/readyz")
    assert down.status_code == 503 and down.json()["checks"]["broker"].startswith("failed")
    assert down.json()["checks"]["database"] == "ok"


def test_readyz_is_not_ready_with_unapplied_migrations(client, monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    from gpuops import observability

    monkeypatch.setattr(observability, "_migrations_applied", False)
    pending = SimpleNamespace(app_label="cmdb", name="0099_future")
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [(pending, False)])
    response = client.get("/readyz")
    assert response.status_code == 503
    assert (
        response.json()["checks"]["migrations"]
        == "failed: RuntimeError: 1 migration(s) not applied, e.g. cmdb.0099_future"
    )

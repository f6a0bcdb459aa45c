"""bench/fleet_bench.py's phases run against a tiny fleet in this process (Django's WSGI handler behind httpx's WSGI
transport instead of gunicorn), so the bench keeps working as the API and the pages change. No timing is asserted:
the figures come from running the bench."""

from __future__ import annotations

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection

from bench import fleet_bench
from cmdb.models import Accelerator
from cmdb.services.demo import demo_load


@pytest.fixture(autouse=True)
def _keep_test_connection(monkeypatch):
    """Django's WSGI handler closes the database connection at each request's start and end when it looks unusable,
    and a connection inside the test's transaction does (autocommit off); on PostgreSQL that would close the
    transaction under the test. Django's test client avoids it for its own requests only."""
    monkeypatch.setattr(connection, "close_if_unusable_or_obsolete", lambda: None)


@pytest.fixture
def fleet(db, settings):
    settings.GPUOPS_METRICS_TOKEN = fleet_bench.SCRAPE_TOKEN
    demo_load(scale="small")
    return fleet_bench.fleet_prepare(first_pool=4, other_pool=2)


def _client() -> httpx.Client:
    return httpx.Client(transport=httpx.WSGITransport(app=WSGIHandler()), base_url="http://testserver")


def test_every_phase_answers_as_the_bench_expects(fleet, capsys):
    results = []
    for phase in fleet_bench.phases(fleet):
        result = fleet_bench.phase_measure(phase, _client, 1, server=None, client_counts=(1,))
        # Errors name a non-2xx answer or a report answered otherwise than the phase means (applied / unchanged).
        assert result.errors == [], (phase.key, result.errors)
        assert result.requests == 1
        assert (result.queries == 0) == (phase.key == "floor"), (phase.key, result.queries)
        assert result.verdict in (("PASS", "MISS") if phase.target else ("",))
        results.append(result)
    walk = fleet_bench.walk_measure(fleet, _client, server=None)
    assert walk.errors == []
    assert walk.requests == 1  # the small fleet fits in one page of 1,000
    results.append(walk)

    fleet_bench.table_print(results, "tiny fleet", (100.0, "PASS"), compare=False)
    out = capsys.readouterr().out
    assert "list 1,000 accelerators with context" in out
    assert f"cursor walk of all {Accelerator.objects.count():,} cards" in out


def test_reports_change_eight_cards_then_nothing(fleet):
    """The change phase's report moves all 8 cards of its node to the other driver; the unchanged phase's is the
    cheap path."""
    pk = fleet.change_nodes[0]
    before = set(Accelerator.objects.filter(node_id=pk).values_list("driver_version", flat=True))
    assert fleet_bench.queries_of(fleet_bench.report_req(fleet, pk, changed=True, expect="applied")) > 0
    after = list(Accelerator.objects.filter(node_id=pk).values_list("driver_version", flat=True))
    assert len(after) == 8 and len(set(after)) == 1 and set(after) != before
    fleet_bench.queries_of(fleet_bench.report_req(fleet, fleet.unchanged_nodes[0], changed=False, expect="unchanged"))


def test_first_report_pool_runs_out_with_a_message(fleet):
    first = next(p for p in fleet_bench.phases(fleet) if p.key == "first")
    first.setup()
    for i in range(len(fleet.first_nodes)):
        first.make(0, i)
    with pytest.raises(SystemExit, match="first-report pool"):
        first.make(0, 0)

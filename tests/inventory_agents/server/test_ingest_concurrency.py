"""Concurrent reports on PostgreSQL: row locks make them apply one after the other and end consistent."""

from __future__ import annotations

import datetime as dt
import json
import threading

import pytest
from django.db import connection
from django.test import Client

from cmdb import models as m
from inventory_agents.models import AgentState, Report
from inventory_agents.services.health import health_policies_ensure
from inventory_agents.services.tokens import agent_token_issue
from tests.inventory_agents.server.ingest_support import REPORTS_URL, card_entry, make_node, report_of

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _race(posts: list[tuple[dict, str]]) -> list[int]:
    """Post every (report, token) from its own thread (own connection), all released at once."""
    barrier = threading.Barrier(len(posts))
    statuses: list[int] = [0] * len(posts)

    def run(i: int, report: dict, token: str) -> None:
        try:
            barrier.wait(timeout=10)
            response = Client().generic(
                "POST",
                REPORTS_URL,
                json.dumps(report).encode(),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Token {token}",
            )
            statuses[i] = response.status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, r, t)) for i, (r, t) in enumerate(posts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


def _consistent(node: m.Node, cards: int) -> None:
    rows = m.Accelerator.objects.filter(node=node)
    assert rows.count() == cards
    assert sorted(rows.values_list("slot_index", flat=True)) == list(range(cards))
    for card in rows:
        assert card.placements.filter(ended_at__isnull=True).count() == 1
        creates = m.ChangeRecord.objects.filter(object_id=card.pk, action="create", content_type__model="accelerator")
        assert creates.count() == 1


def test_two_reports_for_one_node_at_once():
    health_policies_ensure()
    node = make_node("race-0001", cards=0, nics=0)
    token = agent_token_issue(node=node).token
    first = report_of(node, accelerators=[card_entry(i, f"1654RACE{i:04d}") for i in range(8)])
    second = json.loads(json.dumps(first))
    for card in second["accelerators"]:
        card["firmware_version"] = "97.00.01.00.01"
    second["collected_at"] = "2030-01-01T00:00:00Z"
    assert _race([(first, token), (second, token)]) == [200, 200]
    _consistent(node, 8)
    assert AgentState.objects.filter(node=node).count() == 1
    assert Report.objects.filter(node=node, status="applied").count() in (1, 2)
    # Whichever came second, the CMDB is exactly one of the two reports, never a mix.
    firmware = set(m.Accelerator.objects.filter(node=node).values_list("firmware_version", flat=True))
    assert len(firmware) == 1


def test_two_nodes_claim_the_same_new_card_at_once():
    health_policies_ensure()
    a, b = make_node("race-000a", cards=0, nics=0), make_node("race-000b", cards=0, nics=0)
    token_a, token_b = agent_token_issue(node=a).token, agent_token_issue(node=b).token
    report_a = report_of(a, accelerators=[card_entry(0, "1654SHARED01")])
    report_b = report_of(b, accelerators=[card_entry(0, "1654SHARED01")])
    assert _race([(report_a, token_a), (report_b, token_b)]) == [200, 200]
    card = m.Accelerator.objects.get(serial="1654SHARED01")
    assert card.node_id in (a.pk, b.pk)
    assert card.placements.filter(ended_at__isnull=True).count() == 1
    assert m.Accelerator.objects.filter(serial__startswith="1654SHARED").count() == 1


def test_twelve_reports_of_one_node_end_in_the_newest(monkeypatch):
    """The superseded check runs under the node lock: whatever order the twelve get it, the newest wins."""
    import time

    from inventory_agents.services import ingest

    def late_for_the_older(**kwargs):
        # All twelve passed the early check; the older a report, the later it reaches the node lock.
        time.sleep((newest - kwargs["observed"].collected_at).total_seconds() / 60 * 0.05)
        return real_apply(**kwargs)

    real_apply = ingest.report_apply
    monkeypatch.setattr(ingest, "report_apply", late_for_the_older)
    health_policies_ensure()
    node = make_node("race-0012", cards=2, nics=0)
    token = agent_token_issue(node=node).token
    base = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(hours=1)
    newest = base + dt.timedelta(minutes=11)
    posts = []
    for i in range(12):
        report = report_of(node, collected_at=(base + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"))
        report["system"]["kernel"] = f"6.8.0-{i}-generic"  # a different inventory each, so none is "unchanged"
        posts.append((report, token))
    assert _race(posts) == [200] * 12
    assert AgentState.objects.get(node=node).last_collected_at == newest
    node.refresh_from_db()
    assert node.kernel == "6.8.0-11-generic"
    statuses = dict(Report.objects.filter(node=node).values_list("collected_at", "status"))
    assert statuses[newest] == "applied" and set(statuses.values()) <= {"applied", "superseded"}

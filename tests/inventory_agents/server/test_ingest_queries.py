"""Reconciling one report takes a constant number of queries, whatever the number of cards and NICs."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType

from cmdb import models as m
from inventory_agents.services.tokens import agent_token_issue
from tests.inventory_agents.server.ingest_support import make_node, new_cards_report, report_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _warm_content_types() -> None:
    """Content types are cached per process in production; a cold cache would add one query per model."""
    ContentType.objects.get_for_models(m.Accelerator, m.Nic, m.NicPort, m.Node, m.InstalledSoftware)


# First sight of a node's cards and NICs: token, locks, reads, one bulk write per kind of row, records, report.
FIRST_REPORT_QUERIES = 21
# Everything changes at once: facts, slots, firmware, an Xid on every card, port GUIDs, software.
CHANGED_REPORT_QUERIES = 27  # + the savepoint around the failed-card hook calls
# The same inventory again: authenticate (token + node + state in one query), one UPDATE of last_seen_at.
UNCHANGED_REPORT_QUERIES = 2


def _ib(count: int, node_pk: int, salt: str = "a") -> list[dict]:
    return [
        {
            "ca": f"mlx5_{i}",
            "node_guid": f"0x{node_pk:010x}{i:04x}{salt}0",
            "firmware": "28.39.1002",
            "ports": [
                {
                    "port": 1,
                    "state": "active",
                    "phys_state": "linkup",
                    "rate_gbps": 400,
                    "port_guid": f"0x{node_pk:010x}{i:04x}{salt}1",
                    "link_layer": "infiniband",
                    "lid": 7,
                }
            ],
        }
        for i in range(count)
    ]


@pytest.mark.parametrize("count", [1, 16])
def test_first_report_queries_do_not_grow_with_cards(post, django_assert_max_num_queries, count):
    node = make_node(f"gpu-q{count:03d}", cards=0, nics=0)
    token = agent_token_issue(node=node).token
    report = new_cards_report(node, count)
    report["infiniband"] = _ib(count, node.pk)
    with django_assert_max_num_queries(FIRST_REPORT_QUERIES):
        body = post(report, token).json()
    assert body["summary"]["cards_created"] == count and body["summary"]["nics_created"] == count
    assert m.NicPort.objects.filter(nic__node=node).count() == count


@pytest.mark.parametrize("count", [1, 16])
def test_changed_report_queries_do_not_grow_with_cards(post, django_assert_max_num_queries, count):
    node = make_node(f"gpu-c{count:03d}", cards=count, nics=count)
    token = agent_token_issue(node=node).token
    report = report_of(node)
    report["system"]["kernel"] = "6.8.0-41-generic"
    report["software"] = [{"component": "nvidia-driver", "version": "570.133.20"}]
    for i, card in enumerate(report["accelerators"]):
        card["index"] = (i + 1) % count  # every card changes slot
        card["firmware_version"] = "97.00.01.00.01"
        card["health"]["xid_events"] = [{"xid": 79, "pci_bus_id": card["pci_bus_id"], "message": "off the bus"}]
    report["infiniband"] = _ib(count, node.pk, salt="b")
    with django_assert_max_num_queries(CHANGED_REPORT_QUERIES):
        body = post(report, token).json()
    assert body["summary"]["events_created"] == count
    assert m.Accelerator.objects.filter(node=node, health="failed", firmware_version="97.00.01.00.01").count() == count


@pytest.mark.parametrize("count", [1, 16])
def test_unchanged_report_is_two_queries(post, django_assert_max_num_queries, count):
    node = make_node(f"gpu-u{count:03d}", cards=count, nics=count)
    token = agent_token_issue(node=node).token
    report = report_of(node)
    post(report, token)
    report["collected_at"] = "2030-01-01T00:00:00Z"
    with django_assert_max_num_queries(UNCHANGED_REPORT_QUERIES):
        assert post(report, token).json()["status"] == "unchanged"

"""Topology through ingestion: stored per node with change records, only when it changed, at a constant number
of queries; a departure from the server model's expected topology fails the pair's card and asks for a repair."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from inventory_agents.services.tokens import agent_token_issue
from tests.inventory_agents.server.ingest_support import make_node, report_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _warm_content_types() -> None:
    ContentType.objects.get_for_models(m.Accelerator, m.Nic, m.NicPort, m.Node, m.InstalledSoftware, m.NodeTopology)


def topo(gpus: int, nics: int = 2, nvlink: str = "NV18", moved: dict[tuple[str, str], str] | None = None) -> dict:
    """The `topology` object the agent sends for `nvidia-smi topo -m` of an HGX-like node."""
    names = [f"GPU{i}" for i in range(gpus)] + [f"NIC{i}" for i in range(nics)]
    devices: list[dict[str, Any]] = [
        {"name": f"GPU{i}", "type": "gpu", "alias": None, "cpu_affinity": "0-51", "numa_affinity": str(i * 2 // gpus)}
        for i in range(gpus)
    ] + [{"name": f"NIC{i}", "type": "nic", "alias": f"mlx5_{i}"} for i in range(nics)]
    links = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if b.startswith("GPU"):
                kind = nvlink
            elif a.startswith("GPU"):
                kind = "PIX" if int(a[3:]) % nics == int(b[3:]) else "SYS"
            else:
                kind = "SYS"
            kind = (moved or {}).get((a, b), kind)
            link = {"a": a, "b": b, "kind": kind}
            if b.startswith("NIC"):
                link["b_alias"] = f"mlx5_{b[3:]}"
            links.append(link)
    return {"sources": ["nvidia-smi topo -m"], "devices": devices, "links": links}


def _node_with_token(hostname: str, cards: int = 8):
    node = make_node(hostname, cards=cards, nics=2)
    return node, agent_token_issue(node=node).token


def _records(node: m.Node) -> list[m.ChangeRecord]:
    ct = ContentType.objects.get_for_model(m.NodeTopology)
    return list(m.ChangeRecord.objects.filter(content_type=ct, object_id=node.topology.pk).order_by("id"))


def test_topology_is_stored_once_and_changes_are_recorded(post):
    node, token = _node_with_token("gpu-t001")
    body = post(report_of(node, topology=topo(8)), token).json()
    assert body["status"] == "applied" and body["summary"]["topology_changed"] == 1
    stored = m.NodeTopology.objects.get(node=node)
    assert len(stored.links) == 45 and stored.devices[9] == {"name": "NIC1", "type": "nic", "alias": "mlx5_1"}
    assert {"a": "GPU1", "b": "NIC1", "kind": "PIX", "b_alias": "mlx5_1"} in stored.links
    assert [r.action for r in _records(node)] == ["create"]

    # The same topology later: the cheap path, nothing written.
    again = post(report_of(node, topology=topo(8), collected_at="2030-01-01T00:00:00Z"), token).json()
    assert again["status"] == "unchanged"
    assert m.NodeTopology.objects.get(node=node).version == stored.version

    # A GPU-NIC pair moved to SYS: one update, recorded with the old and new matrix.
    moved = topo(8, moved={("GPU1", "NIC1"): "SYS"})
    post(report_of(node, topology=moved, collected_at="2030-01-02T00:00:00Z"), token)
    stored.refresh_from_db()
    assert stored.version == 2 and {"a": "GPU1", "b": "NIC1", "kind": "SYS", "b_alias": "mlx5_1"} in stored.links
    update = _records(node)[-1]
    assert update.action == "update" and "links" in update.changes


def test_a_report_without_topology_keeps_the_stored_one(post):
    node, token = _node_with_token("gpu-t002")
    post(report_of(node, topology=topo(8)), token)
    report = report_of(node, collected_at="2030-01-01T00:00:00Z")
    report["system"]["kernel"] = "6.8.0-41-generic"  # a changed report, so the full pass runs
    assert "topology" not in report
    assert post(report, token).json()["status"] == "applied"
    assert len(m.NodeTopology.objects.get(node=node).links) == 45


def test_older_reports_without_topology_apply_as_before(post):
    node, token = _node_with_token("gpu-t003")
    assert post(report_of(node), token).json()["status"] == "applied"
    assert not m.NodeTopology.objects.filter(node=node).exists()


def _changed_report_queries(post, hostname: str, gpus: int) -> int:
    node, token = _node_with_token(hostname, cards=gpus)
    post(report_of(node, topology=topo(gpus)), token)
    report = report_of(node, topology=topo(gpus, nvlink="NV12"), collected_at="2030-01-01T00:00:00Z")
    with CaptureQueriesContext(connection) as ctx:
        assert post(report, token).json()["summary"]["topology_changed"] == 1
    return len(ctx.captured_queries)


def test_topology_queries_do_not_grow_with_devices(post):
    assert _changed_report_queries(post, "gpu-t102", 2) == _changed_report_queries(post, "gpu-t108", 8)


@pytest.mark.parametrize("gpus", [2, 8])
def test_unchanged_report_with_topology_stays_two_queries(post, django_assert_max_num_queries, gpus):
    node, token = _node_with_token(f"gpu-t2{gpus:02d}", cards=gpus)
    assert post(report_of(node, topology=topo(gpus)), token).json()["status"] == "applied"
    report = report_of(node, topology=topo(gpus), collected_at="2030-01-01T00:00:00Z")
    with django_assert_max_num_queries(2):
        body = post(report, token).json()
    assert body["status"] == "unchanged", body


def _learned_model(post) -> tuple[m.Node, str]:
    """A reference node reports the good topology; the command makes it its model's expectation; a second node
    of the same model is returned with its token."""
    ref, ref_token = _node_with_token("gpu-ref1")
    post(report_of(ref, topology=topo(8)), ref_token)
    call_command("topology_learn", "--node", "gpu-ref1")
    node, token = _node_with_token("gpu-t301")
    node.server_model = ref.server_model
    node.save()
    return node, token


def test_learned_topology_matches_a_healthy_node(post, failed_calls):
    node, token = _learned_model(post)
    model = node.server_model
    model.refresh_from_db()
    assert len(model.expected_topology["links"]) == 45
    body = post(report_of(node, topology=topo(8)), token).json()
    assert "topology_departures" not in body["summary"]
    assert not m.HealthEvent.objects.filter(kind="topology").exists() and failed_calls == []


def test_a_dropped_nvlink_degrades_the_pair_and_asks_for_a_repair(post, failed_calls):
    node, token = _learned_model(post)
    broken = topo(8, moved={("GPU2", "GPU5"): "NV12"})
    body = post(report_of(node, topology=broken), token).json()
    assert body["summary"]["topology_departures"] == 1
    [event] = m.HealthEvent.objects.filter(kind="topology")
    assert event.accelerator.slot_index == 2 and event.accelerator.node_id == node.pk
    assert "GPU2-GPU5 is NV12, expected NV18" in event.message
    assert (event.severity, event.action) == ("critical", "drain_repair")
    card = m.Accelerator.objects.get(pk=event.accelerator_id)
    assert card.health == "degraded" and "GPU2-GPU5" in card.health_detail
    assert m.Node.objects.get(pk=node.pk).health == "degraded"
    [failure] = failed_calls
    assert (failure.kind, failure.code, failure.accelerator_id) == ("topology", "departure", card.pk)
    assert "GPU2-GPU5" in failure.message


def test_a_gpu_nic_pair_moved_to_sys_is_a_departure(post, failed_calls):
    node, token = _learned_model(post)
    post(report_of(node, topology=topo(8, moved={("GPU3", "NIC1"): "SYS"})), token)
    [event] = m.HealthEvent.objects.filter(kind="topology")
    assert event.accelerator.slot_index == 3 and "GPU3-NIC1 is SYS, expected PIX" in event.message


def test_topology_learn_refuses_a_node_without_topology():
    make_node("gpu-t401")
    with pytest.raises(CommandError, match="has reported no topology"):
        call_command("topology_learn", "--node", "gpu-t401")
    with pytest.raises(CommandError, match="no node"):
        call_command("topology_learn", "--node", "nope")


def test_api_shows_the_topology_and_its_departures(post, admin_client, failed_calls):
    node, token = _learned_model(post)
    post(report_of(node, topology=topo(8, moved={("GPU2", "GPU5"): "NV12"})), token)
    body = admin_client.get(f"/api/cmdb/nodes/{node.pk}/topology/").json()
    assert body["node"] == node.hostname and body["has_expected"] is True and len(body["links"]) == 45
    assert body["departures"] == [
        {
            "a": "GPU2",
            "b": "GPU5",
            "expected": "NV18",
            "actual": "NV12",
            "message": "topology departs from the server model: GPU2-GPU5 is NV12, expected NV18",
        }
    ]
    other = make_node("gpu-t501")
    assert admin_client.get(f"/api/cmdb/nodes/{other.pk}/topology/").status_code == 404


def test_api_refuses_a_malformed_expected_topology(admin_client):
    node = make_node("gpu-t601")
    url = f"/api/cmdb/server-models/{node.server_model_id}/"
    bad = admin_client.patch(url, {"expected_topology": {"links": [{"a": "GPU0"}]}}, content_type="application/json")
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"] == {"expected_topology": ["links[0] needs text a, b and kind"]}
    good = {"links": [{"a": "GPU0", "b": "GPU1", "kind": "NV18"}], "devices": []}
    ok = admin_client.patch(url, {"expected_topology": good}, content_type="application/json")
    assert ok.status_code == 200, ok.content


def test_a_departure_opens_a_repair_ticket_naming_the_pair(post, monkeypatch):
    from cmdb import hooks
    from workflows.models import Ticket
    from workflows.services.health import on_accelerator_failed

    node, token = _learned_model(post)
    monkeypatch.setattr(hooks, "_accelerator_failed", [on_accelerator_failed])
    post(report_of(node, topology=topo(8, moved={("GPU2", "GPU5"): "NV12"})), token)
    [ticket] = Ticket.objects.filter(type="repair")
    assert "needs repair in" in ticket.title and "topology departure" in ticket.title
    assert "GPU2-GPU5 is NV12, expected NV18" in ticket.description
    assert ticket.state == "draining"  # started at once (REPAIR_AUTO_START): the node is drained first

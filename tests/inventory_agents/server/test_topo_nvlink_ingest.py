"""NVLink states through ingestion: stored with the topology, and a link the server model expects active that the
node reports inactive is a departure graded like the others (degraded, drain and repair, the link named)."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from cmdb.services.topology import server_model_expected_topology_set, topology_departures
from inventory_agents.services.tokens import agent_token_issue
from tests.factories.topology import hgx_topology
from tests.inventory_agents.server.ingest_support import make_node, report_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _warm_content_types() -> None:
    ContentType.objects.get_for_models(m.Accelerator, m.Nic, m.NicPort, m.Node, m.InstalledSoftware, m.NodeTopology)


def test_an_inactive_nvlink_the_model_expects_active_degrades_the_gpu_and_asks_for_a_repair(post, failed_calls):
    node = make_node("gpu-nv01", cards=8, nics=2)
    token = agent_token_issue(node=node).token
    server_model_expected_topology_set(node.server_model, hgx_topology(nics=2, nvlinks=18))
    down = hgx_topology(nics=2, nvlinks=18, inactive=(("GPU3", 7),))
    body = post(report_of(node, topology=down), token).json()
    assert body["status"] == "applied" and body["summary"]["topology_departures"] == 1
    stored = m.NodeTopology.objects.get(node=node)
    assert stored.devices[3]["nvlinks"][7] == {"link": 7, "state": "inactive", "speed_gbps": None}
    [event] = m.HealthEvent.objects.filter(kind="topology")
    assert event.accelerator.slot_index == 3
    assert event.message.endswith("topology departs from the server model: GPU3-NVLink7 is inactive, expected active")
    assert m.Accelerator.objects.get(pk=event.accelerator_id).health == "degraded"
    [failure] = failed_calls
    assert "GPU3-NVLink7" in failure.message


def test_nvlink_comparison_table():
    expected = hgx_topology(gpus=2, nics=1, nvlinks=4, inactive=(("GPU1", 3),))
    cases = {
        "same": (hgx_topology(gpus=2, nics=1, nvlinks=4, inactive=(("GPU1", 3),)), []),
        # A link up that the model has down is no departure (like more NVLinks than expected).
        "more up": (hgx_topology(gpus=2, nics=1, nvlinks=4), []),
        "one down": (
            hgx_topology(gpus=2, nics=1, nvlinks=4, inactive=(("GPU0", 2), ("GPU1", 3))),
            [("GPU0", "NVLink2", "active", "inactive")],
        ),
        "link missing": (hgx_topology(gpus=2, nics=1, nvlinks=3), [("GPU0", "NVLink3", "active", None)]),
        # The node's agent has no nvlink status (tool absent or its output refused): nothing to compare.
        "no nvlink status": (hgx_topology(gpus=2, nics=1), []),
    }
    for name, (actual, want) in cases.items():
        got = [(d.a, d.b, d.expected, d.actual) for d in topology_departures(expected, actual)]
        assert got == want, name


def _changed_with_nvlinks(post, hostname: str, gpus: int) -> int:
    node = make_node(hostname, cards=gpus, nics=2)
    token = agent_token_issue(node=node).token
    post(report_of(node, topology=hgx_topology(gpus=gpus, nics=2, nvlinks=18)), token)
    down = hgx_topology(gpus=gpus, nics=2, nvlinks=18, inactive=(("GPU0", 5),))
    report = report_of(node, topology=down, collected_at="2030-01-01T00:00:00Z")
    with CaptureQueriesContext(connection) as ctx:
        body = post(report, token).json()
    assert body["summary"]["topology_changed"] == 1, body
    return len(ctx.captured_queries)


def test_a_changed_topology_with_nvlink_states_costs_the_same_queries_for_2_and_8_gpus(post):
    assert _changed_with_nvlinks(post, "gpu-nv02", 2) == _changed_with_nvlinks(post, "gpu-nv08", 8)


@pytest.mark.parametrize("gpus", [2, 8])
def test_an_unchanged_report_with_nvlink_states_stays_two_queries(post, django_assert_max_num_queries, gpus):
    node = make_node(f"gpu-nv1{gpus}", cards=gpus, nics=2)
    token = agent_token_issue(node=node).token
    topology = hgx_topology(gpus=gpus, nics=2, nvlinks=18)
    assert post(report_of(node, topology=topology), token).json()["status"] == "applied"
    report = report_of(node, topology=topology, collected_at="2030-01-01T00:00:00Z")
    with django_assert_max_num_queries(2):
        body = post(report, token).json()
    assert body["status"] == "unchanged", body


def test_api_refuses_malformed_nvlink_states_in_an_expected_topology(admin_client):
    node = make_node("gpu-nv31")
    url = f"/api/cmdb/server-models/{node.server_model_id}/"
    links = [{"a": "GPU0", "b": "GPU1", "kind": "NV18"}]
    bad = {"links": links, "devices": [{"name": "GPU0", "type": "gpu", "nvlinks": [{"link": "0", "state": "up"}]}]}
    response = admin_client.patch(url, {"expected_topology": bad}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "expected_topology": ["devices[0].nvlinks needs {link: integer, state: active or inactive} items"]
    }
    good = {"links": links, "devices": [{"name": "GPU0", "type": "gpu", "nvlinks": [{"link": 0, "state": "active"}]}]}
    assert admin_client.patch(url, {"expected_topology": good}, content_type="application/json").status_code == 200

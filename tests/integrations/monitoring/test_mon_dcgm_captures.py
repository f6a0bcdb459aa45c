"""Real dcgm-exporter scrapes parse as Prometheus text and carry the labels gpuops matches alerts by; an alert
built from a capture's sample finds the right card; the cost of one alert does not grow with the fleet."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from integrations.monitoring.services.targets import target_find
from tests.factories.cmdb import AcceleratorFactory, NodeFactory, SiteFactory
from tests.integrations.monitoring.conftest import am_alert, am_body, fleet_make

OURS = Path(__file__).parent / "data" / "dcgm-exporter-l4-xid79.txt"


def _samples(text: str) -> list:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def test_the_shared_dcgm_captures_parse_with_the_labels_gpuops_reads(shared_fixtures):
    captures = sorted((shared_fixtures / "dcgm-exporter-metrics").glob("*.txt"))
    assert captures
    for capture in captures:
        samples = _samples(capture.read_text())
        assert len(samples) >= 10, capture.name
        for sample in samples:
            assert {"Hostname", "UUID", "gpu", "pci_bus_id"} <= set(sample.labels), (capture.name, sample.name)
            assert sample.labels["UUID"].startswith("GPU-")


def test_our_edited_capture_holds_the_xid_79_of_the_seeded_card():
    xid = [s for s in _samples(OURS.read_text()) if s.name == "DCGM_FI_DEV_XID_ERRORS"]
    assert len(xid) == 1 and xid[0].value == 79
    assert xid[0].labels["Hostname"] == "gpu-e2e01"


@pytest.mark.django_db
def test_a_capture_sample_finds_its_card_by_uuid_bus_id_or_index():
    world = fleet_make(hostname="gpu-e2e01")
    (sample,) = [s for s in _samples(OURS.read_text()) if s.name == "DCGM_FI_DEV_XID_ERRORS"]
    labels = dict(sample.labels)
    assert target_find(labels, node_only=False).accelerator == world.card0
    labels.pop("UUID")
    assert target_find(labels, node_only=False).accelerator == world.card0  # by pci_bus_id 00000000:31:00.0
    labels.pop("pci_bus_id")
    assert target_find(labels, node_only=False).accelerator == world.card0  # by the gpu index


@pytest.mark.django_db
def test_one_alert_costs_the_same_queries_in_a_small_and_a_larger_fleet(fleet, post):
    def cost(fingerprint: str, xid: str) -> int:
        """A new event each time (a new Xid) on the same, already degraded card: the same path every time."""
        alert = am_alert(
            {"alertname": "DCGMXidError", "Hostname": "gpu-a01", "gpu": "1", "xid": xid}, fingerprint=fingerprint
        )
        with CaptureQueriesContext(connection) as ctx:
            assert post(am_body(alert)).status_code == 200
        return len(ctx.captured_queries)

    cost("warm-up", "43")
    small = cost("s1", "13")
    site = SiteFactory(code="big")
    for _ in range(10):
        AcceleratorFactory(node=NodeFactory(site=site))
    assert cost("s2", "31") == small

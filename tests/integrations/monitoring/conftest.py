"""Fixtures for the monitoring tests: a node with two NVIDIA cards known by UUID and PCI bus id, an alert source
and its token, and a poster for the intake endpoints."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.test import Client

from cmdb import models as m
from cmdb.services.health_policies import health_policies_ensure
from integrations.monitoring.services.sources import alert_source_add
from tests.factories.cmdb import AcceleratorFactory, AcceleratorModelFactory, NodeFactory, SiteFactory, VendorFactory

AM_URL = "/api/integrations/alerts/alertmanager/"
GENERIC_URL = "/api/integrations/alerts/generic/"
LIST_URL = "/api/integrations/alerts/"
UUID0 = "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
UUID1 = "GPU-5d1e0f42-1111-4c0e-9a3b-2b7a1f0e9c11"


@pytest.fixture(autouse=True)
def _repairs_wait(settings):
    """A repair ticket opens and waits (no drain step queued): these tests are about which ticket opens."""
    settings.GPUOPS_WORKFLOWS = {**getattr(settings, "GPUOPS_WORKFLOWS", {}), "REPAIR_AUTO_START": False}


def rules_ensure() -> None:
    """The default rule table and policies as migrate writes them (a transactional test flushed them)."""
    importlib.import_module("integrations.monitoring.migrations.0002_default_alert_rules").ensure(apps, None)
    health_policies_ensure()


@dataclass
class Fleet:
    site: m.Site
    node: m.Node
    card0: m.Accelerator
    card1: m.Accelerator


def fleet_make(hostname: str = "gpu-a01", site_code: str = "bj1") -> Fleet:
    site = SiteFactory(code=site_code)
    nvidia = VendorFactory(slug="nvidia")
    model = AcceleratorModelFactory(name="NVIDIA H100 80GB HBM3", vendor=nvidia)
    node = NodeFactory(hostname=hostname, site=site)
    card0 = AcceleratorFactory(
        node=node, model=model, slot_index=0, uuid=UUID0 if site_code == "bj1" else None, pci_bus_id="0000:31:00.0"
    )
    card1 = AcceleratorFactory(
        node=node, model=model, slot_index=1, uuid=UUID1 if site_code == "bj1" else None, pci_bus_id="0000:4B:00.0"
    )
    return Fleet(site, node, card0, card1)


@pytest.fixture
def fleet(db) -> Fleet:
    rules_ensure()
    return fleet_make()


@pytest.fixture
def source_token(db) -> str:
    return alert_source_add(name="prom-bj1").token


Poster = Callable[..., Any]


@pytest.fixture
def post(client: Client, source_token: str) -> Poster:
    def _post(body: Any, *, url: str = AM_URL, token: str | None = "default"):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {}
        if token is not None:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {source_token if token == 'default' else token}"
        return client.generic("POST", url, raw, content_type="application/json", **headers)

    return _post


def am_body(*alerts: dict[str, Any], status: str = "firing") -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": '{}:{alertname="DCGMXidError"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "gpuops",
        "groupLabels": {"alertname": "DCGMXidError"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": list(alerts),
    }


def am_alert(
    labels: dict[str, str],
    *,
    status: str = "firing",
    fingerprint: str = "a1b2c3d4e5f60718",
    starts_at: str = "2026-12-02T03:00:00.123456789Z",
    value: str = "",
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": labels,
        "annotations": {"summary": "GPU error", **({"value": value} if value else {})},
        "startsAt": starts_at,
        "endsAt": "2026-12-02T03:10:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph",
        "fingerprint": fingerprint,
    }

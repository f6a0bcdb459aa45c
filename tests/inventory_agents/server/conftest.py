"""Fixtures for the ingestion tests: a node with eight H100s and two HCAs, its agent token, a poster."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from cmdb import models as m
from inventory_agents.services.health import health_policies_ensure
from inventory_agents.services.tokens import agent_token_issue
from tests.factories.cmdb import StockLocationFactory
from tests.inventory_agents.server.ingest_support import REPORTS_URL, make_node


@pytest.fixture(autouse=True)
def _policies(request) -> None:
    """The default health policies, in every test that has a database (as the data migration gives in use)."""
    if request.node.get_closest_marker("django_db") is not None:
        request.getfixturevalue("db")
        health_policies_ensure()


@pytest.fixture
def node() -> m.Node:
    return make_node()


@pytest.fixture
def token(node) -> str:
    return agent_token_issue(node=node).token


@pytest.fixture
def stock(node) -> m.StockLocation:
    return StockLocationFactory(site=node.site)


Poster = Callable[..., Any]


@pytest.fixture
def post(client: Client) -> Poster:
    def _post(report: Any, token: str | None, **headers: str):
        body = report if isinstance(report, bytes) else json.dumps(report).encode()
        if token is not None:
            headers.setdefault("HTTP_AUTHORIZATION", f"Bearer {token}")
        return client.generic("POST", REPORTS_URL, body, content_type="application/json", **headers)

    return _post


@pytest.fixture(autouse=True)
def failed_calls(monkeypatch) -> list:
    """The failed-card hook with only a recorder connected: these tests are about what ingestion calls, not about
    what the workflows app does with it (its own tests cover that)."""
    from cmdb import hooks

    calls: list = []
    monkeypatch.setattr(hooks, "_accelerator_failed", [calls.append])
    return calls


@pytest.fixture(autouse=True)
def _dates_in_2030_are_later(settings) -> None:
    """Many tests send "2030-01-01T00:00:00Z" to mean "a later collection"; the clock-skew bound is tested on its
    own (test_ingest_trust.py sets it back), so here it allows them."""
    settings.GPUOPS = {**getattr(settings, "GPUOPS", {}), "AGENT_MAX_CLOCK_SKEW_MINUTES": 10 * 365 * 24 * 60}

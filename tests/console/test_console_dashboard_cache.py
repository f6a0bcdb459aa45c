"""The dashboard's figures are reused for a short time per scope: never shown to a user of another scope, and
recounted once the cache time has passed (or at once when the user's grants change)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from cmdb.permissions import grant_scope
from tests.console.test_console_dashboard import build_site
from tests.factories.cmdb import NodeFactory, UserFactory


@pytest.fixture
def world(db, settings) -> dict[str, Any]:
    settings.GPUOPS_CONSOLE = {**settings.GPUOPS_CONSOLE, "DASHBOARD_CACHE_SECONDS": 60}
    cache.clear()
    a = build_site("sa", nodes=3)
    b = build_site("sb", nodes=2)
    viewer_a = UserFactory(username="viewer-a", is_staff=False)
    viewer_b = UserFactory(username="viewer-b", is_staff=False)
    grant_scope(scope_obj=a["site"], perms=["view_scope"], users=[viewer_a])
    grant_scope(scope_obj=b["site"], perms=["view_scope"], users=[viewer_b])
    root = UserFactory(username="root", is_superuser=True)
    yield {"a": a, "b": b, "viewer_a": viewer_a, "viewer_b": viewer_b, "root": root}
    cache.clear()


def _figures(user) -> dict[str, Any]:
    client = Client()
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    return response.context["d"]


def _node_sites(d: dict[str, Any]) -> dict[str, int]:
    return {s.site: s.total.value for s in d["nodes"]["sites"]}


def test_users_of_different_scopes_never_see_each_others_cached_figures(world):
    a = _figures(world["viewer_a"])
    b = _figures(world["viewer_b"])
    root = _figures(world["root"])
    assert _node_sites(a) == {"sa": 6}
    assert _node_sites(b) == {"sb": 5}
    assert _node_sites(root) == {"sa": 6, "sb": 5}
    # Served again from the cache, each user still gets the figures of their own scope.
    assert _node_sites(_figures(world["viewer_b"])) == {"sb": 5}
    assert _node_sites(_figures(world["viewer_a"])) == {"sa": 6}
    assert _node_sites(_figures(world["root"])) == {"sa": 6, "sb": 5}


def test_figures_are_reused_then_recounted_after_the_cache_time(world, monkeypatch):
    first = _figures(world["viewer_a"])
    NodeFactory(site=world["a"]["site"], hostname="sa-new")
    again = _figures(world["viewer_a"])
    assert _node_sites(again) == {"sa": 6}
    assert again["now"] == first["now"]  # "as of" names the time the figures were counted
    # A minute later (the cache time is 60 s): counted afresh. The clock is moved, not waited for, so a slow
    # first count cannot make the second request miss the cache.
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + dt.timedelta(seconds=61))
    later = _figures(world["viewer_a"])
    assert _node_sites(later) == {"sa": 7}
    assert later["now"] > first["now"]


def test_a_changed_grant_is_not_served_from_the_cache(world):
    assert _node_sites(_figures(world["viewer_a"])) == {"sa": 6}
    grant_scope(scope_obj=world["b"]["site"], perms=["view_scope"], users=[world["viewer_a"]])
    assert _node_sites(_figures(world["viewer_a"])) == {"sa": 6, "sb": 5}


def test_no_cache_time_counts_at_every_view(world, settings):
    settings.GPUOPS_CONSOLE = {**settings.GPUOPS_CONSOLE, "DASHBOARD_CACHE_SECONDS": 0}
    assert _node_sites(_figures(world["viewer_a"])) == {"sa": 6}
    NodeFactory(site=world["a"]["site"], hostname="sa-new")
    assert _node_sites(_figures(world["viewer_a"])) == {"sa": 7}

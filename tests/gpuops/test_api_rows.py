"""The values_list() list path (gpuops.api.rows) answers exactly what the serializer would, on every endpoint."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cmdb import models as m
from cmdb.services.demo import demo_load
from gpuops.api.rows import RowReader, reader_for
from gpuops.api.viewsets import RowListMixin
from tests.factories.cmdb import UserFactory

pytestmark = pytest.mark.django_db


def _list_endpoints() -> list[tuple[str, type]]:
    """(path, viewset class) of every list route mounted under /api/ (no path parameters)."""
    found: list[tuple[str, type]] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = str(pattern.pattern).lstrip("^").rstrip("$")
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + route)
            elif isinstance(pattern, URLPattern):
                cls = getattr(pattern.callback, "cls", None)
                actions = getattr(pattern.callback, "actions", None) or {}
                full = prefix + route
                if cls and actions.get("get") == "list" and "(?P" not in full and full.startswith("api/"):
                    found.append(("/" + full, cls))

    walk(get_resolver().url_patterns, "")
    return sorted(set(found), key=lambda item: item[0])


@pytest.fixture
def fleet() -> None:
    demo_load(scale="small")
    node = m.Node.objects.order_by("pk").first()
    tags = [m.Tag.objects.create(slug=slug) for slug in ("zz-burn-in", "aa-canary")]
    node.tags.add(*tags)
    # Timestamps whose text form has no fraction, or a fraction with trailing zeros (PostgreSQL formats them).
    cards = list(m.Accelerator.objects.order_by("pk")[:2])
    m.Accelerator.objects.filter(pk=cards[0].pk).update(last_seen_at=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC))
    m.Accelerator.objects.filter(pk=cards[1].pk).update(
        last_seen_at=dt.datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=dt.UTC), purchase_date=dt.date(2025, 3, 4)
    )


@pytest.fixture
def root() -> APIClient:
    user = UserFactory(username="rows-root", is_superuser=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_the_fleet_lists_have_a_reader() -> None:
    by_path = dict(_list_endpoints())
    for path in ("/api/cmdb/accelerators/", "/api/cmdb/nodes/", "/api/cmdb/switches/", "/api/cmdb/links/"):
        viewset = by_path[path]
        assert reader_for(viewset.serializer_class) is not None, path


def test_every_list_with_a_reader_answers_as_its_serializer(fleet, root, monkeypatch) -> None:
    checked = []
    for path, viewset in _list_endpoints():
        if not issubclass(viewset, RowListMixin) or reader_for(viewset().get_serializer_class()) is None:
            continue
        for query in ("?limit=1000", "?mode=cursor&limit=7"):
            fast = root.get(path + query)
            assert fast.status_code == 200, (path, fast.content[:300])
            with monkeypatch.context() as patch:
                patch.setattr(viewset, "row_reader_enabled", False)
                slow = root.get(path + query)
            assert slow.status_code == 200
            assert fast.json() == slow.json(), path
        checked.append(path)
    # Empty tables prove nothing: the fleet's main lists must have rows.
    assert {"/api/cmdb/accelerators/", "/api/cmdb/nodes/", "/api/cmdb/nic-ports/"} <= set(checked)
    for path in ("/api/cmdb/accelerators/", "/api/cmdb/nodes/", "/api/cmdb/nic-ports/", "/api/cmdb/links/"):
        assert root.get(path + "?limit=1").json()["count"] > 0, path


def test_timestamps_read_as_the_serializer_writes_them(fleet, root) -> None:
    rows = root.get("/api/cmdb/accelerators/?ordering=id&limit=2").json()["results"]
    assert [r["last_seen_at"] for r in rows] == ["2026-01-02T03:04:05Z", "2026-01-02T03:04:05.120000Z"]
    assert rows[1]["purchase_date"] == "2025-03-04"


def test_a_tagged_node_lists_its_tags_in_slug_order(fleet, root) -> None:
    node = m.Node.objects.order_by("pk").first()
    row = root.get(f"/api/cmdb/nodes/?id={node.pk}").json()["results"][0]
    assert [t["slug"] for t in row["tags"]] == ["aa-canary", "zz-burn-in"]


def test_a_cursor_walk_returns_every_card_once(fleet, root) -> None:
    seen: list[int] = []
    link: str | None = "/api/cmdb/accelerators/?mode=cursor&limit=50"
    while link:
        body = root.get(link).json()
        seen += [row["id"] for row in body["results"]]
        link = body["next"]
    assert seen == sorted(m.Accelerator.objects.values_list("pk", flat=True))


def test_the_card_list_reads_only_the_columns_it_shows(fleet, root) -> None:
    with CaptureQueriesContext(connection) as ctx:
        root.get("/api/cmdb/accelerators/?limit=1000")
    page = [q["sql"] for q in ctx.captured_queries if 'FROM "cmdb_accelerator"' in q["sql"] and "COUNT" not in q["sql"]]
    assert len(page) == 1
    # The card's own timestamps are read; the joined tables' are not.
    assert '"cmdb_node"."created_at"' not in page[0]
    assert '"cmdb_acceleratormodel"."tdp_w"' not in page[0]


def test_a_serializer_with_a_method_field_gets_no_reader() -> None:
    from rest_framework import serializers

    from gpuops.api.serializers import BaseModelSerializer

    class WithMethod(BaseModelSerializer):
        label = serializers.SerializerMethodField()

        class Meta:
            model = m.Site
            fields = "__all__"

        def get_label(self, obj: m.Site) -> str:
            return obj.code.upper()

    assert RowReader.compile(WithMethod) is None

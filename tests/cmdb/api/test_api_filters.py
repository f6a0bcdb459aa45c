"""Filters, `__in` lists, free text, ordering: each API result is compared with the same question asked of
the ORM directly, on the small demo fleet (3 vendors, 2 sites, racks, clusters, tenants, drivers, links)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db.models import Q, QuerySet

from cmdb import models as m
from tests.cmdb.api.support import url

pytestmark = pytest.mark.django_db

Expected = Callable[[], QuerySet]

N = m.Node.objects
A = m.Accelerator.objects


def _node_ids_with(component: str, version: str | None = None) -> QuerySet:
    rows = m.InstalledSoftware.objects.filter(component=component)
    if version:
        rows = rows.filter(version=version)
    return rows.values("node_id")


CARD_TEXT = ("serial", "uuid", "pci_bus_id", "node__hostname")


def _any_contains(fields: tuple[str, ...], value: str) -> Q:
    condition = Q()
    for field in fields:
        condition |= Q(**{f"{field}__icontains": value})
    return condition


CASES: list[tuple[str, dict[str, str], Expected]] = [
    # accelerators: location, organisation, catalog
    ("accelerators", {"site": "sh1"}, lambda: A.filter(site__code="sh1")),
    ("accelerators", {"site__in": "sh1,bj2"}, lambda: A.filter(site__code__in=["sh1", "bj2"])),
    ("accelerators", {"room": "hall-a910b"}, lambda: A.filter(node__rack__room__name="hall-a910b")),
    ("accelerators", {"rack": "sh1-h100-r002"}, lambda: A.filter(node__rack__name="sh1-h100-r002")),
    ("accelerators", {"node": "bj2-k100-0003"}, lambda: A.filter(node__hostname="bj2-k100-0003")),
    (
        "accelerators",
        {"node__in": "bj2-k100-0003,bj2-k100-0004"},
        lambda: A.filter(node__hostname__in=["bj2-k100-0003", "bj2-k100-0004"]),
    ),
    ("accelerators", {"cluster": "bj2-ascend"}, lambda: A.filter(node__cluster__name="bj2-ascend")),
    ("accelerators", {"tenant": "vision"}, lambda: A.filter(node__tenant__slug="vision")),
    ("accelerators", {"vendor": "ascend"}, lambda: A.filter(model__vendor__slug="ascend")),
    ("accelerators", {"vendor__in": "hygon,ascend"}, lambda: A.filter(model__vendor__slug__in=["hygon", "ascend"])),
    ("accelerators", {"model": "Hygon K100"}, lambda: A.filter(model__name="Hygon K100")),
    ("accelerators", {"stock_location": "warehouse"}, lambda: A.filter(stock_location__name="warehouse")),
    ("accelerators", {"health": "failed"}, lambda: A.filter(health="failed")),
    ("accelerators", {"health__in": "failed,degraded"}, lambda: A.filter(health__in=["failed", "degraded"])),
    ("accelerators", {"lifecycle": "in_stock"}, lambda: A.filter(lifecycle="in_stock")),
    ("accelerators", {"lifecycle__in": "in_stock,rma"}, lambda: A.filter(lifecycle__in=["in_stock", "rma"])),
    ("accelerators", {"serial": "1654SH1H100000003"}, lambda: A.filter(serial="1654SH1H100000003")),
    ("accelerators", {"uuid": "__first_uuid__"}, lambda: A.filter(uuid=A.exclude(uuid=None).order_by("pk")[0].uuid)),
    ("accelerators", {"slot_index__in": "0,7"}, lambda: A.filter(slot_index__in=[0, 7])),
    (
        "accelerators",
        {"driver": "nvidia-driver:550.127.05"},
        lambda: A.filter(node_id__in=_node_ids_with("nvidia-driver", "550.127.05")),
    ),
    (
        "accelerators",
        {"installed_version": "24.1.rc2"},
        lambda: A.filter(node_id__in=m.InstalledSoftware.objects.filter(version="24.1.rc2").values("node_id")),
    ),
    ("accelerators", {"driver_version": "6.3.8"}, lambda: A.filter(driver_version="6.3.8")),
    (
        "accelerators",
        {"site": "bj2", "model": "Ascend 910B3", "health": "failed"},
        lambda: A.filter(site__code="bj2", model__name="Ascend 910B3", health="failed"),
    ),
    (
        "accelerators",
        {"q": "sh1h10000002"},
        lambda: A.filter(Q(serial__icontains="sh1h10000002") | Q(node__hostname__icontains="sh1h10000002")),
    ),
    # the node's hostname: its cards (looked up through the node ids first)
    ("accelerators", {"q": "BJ2-K100-0003"}, lambda: A.filter(_any_contains(CARD_TEXT, "bj2-k100-0003"))),
    ("accelerators", {"q": "k100-000"}, lambda: A.filter(_any_contains(CARD_TEXT, "k100-000"))),
    ("accelerators", {"tag": "canary"}, lambda: A.filter(node__tags__slug="canary")),
    # nodes
    ("nodes", {"site": "bj2"}, lambda: N.filter(site__code="bj2")),
    ("nodes", {"rack": "null"}, lambda: N.filter(rack=None)),
    ("nodes", {"room": "hall-h100"}, lambda: N.filter(rack__room__name="hall-h100")),
    ("nodes", {"cluster": "bj2-dcu"}, lambda: N.filter(cluster__name="bj2-dcu")),
    ("nodes", {"tenant__in": "vision,llm-pretrain"}, lambda: N.filter(tenant__slug__in=["vision", "llm-pretrain"])),
    ("nodes", {"status": "burn_in"}, lambda: N.filter(status="burn_in")),
    ("nodes", {"status__in": "burn_in,received"}, lambda: N.filter(status__in=["burn_in", "received"])),
    ("nodes", {"role": "compute"}, lambda: N.filter(role="compute")),
    ("nodes", {"health": "failed"}, lambda: N.filter(health="failed")),
    ("nodes", {"hostname": "sh1-h100-0007"}, lambda: N.filter(hostname="sh1-h100-0007")),
    (
        "nodes",
        {"hostname__in": "sh1-h100-0007,bj2-k100-0001"},
        lambda: N.filter(hostname__in=["sh1-h100-0007", "bj2-k100-0001"]),
    ),
    ("nodes", {"serial": "__first_serial__"}, lambda: N.filter(serial=N.order_by("pk")[0].serial)),
    ("nodes", {"model": "Huawei Atlas 800T A2"}, lambda: N.filter(server_model__name="Huawei Atlas 800T A2")),
    ("nodes", {"vendor": "nvidia"}, lambda: N.filter(server_model__accelerator_model__vendor__slug="nvidia")),
    ("nodes", {"vendor": "sugon"}, lambda: N.filter(server_model__vendor__slug="sugon")),
    (
        "nodes",
        {"accelerator_model": "Hygon K100"},
        lambda: N.filter(server_model__accelerator_model__name="Hygon K100"),
    ),
    (
        "nodes",
        {"driver": "ascend-driver:24.1.rc2"},
        lambda: N.filter(pk__in=_node_ids_with("ascend-driver", "24.1.rc2")),
    ),
    ("nodes", {"driver": "dtk"}, lambda: N.filter(pk__in=_node_ids_with("dtk"))),
    (
        "nodes",
        {"installed_version": "550.127.05"},
        lambda: N.filter(pk__in=m.InstalledSoftware.objects.filter(version="550.127.05").values("node_id")),
    ),
    ("nodes", {"tag": "canary"}, lambda: N.filter(tags__slug="canary")),
    ("nodes", {"q": "K100-000"}, lambda: N.filter(hostname__icontains="k100-000")),
    ("nodes", {"is_cordoned": "false"}, lambda: N.filter(is_cordoned=False)),
    # links, switches, software, catalog, history
    (
        "links",
        {"node": "sh1-h100-0002"},
        lambda: m.Link.objects.filter(a_nic_port__nic__node__hostname="sh1-h100-0002"),
    ),
    (
        "links",
        {"switch": "sh1-ib-compute-su001-leaf3"},
        lambda: m.Link.objects.filter(b_switch_port__switch__name="sh1-ib-compute-su001-leaf3"),
    ),
    (
        "links",
        {"rail": "3", "site": "bj2"},
        lambda: m.Link.objects.filter(b_switch_port__switch__rail=3, fabric__site__code="bj2"),
    ),
    ("links", {"status": "connected"}, lambda: m.Link.objects.filter(status="connected")),
    (
        "switches",
        {"fabric": "bj2-roce-compute", "rail__in": "0,1"},
        lambda: m.Switch.objects.filter(fabric__name="bj2-roce-compute", rail__in=[0, 1]),
    ),
    (
        "installed-software",
        {"driver": "cuda:12.4.1"},
        lambda: m.InstalledSoftware.objects.filter(component="cuda", version="12.4.1"),
    ),
    (
        "driver-packages",
        {"supports": "H200-SXM5-141GB"},
        lambda: m.DriverPackage.objects.filter(supported_models__name="H200-SXM5-141GB"),
    ),
    (
        "driver-packages",
        {"component__in": "cuda,dtk"},
        lambda: m.DriverPackage.objects.filter(component__in=["cuda", "dtk"]),
    ),
    (
        "health-events",
        {"site": "sh1", "is_open": "true"},
        lambda: m.HealthEvent.objects.filter(node__site__code="sh1", resolved_at=None),
    ),
    ("changes", {"model": "cmdb.rack"}, lambda: m.ChangeRecord.objects.filter(content_type__model="rack")),
    (
        "changes",
        {"model": "site", "source": "import"},
        lambda: m.ChangeRecord.objects.filter(content_type__model="site", source="import"),
    ),
]


@pytest.fixture
def tagged_fleet(fleet):
    tag = m.Tag.objects.create(slug="canary")
    for node in N.filter(hostname__in=["sh1-h100-0001", "bj2-a910b-0002"]):
        node.tags.add(tag)


def _ids(client, resource: str, params: dict[str, str]) -> set[int]:
    response = client.get(url(resource), {**params, "limit": 1000})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == len(body["results"])
    return {row["id"] for row in body["results"]}


def test_every_filter_matches_the_orm(root, tagged_fleet):
    """Table-driven (one fleet for all cases: loading it is the slow part)."""
    first_uuid = A.exclude(uuid=None).order_by("pk")[0].uuid
    first_serial = N.order_by("pk")[0].serial
    for resource, params, expected in CASES:
        params = {
            k: v.replace("__first_uuid__", first_uuid).replace("__first_serial__", first_serial)
            for k, v in params.items()
        }
        want = set(expected().values_list("pk", flat=True).distinct())
        assert want, f"case {resource} {params} matches nothing: a vacuous test"
        assert _ids(root, resource, params) == want, (resource, params)


def test_filters_by_id_too(root, fleet):
    site = m.Site.objects.get(code="bj2")
    assert _ids(root, "nodes", {"site": str(site.pk)}) == _ids(root, "nodes", {"site": "bj2"})
    model = m.AcceleratorModel.objects.get(name="Hygon K100")
    assert _ids(root, "accelerators", {"model__in": f"{model.pk},Ascend 910B3"}) == set(
        A.filter(model__name__in=["Hygon K100", "Ascend 910B3"]).values_list("pk", flat=True)
    )


def test_ordering(root, fleet):
    rows = root.get(url("nodes"), {"ordering": "-hostname", "limit": 5}).json()["results"]
    assert [r["hostname"] for r in rows] == list(N.order_by("-hostname").values_list("hostname", flat=True)[:5])
    params = {"ordering": "node,slot_index", "site": "sh1", "lifecycle": "installed", "limit": 10}
    rows = root.get(url("accelerators"), params).json()
    pairs = [(r["node"]["hostname"], r["slot_index"]) for r in rows["results"]]
    assert pairs == sorted(pairs)


def test_bad_filter_values_are_400_naming_the_parameter(root, fleet):
    for params, field in (
        ({"ordering": "password"}, "ordering"),
        ({"status": "exploded"}, "status"),
        ({"status__in": "active,exploded"}, "status__in"),
        ({"id": "x"}, "id"),
        ({"id": str(2**70)}, "id"),
        ({"updated_at__gte": "9999-12-31T23:59:59-14:00"}, "updated_at__gte"),
    ):
        response = root.get(url("nodes"), params)
        assert response.status_code == 400, params
        assert field in response.json()["error"]["fields"], params


def test_datetime_filters_take_any_iso_offset(root, fleet):
    """PostgreSQL refuses offsets beyond 15:59 in a query; the filter converts to UTC first (found by fuzzing)."""
    response = root.get(url("vendors"), {"updated_at__gte": "6623-03-16T09:07:39.68-20:10"})
    assert response.status_code == 200
    assert response.json()["count"] == 0
    assert root.get(url("vendors"), {"updated_at__gte": "2000-01-01T00:00:00+05:30"}).json()["count"] > 0


def test_changes_filter_by_object_actor_and_correlation(root, superuser, fleet):
    node = N.get(hostname="sh1-h100-0001")
    root.patch(url("nodes", node.pk), {"status": "maintenance"}, format="json", HTTP_X_REQUEST_ID="corr-7")
    params = {"model": "node", "object_id": str(node.pk), "actor": "root", "correlation_id": "corr-7", "source": "api"}
    rows = root.get(url("changes"), params).json()["results"]
    assert [(r["model"], r["object_id"], r["action"]) for r in rows] == [("cmdb.node", node.pk, "update")]
    assert rows[0]["actor"] == {"id": superuser.pk, "username": "root"}


def test_free_text_through_the_node_falls_back_to_the_join_when_many_nodes_match(root, fleet, monkeypatch):
    from cmdb import filtersets

    want = set(A.filter(_any_contains(CARD_TEXT, "k100")).values_list("pk", flat=True))
    assert N.filter(hostname__icontains="k100").count() > 2
    monkeypatch.setattr(filtersets, "RELATED_SEARCH_CAP", 2)
    assert _ids(root, "accelerators", {"q": "k100"}) == want


def test_a_first_page_that_is_not_full_is_its_own_count(root, fleet):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    card = A.exclude(serial=None).order_by("pk")[0]
    with CaptureQueriesContext(connection) as ctx:
        body = root.get(url("accelerators"), {"q": card.serial}).json()
    assert body["count"] == len(body["results"]) >= 1
    assert not [q for q in ctx.captured_queries if "COUNT(" in q["sql"]]
    # A full first page and a later page still count.
    total = A.count()
    assert root.get(url("accelerators"), {"limit": 5}).json()["count"] == total
    assert root.get(url("accelerators"), {"limit": 5, "offset": 5}).json()["count"] == total
    beyond = root.get(url("accelerators"), {"limit": 5, "offset": total + 10}).json()
    assert beyond["count"] == total and beyond["results"] == []


@pytest.mark.services
def test_postgresql_answers_the_card_search_from_its_indexes(fleet):
    """Every branch of the card `?q=` has an index (0007, 0012), so PostgreSQL reads no card it does not return."""
    from django.db import connection

    from cmdb.filtersets import AcceleratorFilterSet

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite has no search indexes")
    with connection.cursor() as cursor:
        # Plain index scans off too: on a small table the planner walks the primary key instead.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
    plan = AcceleratorFilterSet({"q": "bj2-k100-0003"}, queryset=A.all()).qs.explain()
    assert "Seq Scan on cmdb_accelerator" not in plan and "BitmapOr" in plan, plan
    assert "cmdb_accelerator_pci_bus_id_tg" in plan and "cmdb_accelerator_serial_tg" in plan, plan

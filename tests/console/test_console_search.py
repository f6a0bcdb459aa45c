"""The search box: one exact match opens its page, partial serials list their matches by kind, MACs and GUIDs are
found in any spelling, nothing out of scope is found, and a search costs the same whatever the fleet size."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from cmdb.permissions import grant_scope
from console import search
from console.search import MIN_FRAGMENT, PER_KIND, Terms, inventory_search
from integrations.procurement.models import ProcurementRequest
from tests.factories.cmdb import (
    AcceleratorFactory,
    NodeFactory,
    SiteFactory,
    StockLocationFactory,
    SwitchFactory,
    UserFactory,
)
from workflows.models import Ticket

MAC = "b8:ce:f6:0a:1b:2c"
GUID = "0x506b4b0300a1b2c3"


def build_site(code: str, *, nodes: int) -> None:
    site = SiteFactory(code=code)
    for i in range(nodes):
        node = NodeFactory(
            site=site,
            hostname=f"{code}-gpu-{i:04d}",
            serial=f"{code.upper()}-NODE-{i:04d}",
            asset_tag=f"AT-{code}-{i:04d}",
            bmc_address=f"10.{len(code)}.{ord(code[-1]) % 250}.{i + 1}",
        )
        for slot in range(2):
            AcceleratorFactory(
                node=node,
                slot_index=slot,
                serial=f"{code.upper()}16540{i:04d}{slot}",
                uuid=f"GPU-{code}{i:04d}{slot}-aaaa-bbbb",
            )
        nic = m.Nic.objects.create(
            node=node, name="mlx5_0", kind="infiniband", serial=f"MT{code.upper()}{i:04d}", node_guid=""
        )
        m.NicPort.objects.create(nic=nic, name="1", guid=f"0x{ord(code[-1]):02x}6b4b03{i:08x}")
        eth = m.Nic.objects.create(node=node, name="eth0", kind="ethernet")
        m.NicPort.objects.create(nic=eth, name="eth0", mac=f"0c:{ord(code[-1]):02x}:00:00:{i // 256:02x}:{i % 256:02x}")


@pytest.fixture
def world(db):
    a, b = SiteFactory(code="sa"), SiteFactory(code="sb")
    node = NodeFactory(
        site=a, hostname="sa-gpu-0001", serial="SRV-A-0001", asset_tag="AT-77812", bmc_address="10.1.0.11"
    )
    card = AcceleratorFactory(
        node=node, slot_index=0, serial="1654922001234", uuid="GPU-8f6c2b1e-1111-2222-3333-444455556666"
    )
    AcceleratorFactory(node=node, serial="1654922001299", slot_index=1)
    nic = m.Nic.objects.create(node=node, name="mlx5_0", kind="infiniband", serial="MT2231X0042")
    m.NicPort.objects.create(nic=nic, name="1", guid=GUID)
    eth = m.Nic.objects.create(node=node, name="eth0", kind="ethernet")
    m.NicPort.objects.create(nic=eth, name="eth0", mac=MAC)
    switch = SwitchFactory(site=a, name="sa-leaf-01", serial="SSJ17310042", mgmt_ip="10.9.0.1")
    ticket = Ticket.objects.create(
        type="repair", title="card fell off the bus", state="new", site=a, correlation_id="c1"
    )
    other = NodeFactory(site=b, hostname="sb-gpu-0001", serial="SRV-B-0001", bmc_address="10.2.0.11")
    b_card = AcceleratorFactory(node=other, slot_index=0, serial="1654922009999")
    b_ticket = Ticket.objects.create(type="repair", title="site b", state="new", site=b, correlation_id="c2")
    SwitchFactory(site=b, name="sb-leaf-01", mgmt_ip="10.9.0.2")
    viewer = UserFactory(username="viewer-a", is_staff=False)
    grant_scope(scope_obj=a, perms=["view_scope"], users=[viewer])
    root = UserFactory(username="root", is_superuser=True)
    return {
        "node": node,
        "card": card,
        "switch": switch,
        "ticket": ticket,
        "b_card": b_card,
        "b_ticket": b_ticket,
        "viewer": viewer,
        "root": root,
    }


def _get(user, q: str):
    client = Client()
    client.force_login(user)
    return client.get("/search/", {"q": q})


@pytest.mark.parametrize(
    ("q", "where"),
    [
        ("sa-gpu-0001", "/nodes/sa-gpu-0001/"),
        ("SA-GPU-0001", "/nodes/sa-gpu-0001/"),
        ("SRV-A-0001", "/nodes/sa-gpu-0001/"),
        ("AT-77812", "/nodes/sa-gpu-0001/"),
        ("10.1.0.11", "/nodes/sa-gpu-0001/"),
        ("1654922001234", "/accelerators/1654922001234/"),
        ("gpu-8f6c2b1e-1111-2222-3333-444455556666", "/accelerators/1654922001234/"),
        ("MT2231X0042", "/nodes/sa-gpu-0001/"),
        (GUID, "/nodes/sa-gpu-0001/"),
        ("506b:4b03:00a1:b2c3", "/nodes/sa-gpu-0001/"),
        ("506B4B0300A1B2C3", "/nodes/sa-gpu-0001/"),
        ("sa-leaf-01", "/switches/sa-leaf-01/"),
        ("SSJ17310042", "/switches/sa-leaf-01/"),
        ("10.9.0.1", "/switches/sa-leaf-01/"),
    ],
)
def test_one_exact_match_redirects_to_its_page(world, q, where):
    response = _get(world["viewer"], q)
    assert response.status_code == 302
    assert response["Location"] == where


@pytest.mark.parametrize("spelling", [MAC, MAC.upper(), MAC.replace(":", "-"), "b8ce.f60a.1b2c", "B8CEF60A1B2C"])
def test_mac_in_any_notation_finds_the_port_and_opens_its_node(world, spelling):
    response = _get(world["viewer"], spelling)
    assert response.status_code == 302
    assert response["Location"] == "/nodes/sa-gpu-0001/"


def test_ticket_reference_redirects(world):
    ticket = world["ticket"]
    for q in (ticket.reference, ticket.reference.lower(), f"#{ticket.pk}"):
        response = _get(world["viewer"], q)
        assert (response.status_code, response["Location"]) == (302, f"/tickets/{ticket.pk}/"), q


def test_a_reference_with_the_wrong_prefix_is_no_ticket(world):
    result = inventory_search(user=world["root"], query=f"DEC-{world['ticket'].pk}")
    assert "ticket" not in {k.kind for k in result.kinds}


def test_purchase_order_finds_the_request_and_its_ticket(world):
    ProcurementRequest.objects.create(
        title="spares", justification="refill", budget_code="B1", po_number="PO-2026-0042", ticket_ref="ticket:7"
    )
    response = _get(world["root"], "po-2026-0042")
    assert (response.status_code, response["Location"]) == (302, "/tickets/7/")
    # Someone neither approving nor holding the global permission does not see other people's requests.
    assert _get(world["viewer"], "PO-2026-0042").status_code == 200


def test_partial_serial_lists_matches_grouped_by_kind(world):
    response = _get(world["viewer"], "16549220012")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'href="/accelerators/1654922001234/"' in body and 'href="/accelerators/1654922001299/"' in body
    result = inventory_search(user=world["viewer"], query="16549220012")
    assert [(k.kind, k.total) for k in result.kinds] == [("accelerator", 2)]
    assert result.redirect_url is None


def test_partial_serial_is_case_insensitive(world):
    result = inventory_search(user=world["viewer"], query="ssj1731")
    assert [h.url for k in result.kinds for h in k.hits] == ["/switches/sa-leaf-01/"]


def test_out_of_scope_objects_are_never_found(world):
    viewer = world["viewer"]
    for q in (
        "sb-gpu-0001",
        "SRV-B-0001",
        "10.2.0.11",
        "1654922009999",
        "sb-leaf",
        "10.9.0.2",
        world["b_ticket"].reference,
    ):
        response = _get(viewer, q)
        assert response.status_code == 200, q
        body = response.content.decode()
        assert "Nothing you may see matches" in body, q
        assert "sb-" not in body.replace(q, "")  # the query itself is echoed in the search boxes
    # Partial matches count only what is in scope: the site-B card is no third result.
    result = inventory_search(user=viewer, query="165492200")
    assert result.total == 2
    assert inventory_search(user=world["root"], query="165492200").total == 3


def test_empty_query_shows_what_can_be_searched(world):
    response = _get(world["viewer"], "  ")
    assert response.status_code == 200
    body = response.content.decode()
    for what in ("Serial", "GPU UUID", "Port GUID", "MAC", "IP address", "Ticket", "Purchase order"):
        assert f">{what}<" in body


@pytest.mark.parametrize(("q", "reason"), [("x" * 500, "at most 200"), ("sa-gpu\x00", "control characters")])
def test_unsearchable_input_is_a_clear_400(world, q, reason):
    response = _get(world["viewer"], q)
    assert response.status_code == 400
    assert reason in response.content.decode()


def test_each_kind_is_capped_with_a_link_to_the_full_list(world):
    shelf = StockLocationFactory(site=world["node"].site)
    for i in range(PER_KIND + 5):
        AcceleratorFactory(
            node=None, stock_location=shelf, lifecycle="in_stock", serial=f"CAPX{i:04d}", slot_index=None
        )
    result = inventory_search(user=world["viewer"], query="capx")
    [kind] = result.kinds
    assert (len(kind.hits), kind.total, kind.has_more) == (PER_KIND, PER_KIND + 5, True)
    assert kind.more_url == "/accelerators/?q=capx"
    assert "All 25 accelerators" in _get(world["viewer"], "capx").content.decode()


def test_exact_match_wins_over_partial_ones(world):
    AcceleratorFactory(node=world["node"], serial="165492200123", slot_index=3)
    result = inventory_search(user=world["viewer"], query="165492200123")
    assert result.redirect_url == "/accelerators/165492200123/"
    # Two objects named exactly (a card and a switch): listed, each kind's exact match first.
    SwitchFactory(site=world["node"].site, name="sa-leaf-02", serial="165492200123")
    result = inventory_search(user=world["viewer"], query="165492200123")
    assert result.redirect_url is None
    cards = next(k for k in result.kinds if k.kind == "accelerator")
    assert cards.total == 2 and cards.hits[0].is_exact and cards.hits[0].label == "165492200123"
    assert [h.is_exact for h in cards.hits] == [True, False]


def test_a_large_total_is_counted_only_up_to_the_cap(world, monkeypatch):
    shelf = StockLocationFactory(site=world["node"].site)
    for i in range(12):
        AcceleratorFactory(
            node=None, stock_location=shelf, lifecycle="in_stock", serial=f"CAPY{i:04d}", slot_index=None
        )
    monkeypatch.setattr(search, "TOTAL_CAP", 10)
    monkeypatch.setattr(search, "PER_KIND", 5)
    [kind] = inventory_search(user=world["viewer"], query="capy").kinds
    assert (len(kind.hits), kind.total_is_capped, kind.total_label) == (5, True, "more than 10")
    page = _get(world["viewer"], "capy").content.decode()
    assert "All more than 10 accelerators" in page and "more than 10 results" in page
    # Exactly at the cap it is still the exact number.
    AcceleratorFactory._meta.model.objects.filter(serial__in=["CAPY0010", "CAPY0011"]).delete()
    [kind] = inventory_search(user=world["viewer"], query="capy").kinds
    assert (kind.total, kind.total_is_capped, kind.total_label) == (10, False, "10")


def test_a_fragment_shorter_than_the_minimum_matches_only_the_start(world):
    assert MIN_FRAGMENT == 3
    # "sa" starts sa-gpu-0001 and sa-leaf-01; "pu" is inside sa-gpu-0001 and a GPU UUID only and finds nothing.
    assert {k.kind for k in inventory_search(user=world["viewer"], query="sa").kinds} == {"node", "switch"}
    assert inventory_search(user=world["viewer"], query="pu").kinds == []
    # From three characters on, anywhere in the identifier.
    assert [h.label for h in inventory_search(user=world["viewer"], query="gpu").kinds[0].hits] == ["sa-gpu-0001"]
    # A short fragment still never reaches another site.
    labels = {h.label for k in inventory_search(user=world["viewer"], query="SR").kinds for h in k.hits}
    assert labels == {"sa-gpu-0001"}


@pytest.mark.parametrize(
    ("raw", "mac", "guid"),
    [
        ("AA-BB-CC-DD-EE-FF", "aa:bb:cc:dd:ee:ff", None),
        ("aabb.ccdd.eeff", "aa:bb:cc:dd:ee:ff", None),
        ("0x2c903000e0b72", None, "0x0002c903000e0b72"),
        ("0002:c903:000e:0b72", None, "0x0002c903000e0b72"),
        ("hello", None, None),
    ],
)
def test_identifier_spellings(raw, mac, guid):
    terms = Terms.parse(raw)
    assert (terms.mac, terms.guid) == (mac, guid)


def _queries(user, q: str) -> int:
    client = Client()
    client.force_login(user)
    with CaptureQueriesContext(connection) as ctx:
        client.get("/search/", {"q": q})
    return len(ctx.captured_queries)


@pytest.mark.parametrize("who", ["viewer", "root"])
def test_constant_queries_whatever_the_fleet_size(db, who):
    build_site("sa", nodes=2)
    viewer = UserFactory(username="viewer-a", is_staff=False)
    grant_scope(scope_obj=m.Site.objects.get(code="sa"), perms=["view_scope"], users=[viewer])
    user = viewer if who == "viewer" else UserFactory(username="root", is_superuser=True)
    probes = ("gpu", "SA16540", "0c:61:00:00:00:01", "0x616b4b0300000001", "10.2.97.1", "REP-1", "nothing-here")
    small = [_queries(user, q) for q in probes]
    build_site("sq", nodes=12)
    grant_scope(scope_obj=m.Site.objects.get(code="sq"), perms=["view_scope"], users=[viewer])
    assert [_queries(user, q) for q in probes] == small


def test_an_exact_match_opens_its_page_without_the_substring_pass(world):
    exact, partial = _queries(world["root"], "1654922001234"), _queries(world["root"], "16549220012")
    # The second pass (one query per kind) runs only when no single object is named exactly.
    assert exact < partial, (exact, partial)
    assert _get(world["root"], "1654922001234").status_code == 302


@pytest.mark.services
@pytest.mark.django_db
def test_postgresql_serves_exact_prefix_and_substring_lookups_from_the_search_indexes():
    """0007_search_indexes: the expressions Django's iexact / istartswith / icontains compare are the indexed
    ones (with sequential scans off, as on a large table where the planner avoids them)."""
    from django.db import connection as conn

    if conn.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite has no search indexes")
    cards = m.Accelerator.objects
    with conn.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    assert "cmdb_accelerator_serial_up" in cards.filter(serial__iexact="NV123").explain()
    assert "cmdb_accelerator_serial_up" in cards.filter(serial__istartswith="NV").explain()
    # Substrings: with plain index scans off too, so a full walk of the unique btree (a planner's choice on a tiny
    # table) cannot stand in for the trigram index.
    with conn.cursor() as cursor:
        cursor.execute("SET LOCAL enable_indexscan = off")
    assert "cmdb_accelerator_serial_tg" in cards.filter(serial__icontains="V12").explain()
    assert "cmdb_node_hostname_tg" in m.Node.objects.filter(hostname__icontains="gpu").explain()

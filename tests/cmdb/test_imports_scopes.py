"""CSV import checks every row against the actor's scopes, and changes only the columns the file carries."""

from __future__ import annotations

import pytest

from cmdb import models as m
from cmdb.permissions import grant_scope
from cmdb.services.imports import accelerators_import_csv, nodes_import_csv
from tests.factories.cmdb import (
    AcceleratorFactory,
    AcceleratorModelFactory,
    ClusterFactory,
    NodeFactory,
    RackFactory,
    ServerModelFactory,
    SiteFactory,
    TenantFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

HEADER = "hostname,serial,server_model,site\n"


@pytest.fixture
def world():
    site_a, site_b = SiteFactory(code="sa"), SiteFactory(code="sb")
    model = ServerModelFactory(name="HGX", u_height=8)
    tech = UserFactory(username="tech-a")
    grant_scope(scope_obj=site_a, perms=["change_scope"], users=[tech])
    b_node = NodeFactory(hostname="b-host", serial="BSER1", site=site_b, server_model=model)
    a_node = NodeFactory(hostname="a-host", serial="ASER1", site=site_a, server_model=model)
    return {"a": site_a, "b": site_b, "tech": tech, "b_node": b_node, "a_node": a_node}


def test_import_refuses_rewriting_moving_or_creating_outside_scopes(world):
    tech = world["tech"]
    text = HEADER + "b-renamed,BSER1,HGX,sa\nnew-in-b,NEW1,HGX,sb\na-host,ASER1,HGX,sb\n"
    result = nodes_import_csv(text, actor=tech)
    assert not result.ok
    by_row = {e.row: e for e in result.errors}
    assert by_row[1].field == "serial" and "outside your scopes" in by_row[1].message
    assert by_row[2].field == "site" and "create" in by_row[2].message
    assert by_row[3].field == "site" and "move" in by_row[3].message
    world["b_node"].refresh_from_db()
    world["a_node"].refresh_from_db()
    assert (world["b_node"].hostname, world["b_node"].site) == ("b-host", world["b"])
    assert world["a_node"].site == world["a"]
    assert not m.Node.objects.filter(serial="NEW1").exists()


def test_one_forbidden_row_writes_nothing_of_the_allowed_rows(world):
    text = HEADER + "a-renamed,ASER1,HGX,sa\nnew-in-b,NEW1,HGX,sb\n"
    result = nodes_import_csv(text, actor=world["tech"])
    assert [e.row for e in result.errors] == [2]
    world["a_node"].refresh_from_db()
    assert world["a_node"].hostname == "a-host"


def test_import_within_scope_is_allowed(world):
    result = nodes_import_csv(HEADER + "a-renamed,ASER1,HGX,sa\nnew-a,NEW2,HGX,sa\n", actor=world["tech"])
    assert result.ok, result.errors
    assert (result.created, result.updated) == (1, 1)


def test_card_import_refuses_other_sites_cards(world):
    AcceleratorModelFactory(name="H100-SXM5-80GB")
    AcceleratorFactory(serial="BCARD1", node=world["b_node"], slot_index=0)
    text = "serial,model,node,slot_index\nBCARD1,H100-SXM5-80GB,a-host,0\nNEWCARD,H100-SXM5-80GB,b-host,1\n"
    result = accelerators_import_csv(text, actor=world["tech"])
    assert {(e.row, e.field) for e in result.errors} == {(1, "serial"), (2, "node")}
    assert m.Accelerator.objects.get(serial="BCARD1").node == world["b_node"]
    assert not m.Accelerator.objects.filter(serial="NEWCARD").exists()


def test_partial_reimport_keeps_absent_columns_and_moves_the_cards():
    import datetime as dt

    site_a, site_b = SiteFactory(code="sa"), SiteFactory(code="sb")
    rack = RackFactory(name="r01", room__name="hall1", room__site=site_a)
    model = ServerModelFactory(name="HGX", u_height=8)
    cluster, tenant = ClusterFactory(name="train", site=site_a), TenantFactory(slug="acme")
    node = NodeFactory(
        serial="S1",
        hostname="gpu-1",
        site=site_a,
        rack=rack,
        position=1,
        server_model=model,
        cluster=cluster,
        tenant=tenant,
        bmc_address="10.0.0.9",
        purchase_date=dt.date(2025, 1, 2),
    )
    card = AcceleratorFactory(serial="C1", node=node, slot_index=0)
    result = nodes_import_csv("hostname,serial,server_model,site,status\ngpu-1b,S1,HGX,sa,maintenance\n")
    assert result.ok, result.errors
    node.refresh_from_db()
    assert (node.hostname, node.status) == ("gpu-1b", "maintenance")
    assert (node.rack, node.position, node.cluster, node.tenant) == (rack, 1, cluster, tenant)
    assert (node.bmc_address, node.purchase_date) == ("10.0.0.9", dt.date(2025, 1, 2))
    # Moving site: the rack column says where (blank: unracked), the cards follow with change records.
    result = nodes_import_csv("hostname,serial,server_model,site,rack,position,cluster\ngpu-1b,S1,HGX,sb,,,\n")
    assert result.ok, result.errors
    card.refresh_from_db()
    assert card.site == site_b
    moves = m.ChangeRecord.objects.filter(object_id=card.pk, content_type__model="accelerator", source="import")
    assert any("site" in r.changes or "site_id" in r.changes for r in moves)

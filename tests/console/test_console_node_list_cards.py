"""The node list's card column (count/healthy, counted per node for the page's rows): right for nodes with
none, some unhealthy and many cards, sortable both ways, and the page's row count ignores the cards."""

from __future__ import annotations

import csv
import io

import pytest

from cmdb.permissions import grant_scope
from tests.factories.cmdb import AcceleratorFactory, NodeFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


def _csv(client, query: str) -> list[list[str]]:
    response = client.get(f"/nodes/?cols=hostname,cards&format=csv&{query}")
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))[1:]


def test_card_counts_per_node_and_sort_by_cards(client):
    site, other = SiteFactory(code="sh1"), SiteFactory(code="bj2")
    _empty, some, many = (NodeFactory(site=site, hostname=f"sh1-n{i}") for i in range(3))
    AcceleratorFactory(node=some, slot_index=0, health="failed")
    AcceleratorFactory(node=some, slot_index=1, health="ok")
    for slot in range(4):
        AcceleratorFactory(node=many, slot_index=slot, health="ok")
    hidden = NodeFactory(site=other, hostname="bj2-n0")
    for slot in range(8):  # cards of a node out of scope count nowhere
        AcceleratorFactory(node=hidden, slot_index=slot, health="ok")
    user = UserFactory(username="viewer", is_staff=False)
    grant_scope(scope_obj=site, perms=["view_scope"], users=[user])
    client.force_login(user)
    assert _csv(client, "sort=hostname") == [["sh1-n0", ""], ["sh1-n1", "2/1"], ["sh1-n2", "4/4"]]
    assert [r[0] for r in _csv(client, "sort=-cards")] == ["sh1-n2", "sh1-n1", "sh1-n0"]
    assert [r[0] for r in _csv(client, "sort=cards")] == ["sh1-n0", "sh1-n1", "sh1-n2"]
    page = client.get("/nodes/?cols=hostname,cards&per_page=2").content.decode()
    assert "all 3 nodes" in page and "bj2-n0" not in page

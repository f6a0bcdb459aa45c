"""Asked about more nodes than an IN list should carry, the hold lookup reads every open hold and keeps the
asked-for nodes: the same holders as the narrow lookup, and none of the nodes not asked about."""

from __future__ import annotations

import pytest

from cmdb import models as m
from tests.console.test_console_dashboard import build_site
from workflows.services import holds


@pytest.mark.django_db
def test_wide_lookup_finds_the_same_holders_as_the_narrow_one(monkeypatch):
    build_site("sa", nodes=2)
    build_site("sb", nodes=2)
    every = list(m.Node.objects.values_list("pk", flat=True))
    site_a = list(m.Node.objects.filter(site__code="sa").values_list("pk", flat=True))
    narrow_all, narrow_a = holds.node_holders(every), holds.node_holders(site_a)
    assert narrow_all and narrow_a and set(narrow_a) < set(narrow_all)
    monkeypatch.setattr(holds, "IN_LIST_MAX", 0)
    assert holds.node_holders(every) == narrow_all
    assert holds.node_holders(site_a) == narrow_a

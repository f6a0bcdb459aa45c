"""The node page's topology panel: the reported matrix (devices x devices, GPU-NIC and CPU/NUMA affinity), the
departures from the server model's expected topology highlighted and explained, a link to the API, and a query
count that does not depend on the topology."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from cmdb.permissions import grant_scope
from cmdb.services.topology import node_topology_record, server_model_expected_topology_set, topology_canonical
from tests.console.objects_world import build_place, scoped_user
from tests.factories.topology import hgx_topology

pytestmark = pytest.mark.django_db

MOVED = {("GPU2", "GPU5"): "NV12", ("GPU1", "NIC1"): "SYS"}


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _report(node: m.Node, topology: dict) -> None:
    node_topology_record(node, topology_canonical(topology), None)


def _expect(node: m.Node, topology: dict) -> None:
    server_model_expected_topology_set(node.server_model, topology)


def _page(user, node: m.Node) -> str:
    response = _client(user).get(f"/nodes/{node.hostname}/")
    assert response.status_code == 200
    return response.content.decode()


def _matrix(page: str) -> str:
    return page.split('id="topology-matrix"', 1)[1].split("</table>", 1)[0]


def test_the_matrix_shows_every_pair_and_highlights_the_departures_with_what_was_expected():
    place = build_place("tp", cards=8, nics=2)
    _expect(place.node, hgx_topology())
    _report(place.node, hgx_topology(moved=MOVED))
    page = _page(scoped_user("viewer", place.site), place.node)
    matrix = _matrix(page)

    # 16 devices: a header cell each, and 16 x 16 cells.
    assert len(re.findall(r'<th class="dev t-(?:gpu|nic)"', matrix)) == 16
    assert len(re.findall(r"<td class=\"(?:k-|departs)", matrix)) == 16 * 16
    # Each departing pair is highlighted in both of its cells, with the expected kind beside the seen one.
    departing = re.findall(r'<td class="departs" title="([^"]+)">(\w+)<span class="was">exp (\w+)</span>', matrix)
    assert sorted(departing) == sorted(
        [("GPU2-GPU5: expected NV18, seen NV12", "NV12", "NV18")] * 2
        + [("GPU1-NIC1: expected PIX, seen SYS", "SYS", "PIX")] * 2
    )
    banner = page.split('id="topology-departures"', 1)[1].split("</div>", 1)[0]
    assert "2 pairs depart from the" in banner
    assert (
        '<span class="mono">GPU1-NIC1</span>: expected <span class="mono">PIX</span>, '
        'seen <span class="mono">SYS</span>' in banner
    )
    # GPU-NIC affinity: GPU0's nearest NIC, and GPU1's now that its own moved to SYS (none closer: all SYS).
    rows = {
        m_.group(1): m_.group(0)
        for m_ in re.finditer(r'<tr class="t-\w+[^"]*">\s*<th class="dev" title="(\w+)[^<]*<.*?</tr>', matrix, re.S)
    }
    assert 'mlx5_0 <span class="muted">PIX</span>' in rows["GPU0"]
    assert '<span class="muted" title="no NIC closer than SYS">all SYS</span>' in rows["GPU1"]
    assert '<td class="aff">0-51</td>' in rows["GPU0"] and '<td class="aff">52-103</td>' in rows["GPU7"]
    assert 'class="t-gpu row-departs"' in matrix  # the departing rows are marked
    assert f'href="/api/cmdb/nodes/{place.node.pk}/topology/"' in page


def test_a_matching_topology_a_model_without_expectation_and_no_topology_say_so():
    place = build_place("tq", cards=2, nics=2)
    viewer = scoped_user("viewer", place.site)
    page = _page(viewer, place.node)
    assert "No topology reported." in page and 'id="topology-api"' in page

    _report(place.node, hgx_topology(gpus=2, nics=2))
    page = _page(viewer, place.node)
    assert 'id="topology-no-expected"' in page and 'class="departs"' not in _matrix(page)

    _expect(place.node, hgx_topology(gpus=2, nics=2))
    page = _page(viewer, place.node)
    assert 'id="topology-matches"' in page and 'id="topology-departures"' not in page


def test_a_device_the_node_no_longer_reports_is_named():
    place = build_place("tr", cards=4, nics=2)
    _expect(place.node, hgx_topology(gpus=4, nics=2))
    _report(place.node, hgx_topology(gpus=3, nics=2))
    page = _page(scoped_user("viewer", place.site), place.node)
    banner = page.split('id="topology-departures"', 1)[1].split("</div>\n", 1)[0]
    assert 'GPU0-GPU3</span>: expected <span class="mono">NV18</span>, seen <span class="mono">no link' in banner
    assert 'Not reported at all: <span class="mono">GPU3</span>' in banner


def test_the_page_runs_the_same_queries_with_and_without_a_large_topology():
    plain = build_place("tplain", cards=8, nics=8)
    big = build_place("tbig", cards=8, nics=8)
    _expect(big.node, hgx_topology())
    _report(big.node, hgx_topology(moved=MOVED))
    user = scoped_user("viewer", plain.site)
    grant_scope(scope_obj=big.site, perms=["view_scope"], users=[user])
    client = _client(user)
    client.get(f"/nodes/{plain.node.hostname}/")  # warm the content-type and permission caches

    def count(node: m.Node) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/nodes/{node.hostname}/").status_code == 200
        return len(ctx.captured_queries)

    assert count(plain.node) == count(big.node)


def test_a_node_outside_the_users_scope_shows_no_topology():
    place, other = build_place("ts", cards=2, nics=2), build_place("tt", cards=2, nics=2)
    _report(other.node, hgx_topology(gpus=2, nics=2))
    client = _client(scoped_user("viewer", place.site))
    assert client.get(f"/nodes/{other.node.hostname}/").status_code == 404
    assert client.get(f"/api/cmdb/nodes/{other.node.pk}/topology/").status_code == 404


def test_nvlink_states_are_a_column_and_a_link_down_that_the_model_expects_up_departs():
    place = build_place("tn", cards=8, nics=2)
    _expect(place.node, hgx_topology(nics=2, nvlinks=18))
    _report(place.node, hgx_topology(nics=2, nvlinks=18, inactive=(("GPU3", 7),)))
    page = _page(scoped_user("viewer", place.site), place.node)
    matrix = _matrix(page)
    assert '<th class="aff" title="active NVLinks of all (nvidia-smi nvlink -s)">NVLinks</th>' in matrix
    assert matrix.count('<td class="aff">18/18</td>') == 7
    assert (
        '<td class="aff departs" title="the model expects link 7 active">17/18 <span class="muted">down 7</span></td>'
        in matrix
    )
    assert '<span class="mono">GPU3-NVLink7</span>: expected <span class="mono">active</span>' in page

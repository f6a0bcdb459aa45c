"""In a real browser (headless Chromium through Playwright), at 1440 px: the node page's topology matrix of an
8-GPU + 8-NIC node, with its NVLink states, fits its panel without scrolling, and the departing cells stand out."""

from __future__ import annotations

import pytest

from cmdb.services.topology import node_topology_record, server_model_expected_topology_set, topology_canonical
from tests.console.objects_world import build_place
from tests.factories.cmdb import UserFactory
from tests.factories.topology import hgx_topology

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_topology_matrix_is_readable_at_1440_px(browser, live_server, tmp_path):
    from playwright.sync_api import expect

    place = build_place("tb", cards=8, nics=8)
    server_model_expected_topology_set(place.node.server_model, hgx_topology(nvlinks=18))
    moved = hgx_topology(moved={("GPU2", "GPU5"): "NV12", ("GPU1", "NIC1"): "SYS"}, nvlinks=18, inactive=(("GPU3", 7),))
    node_topology_record(place.node, topology_canonical(moved), None)
    UserFactory(username="topo-browser", password="s3cret-pass", is_superuser=True)

    page = browser.new_page(viewport={"width": 1440, "height": 1200})
    page.goto(f"{live_server.url}/nodes/{place.node.hostname}/")
    page.fill("#id_username", "topo-browser")
    page.fill("#id_password", "s3cret-pass")
    page.get_by_role("button", name="Log in").click()
    matrix = page.locator("#topology-matrix")
    expect(matrix).to_be_visible()
    matrix.scroll_into_view_if_needed()
    page.locator("#topology").screenshot(path=str(tmp_path / "node-topology.png"))

    # The whole matrix, affinity columns included, is inside the panel: no horizontal scrolling.
    scroll = page.locator("#topology .topo-scroll")
    assert scroll.evaluate("e => e.scrollWidth <= e.clientWidth"), scroll.evaluate(
        "e => [e.scrollWidth, e.clientWidth]"
    )
    # Cells are wide enough to read a kind (NV18 at the table's font), and departures are coloured apart.
    cell = matrix.locator("tbody tr").nth(0).locator("td").nth(1)
    assert cell.inner_text() == "NV18" and cell.bounding_box()["width"] >= 28
    departing = matrix.locator("td.departs:not(.aff)")
    assert departing.count() == 4  # two pairs, each in both of its cells
    assert matrix.locator("td.aff.departs").inner_text() == "17/18 down 7"  # GPU3's NVLink 7
    plain_bg = cell.evaluate("e => getComputedStyle(e).backgroundColor")
    assert departing.first.evaluate("e => getComputedStyle(e).backgroundColor") != plain_bg
    print(f"screenshot: {tmp_path / 'node-topology.png'}")

"""In a real browser (headless Chromium through Playwright): log in, open a rack page, and check that each node is
drawn at its U position on its face - the rect's box on screen, not only its attributes."""

from __future__ import annotations

import pytest

from cmdb.permissions import grant_scope
from tests.factories.cmdb import (
    NodeFactory,
    RackFactory,
    RoomFactory,
    ServerModelFactory,
    SiteFactory,
    SwitchFactory,
    UserFactory,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_rack_elevation_in_the_browser(browser, live_server):
    from playwright.sync_api import expect

    site = SiteFactory(code="br-site")
    rack = RackFactory(room=RoomFactory(site=site, name="hall"), name="rk01", u_height=42)
    big, small = ServerModelFactory(name="8U-br", u_height=8), ServerModelFactory(name="1U-br", u_height=1)
    placed = {
        "br-gpu-01": (1, big, "front"),
        "br-gpu-02": (9, big, "front"),
        "br-cpu-01": (20, small, "front"),
        "br-rear-01": (5, small, "rear"),
    }
    for hostname, (position, model, face) in placed.items():
        NodeFactory(hostname=hostname, site=site, rack=rack, position=position, face=face, server_model=model)
    SwitchFactory(name="br-tor", site=site, rack=rack, position=42, u_height=1)
    user = UserFactory(username="rack-browser", password="s3cret-pass")
    grant_scope(scope_obj=site, perms=["view_scope"], users=[user])

    page = browser.new_page()
    page.goto(f"{live_server.url}/racks/{rack.pk}/")
    page.fill("#id_username", "rack-browser")
    page.fill("#id_password", "s3cret-pass")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Rack rk01")).to_be_visible()

    for face in ("front", "rear"):
        svg = page.locator(f'figure[data-face="{face}"] svg.rack-svg')
        # The U rows as the browser lays them out: U n's top edge and height, from the row's own rect.
        rows = {}
        for u in range(1, 43):
            box = svg.locator(f'g.u-row[data-u="{u}"] rect.u-slot').bounding_box()
            rows[u] = (box["y"], box["height"])
        assert all(rows[u][0] > rows[u + 1][0] for u in range(1, 42))  # U1 at the bottom
        devices = svg.locator("rect.device[data-hostname]")
        expected = {h: (pos, model.u_height) for h, (pos, model, f) in placed.items() if f == face}
        assert devices.count() == len(expected)
        for i in range(devices.count()):
            rect = devices.nth(i)
            hostname = rect.get_attribute("data-hostname")
            u, height = int(rect.get_attribute("data-u")), int(rect.get_attribute("data-height"))
            assert (u, height) == expected[hostname]
            box = rect.bounding_box()
            top_row_y = rows[u + height - 1][0]
            bottom_row_end = rows[u][0] + rows[u][1]
            # Drawn from the top of its highest U to the bottom of its lowest U (1 px inset each side).
            assert abs(box["y"] - top_row_y) <= 1.5, (hostname, box, top_row_y)
            assert abs(box["y"] + box["height"] - bottom_row_end) <= 1.5, (hostname, box, bottom_row_end)
    expect(page.locator('figure[data-face="front"] rect[data-switch="br-tor"]')).to_have_attribute("data-u", "42")
    # The node list links to the node pages.
    expect(page.locator('table.rack-nodes a[href="/nodes/br-gpu-02/"]')).to_have_text("br-gpu-02")

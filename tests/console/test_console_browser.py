"""The console in a real browser (headless Chromium through Playwright): a technician finds a card by its serial
from the top bar, walks to its node and on to the node's open repair ticket; and the dashboard's numbers, read
off the rendered page, are the ones the API summary gives the same logged-in session."""

# The workflow fixtures are imported into this module; their names are test parameters here too.
# ruff: noqa: F811

from __future__ import annotations

from collections import defaultdict

import pytest

from cmdb import models as m
from cmdb.permissions import grant_scope
from tests.console.objects_world import build_place
from tests.factories.cmdb import (
    AcceleratorFactory,
    AcceleratorModelFactory,
    NodeFactory,
    UserFactory,
    VendorFactory,
)
from tests.workflows.conftest import (  # noqa: F401  (fixtures)
    eager,
    fast_passwords,
    fleet,
    groups,
    notifier,
    scheduler,
)

PASSWORD = "s3cret-pass"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(page, base_url: str, path: str, username: str) -> None:
    page.goto(f"{base_url}{path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()


def test_search_a_card_serial_then_its_node_then_its_repair_ticket(
    browser, live_server, eager, scheduler, notifier, fleet, groups
):
    from playwright.sync_api import expect

    from tests.workflows.helpers import open_by_hook

    tech = UserFactory(username="tech-console", password=PASSWORD, is_staff=False)
    tech.groups.add(groups["dc-technicians"])
    grant_scope(scope_obj=fleet.site, perms=["change_scope"], users=[tech])
    ticket = open_by_hook(_Committing(), fleet)  # the repair the failed card's health signal opens
    card = fleet.failed

    page = browser.new_page()
    _log_in(page, live_server.url, "/", "tech-console")
    expect(page.get_by_role("heading", name="Fleet")).to_be_visible()

    # The top bar's box, as a person would use it: the serial, then Enter. One exact match: its page.
    box = page.get_by_role("searchbox", name="Search the inventory")
    box.fill(card.serial)
    box.press("Enter")
    expect(page).to_have_url(f"{live_server.url}/accelerators/{card.serial}/")
    expect(page.locator("h1")).to_contain_text(card.serial)

    page.locator(f'a[href="/nodes/{fleet.node.hostname}/"]').first.click()
    expect(page).to_have_url(f"{live_server.url}/nodes/{fleet.node.hostname}/")
    expect(page.locator("#cards")).to_contain_text(card.serial)
    tickets = page.locator("#tickets")
    expect(tickets).to_contain_text(ticket.reference)

    tickets.get_by_role("link", name=ticket.reference).click()
    expect(page).to_have_url(f"{live_server.url}{ticket.get_absolute_url()}")
    expect(page.locator("#state")).to_have_text("Diagnosing")
    linked = page.locator("section.panel", has=page.get_by_role("heading", name="Linked objects"))
    expect(linked).to_contain_text(card.serial)


def _figures(page) -> list[dict[str, str]]:
    """Every number the dashboard marks with data-figure, as the browser renders it."""
    return page.eval_on_selector_all(
        "[data-figure]",
        """els => els.map(e => ({figure: e.dataset.figure, key: e.dataset.key || "", site: e.dataset.site || "",
                                 text: e.innerText.trim()}))""",
    )


def test_the_dashboards_numbers_equal_the_api_summary(browser, live_server):
    here, elsewhere = build_place("here", cards=3), build_place("away", cards=5)
    amd = AcceleratorModelFactory(name="MI300X", vendor=VendorFactory(slug="amd"))
    spare_node = NodeFactory(hostname="here-node-2", site=here.site, status="maintenance")
    for i in range(4):
        AcceleratorFactory(serial=f"here-amd-{i}", model=amd, node=spare_node, slot_index=i, site=here.site)
    m.Accelerator.objects.filter(serial="here-amd-1").update(health="degraded")
    AcceleratorFactory(serial="away-amd-0", model=amd, node=elsewhere.node, slot_index=7, site=elsewhere.site)
    user = UserFactory(username="dash-viewer", password=PASSWORD, is_staff=False)
    grant_scope(scope_obj=here.site, perms=["view_scope"], users=[user])

    page = browser.new_page()
    _log_in(page, live_server.url, "/", "dash-viewer")
    from playwright.sync_api import expect

    expect(page.get_by_role("heading", name="Fleet")).to_be_visible()
    shown = _figures(page)
    summary = page.request.get(f"{live_server.url}/api/cmdb/summary/").json()  # the same session's cookies

    one = {f["figure"]: int(f["text"]) for f in shown if not f["key"]}
    keyed: dict[str, dict[str, int]] = defaultdict(dict)
    by_vendor: dict[str, int] = defaultdict(int)
    for f in shown:
        if f["figure"] == "accelerators.by_site_vendor":
            by_vendor[f["key"]] += int(f["text"])
        elif f["key"]:
            keyed[f["figure"]][f["key"]] = int(f["text"])
    cards, nodes = summary["accelerators"], summary["nodes"]
    assert one == {"accelerators.total": cards["total"], "nodes.total": nodes["total"]}
    assert keyed["accelerators.by_site"] == cards["by_site"] == {"here-site": 7}  # not a card of site B
    # The summary leaves out a health no card has; the dashboard shows it as 0.
    assert {k: v for k, v in keyed["accelerators.by_health"].items() if v} == cards["by_health"]
    assert cards["by_health"] == {"ok": 5, "failed": 1, "degraded": 1}
    assert dict(by_vendor) == cards["by_vendor"] == {"amd": 4, "nvidia": 3}
    assert keyed["nodes.by_status"] == nodes["by_status"] == {"maintenance": 2}  # as build_place leaves them


class _Committing:
    """Stands in for the `wf` harness where transactions really commit (callbacks run by themselves)."""

    def run(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

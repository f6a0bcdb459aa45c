"""The console's node and accelerator pages: what they show, to whom, the cordon action through the node
service (holds and rights refused with a message, never a 500), and a query count that does not grow with the
node's cards, NICs, events, tickets or history."""

# The workflow fixtures are imported into this module; their names are test parameters here too.
# ruff: noqa: F811

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from cmdb.permissions import grant_scope
from cmdb.services.accelerators import accelerator_place
from tests.console.objects_world import build_place, scoped_user
from tests.factories.cmdb import UserFactory
from tests.workflows.conftest import (  # noqa: F401  (fixtures)
    eager,
    fast_passwords,
    fleet,
    groups,
    notifier,
    scheduler,
    tech,
    wf,
)
from tests.workflows.helpers import open_by_hook

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def places(db):
    return build_place("alpha", cards=3, nics=2, events=2, changes=2), build_place("bravo")


def test_node_page_shows_the_node_its_cards_cabling_software_report_tickets_and_history(places):
    a, _ = places
    viewer = scoped_user("viewer-a", a.site)
    response = _client(viewer).get(f"/nodes/{a.node.hostname}/")
    assert response.status_code == 200
    html = response.content.decode()
    # facts
    for text in ("alpha-site", "alpha-rack", "U3", "alpha-nodeserial", "alpha-cluster", "HGX H100 8-GPU"):
        assert text in html, text
    # cards by slot with firmware and the last health event
    for card in a.cards:
        assert f"/accelerators/{card.serial}/" in html and card.firmware_version in html and card.uuid in html
    assert "XID 79" in html and "xid 70" in html
    # NICs, ports, the planned far end and what LLDP saw
    assert "mlx5_0" in html and "mlx5_1" in html and "alpha-p0-0" in html and "/switches/alpha-leaf/" in html
    assert "matches plan" in html and "not observed" in html
    # software, last agent report with its raw JSON, tickets, history as a diff
    assert "550.127.05" in html
    assert f'href="/api/agent/reports/{a.report.pk}/"' in html
    assert "alpha-repair-0" in html
    history = response.context["history"]
    assert [(line.field, line.before, line.after) for line in history[0].lines] == [("status", "maintenance", "active")]
    assert "/changes/?object=node%3Aalpha-node" in html
    # nothing of site B
    assert "bravo" not in html


def test_accelerator_page_shows_facts_placement_timeline_events_and_repair_tickets(places):
    a, _ = places
    card = a.cards[0]
    viewer = scoped_user("viewer-a", a.site)
    response = _client(viewer).get(f"/accelerators/{card.serial}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert card.uuid in html and "H100-SXM5-80GB" in html and "XID 79" in html
    placements = response.context["placements"]
    assert placements and placements[0].node_hostname == a.node.hostname and placements[0].ended_at is None
    assert f'href="/nodes/{a.node.hostname}/"' in html
    assert "alpha-repair-0" in html and "xid 70" in html
    assert "bravo" not in html


def test_a_card_moved_to_stock_shows_both_places_in_its_timeline(places):
    a, _ = places
    card = a.cards[1]
    accelerator_place(accelerator=card, kind="stock", stock_location=a.store, note="pulled for testing")
    response = _client(scoped_user("viewer-a", a.site)).get(f"/accelerators/{card.serial}/")
    kinds = [(p.kind, p.node_hostname, p.stock_location_id) for p in response.context["placements"]]
    assert kinds[0] == ("stock", "", a.store.pk) and kinds[1][:2] == ("node", a.node.hostname)
    assert "alpha-store" in response.content.decode()


@pytest.mark.parametrize("who", ["site_a", "nobody"])
def test_out_of_scope_node_and_card_are_404(places, who):
    a, b = places
    user = scoped_user("viewer-a", a.site) if who == "site_a" else UserFactory(username="nobody", is_staff=False)
    client = _client(user)
    for url in (f"/nodes/{b.node.hostname}/", f"/accelerators/{b.cards[0].serial}/", "/nodes/no-such-host/"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert "bravo-site" not in response.content.decode()
    response = client.post(f"/nodes/{b.node.hostname}/cordon/", {"reason": "hijack"})
    assert response.status_code == 404
    assert not m.Node.objects.get(pk=b.node.pk).is_cordoned


def test_anonymous_is_sent_to_log_in(places):
    a, _ = places
    response = Client().get(f"/nodes/{a.node.hostname}/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_cordon_and_uncordon_go_through_the_node_service_and_are_recorded(places):
    a, _ = places
    changer = scoped_user("changer-a", a.site, change=True)
    client = _client(changer)
    page = client.get(f"/nodes/{a.node.hostname}/").content.decode()
    assert 'id="cordon-form"' in page
    response = client.post(f"/nodes/{a.node.hostname}/cordon/", {"reason": "flaky NVLink, investigating"})
    assert response.status_code == 302
    node = m.Node.objects.get(pk=a.node.pk)
    assert node.is_cordoned and node.cordon_reason == "flaky NVLink, investigating"
    record = m.ChangeRecord.objects.filter(object_id=node.pk, content_type__model="node").first()
    assert record.actor_id == changer.pk and record.source == "ui" and record.changes["is_cordoned"] == [False, True]
    page = client.get(f"/nodes/{a.node.hostname}/").content.decode()
    assert "flaky NVLink, investigating" in page and 'id="uncordon-form"' in page
    assert client.post(f"/nodes/{a.node.hostname}/uncordon/").status_code == 302
    assert not m.Node.objects.get(pk=a.node.pk).is_cordoned


def test_cordon_without_a_reason_is_refused_on_the_page(places):
    a, _ = places
    client = _client(scoped_user("changer-a", a.site, change=True))
    response = client.post(f"/nodes/{a.node.hostname}/cordon/", {"reason": "  "})
    assert response.status_code == 400
    assert "A cordon needs a reason." in response.content.decode()
    assert not m.Node.objects.get(pk=a.node.pk).is_cordoned


def test_a_viewer_gets_no_cordon_button_and_a_post_is_refused(places):
    a, _ = places
    version = m.Node.objects.get(pk=a.node.pk).version
    client = _client(scoped_user("viewer-a", a.site))
    page = client.get(f"/nodes/{a.node.hostname}/").content.decode()
    assert 'id="cordon-form"' not in page and "/cordon/" not in page
    response = client.post(f"/nodes/{a.node.hostname}/cordon/", {"reason": "not mine to cordon"})
    assert response.status_code == 403
    assert f"You may not change node {a.node.hostname}." in response.content.decode()
    node = m.Node.objects.get(pk=a.node.pk)
    assert not node.is_cordoned and node.version == version


def test_a_get_on_the_cordon_url_changes_nothing(places):
    a, _ = places
    client = _client(scoped_user("changer-a", a.site, change=True))
    assert client.get(f"/nodes/{a.node.hostname}/cordon/").status_code == 405
    assert not m.Node.objects.get(pk=a.node.pk).is_cordoned


def test_uncordon_of_a_node_held_by_a_repair_shows_the_hold_and_changes_nothing(wf, fleet, tech):
    ticket = open_by_hook(wf, fleet)
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert node.is_cordoned and node.status == "maintenance"
    response = _client(tech).post(f"/nodes/{node.hostname}/uncordon/")
    assert response.status_code == 409
    html = response.content.decode()
    assert f"held by {ticket.reference}" in html and 'id="action-error"' in html
    after = m.Node.objects.get(pk=node.pk)
    assert after.is_cordoned and after.cordon_reason == node.cordon_reason and after.version == node.version
    # The page names the holder too.
    assert f"/tickets/{ticket.pk}/" in _client(tech).get(f"/nodes/{node.hostname}/").content.decode()


def test_repair_and_rollout_links_are_prefilled_and_shown_only_to_those_who_may_open_tickets(places, groups):
    a, _ = places
    viewer_page = _client(scoped_user("viewer-a", a.site)).get(f"/nodes/{a.node.hostname}/").content.decode()
    assert "/tickets/new/repair/" not in viewer_page and "/tickets/new/driver_rollout/" not in viewer_page
    technician = scoped_user("tech-a", a.site, change=True)
    technician.groups.add(groups["dc-technicians"])
    client = _client(technician)
    page = client.get(f"/nodes/{a.node.hostname}/").content.decode()
    assert f"/tickets/new/repair/?accelerator={a.cards[0].serial}" in page
    assert "/tickets/new/driver_rollout/?hostnames=alpha-node" in page
    form = client.get(f"/tickets/new/repair/?accelerator={a.cards[0].serial}&title=Repair")
    assert form.status_code == 200 and f'value="{a.cards[0].serial}"' in form.content.decode()


def _count(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_node_and_card_pages_run_the_same_queries_for_a_small_and_a_large_node(db):
    small = build_place("small", cards=2, nics=1, events=1, changes=1, tickets=1)
    large = build_place("large", cards=8, nics=4, events=30, changes=30, tickets=6)
    card = large.cards[1]
    for _ in range(4):  # a longer placement history (and history records) for one card
        accelerator_place(accelerator=card, kind="stock", stock_location=large.store)
        accelerator_place(accelerator=card, kind="node", node=large.node, slot_index=1)
    user = scoped_user("viewer", small.site)
    grant_scope(scope_obj=large.site, perms=["view_scope"], users=[user])
    client = _client(user)
    _count(client, f"/nodes/{small.node.hostname}/")  # warm the content-type and permission caches
    _count(client, f"/accelerators/{small.cards[0].serial}/")  # and the card page's own
    node_small = _count(client, f"/nodes/{small.node.hostname}/")
    node_large = _count(client, f"/nodes/{large.node.hostname}/")
    assert node_small == node_large, (node_small, node_large)
    card_small = _count(client, f"/accelerators/{small.cards[1].serial}/")
    card_large = _count(client, f"/accelerators/{large.cards[1].serial}/")
    assert card_small == card_large, (card_small, card_large)
    print(f"queries: node page {node_large}, accelerator page {card_large}")


def _card_rows(html: str) -> dict[str, str]:
    """The rows of the node page's accelerator table, by card serial."""
    section = html.split('id="cards"', 1)[1].split("</section>", 1)[0]
    rows = {}
    for row in section.split("<tr")[2:]:  # past the header row
        serial = row.split('href="/accelerators/', 1)[1].split("/", 1)[0]
        rows[serial] = row
    return rows


def test_each_card_shows_its_newest_health_event_in_a_fixed_number_of_queries(db):
    """24 events over 8 cards (event i on card i % 8, newer as i is smaller): each card's row names its newest
    event, whatever the number of cards and events; the page's queries do not grow with them."""
    small = build_place("one", cards=2, nics=1, events=0, changes=1, tickets=0)
    large = build_place("many", cards=8, nics=4, events=24, changes=30, tickets=3)
    client = _client(UserFactory(username="root-cards", is_superuser=True))
    _count(client, f"/nodes/{small.node.hostname}/")  # warm the content-type caches
    assert _count(client, f"/nodes/{small.node.hostname}/") == _count(client, f"/nodes/{large.node.hostname}/")
    rows = _card_rows(client.get(f"/nodes/{large.node.hostname}/").content.decode())
    assert len(rows) == 8
    for k in range(8):
        row = rows[f"many-card-{k:02d}"]
        assert f">xid {70 + k}</span>" in row, row
        assert f"xid {70 + k + 8}<" not in row and f"xid {70 + k + 16}<" not in row
    rows = _card_rows(client.get(f"/nodes/{small.node.hostname}/").content.decode())
    assert all('<span class="muted">none</span>' in row for row in rows.values())


def test_a_scoped_viewer_reads_their_grants_once_per_page(db):
    """The node and card pages of a site viewer cost what a superuser's cost plus a fixed few reads (the grants
    once, Django's model permissions, guardian's object check): not a read of the grants per list on the page
    (six queries per restricted list before the grants were read once)."""
    place = build_place("grants", cards=4, nics=2, events=3, changes=3, tickets=2)
    viewer = scoped_user("viewer", place.site)
    root = UserFactory(username="root-objects", is_superuser=True)
    for url in (f"/nodes/{place.node.hostname}/", f"/accelerators/{place.cards[0].serial}/"):
        _count(_client(root), url)  # warm the content-type caches
        as_root, as_viewer = _count(_client(root), url), _count(_client(viewer), url)
        assert as_viewer - as_root <= 7, (url, as_root, as_viewer)


def test_a_far_end_switch_outside_the_users_scope_is_not_named(places):
    a, b = places
    nic = m.Nic.objects.create(node=a.node, name="mlx5_9", kind="infiniband")
    port = m.NicPort.objects.create(nic=nic, name="1")
    far = m.SwitchPort.objects.create(switch=b.switch, name="bravo-p9")
    m.Link.objects.create(fabric=m.Fabric.objects.get(name="alpha-fabric"), a_nic_port=port, b_switch_port=far)
    html = _client(scoped_user("viewer-a", a.site)).get(f"/nodes/{a.node.hostname}/").content.decode()
    assert "mlx5_9" in html and "a switch outside your scope" in html
    assert "bravo" not in html


def test_the_node_page_says_when_a_rollout_on_it_ran_dry(places):
    from tests.factories.cmdb import DriverPackageFactory
    from workflows.rollouts.models import NodeRun, Rollout, RolloutWave

    a, b = places
    package = DriverPackageFactory()
    rollout = Rollout.objects.create(
        package=package, component=package.component, target_version=package.version, status="completed"
    )
    wave = RolloutWave.objects.create(rollout=rollout, index=0, kind="canary", status="completed")
    NodeRun.objects.create(
        rollout=rollout,
        wave=wave,
        node=a.node,
        hostname=a.node.hostname,
        previous_version="550.127.05",
        target_version=package.version,
        state="succeeded",
        is_dry_run=True,
    )
    client = _client(scoped_user("dry-viewer", a.site))
    html = client.get(f"/nodes/{a.node.hostname}/").content.decode()
    assert html.count('class="banner warn dry-run"') == 1
    assert f"dry run - nothing changed: {rollout.label} reported {package.component} {package.version} as done" in html
    assert "the node keeps 550.127.05" in html
    # A node with no dry run shows no such notice.
    client = _client(scoped_user("dry-viewer-b", b.site))
    assert "dry run - nothing changed" not in client.get(f"/nodes/{b.node.hostname}/").content.decode()

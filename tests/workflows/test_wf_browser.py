"""In a real browser (headless Chromium through Playwright): log in, open a repair ticket, take a transition,
and watch the page update itself (htmx polling) as the workflow moves on."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from cmdb import models as m
from tests.factories.cmdb import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_repair_ticket_in_the_browser(browser, live_server, eager, scheduler, notifier, fleet, groups, settings):
    from playwright.sync_api import expect

    from cmdb.permissions import grant_scope
    from tests.workflows.helpers import open_by_hook
    from workflows.runner import runs_wake_due

    settings.GPUOPS_WORKFLOWS = {"UI_POLL_SECONDS": 1, "UI_POLL_WAITING_SECONDS": 1}
    tech = UserFactory(username="tech-browser", password="s3cret-pass")
    tech.groups.add(groups["dc-technicians"])  # the role; the scope grant is where they work
    grant_scope(scope_obj=fleet.site, perms=["change_scope"], users=[tech])
    ticket = open_by_hook(_Committing(), fleet)  # transactional db: on-commit callbacks run for real

    page = browser.new_page()
    page.goto(f"{live_server.url}/tickets/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/tickets/")
    page.fill("#id_username", "tech-browser")
    page.fill("#id_password", "s3cret-pass")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Tickets")).to_be_visible()

    page.get_by_role("link", name=ticket.reference).click()
    expect(page.locator("#state")).to_have_text("Diagnosing")
    expect(page.locator("#timeline")).to_contain_text("Health signal: xid 79")

    page.locator("[data-transition=diagnose_reseat]").click()
    expect(page.locator(".messages")).to_contain_text("is now 'Verifying'")
    expect(page.locator("#timeline")).to_contain_text("Verdict: reseated: Diagnosing → Verifying")
    expect(page.locator("#steps")).to_contain_text("Verify the card")

    # The node's agent reports the reseated card healthy; the waker re-runs the verify step (what beat does).
    m.Accelerator.objects.filter(pk=fleet.failed.pk).update(
        health="ok", last_seen_at=timezone.now() + dt.timedelta(seconds=1)
    )
    from workflows.models import StepRun

    StepRun.objects.filter(status="waiting").update(wake_at=timezone.now())
    runs_wake_due()
    # No reload: the page polls its live part and shows the new state and timeline.
    expect(page.locator("#state")).to_have_text("Closed", timeout=45_000)
    expect(page.locator("#timeline")).to_contain_text("Card verified healthy")
    expect(page.locator("#timeline")).to_contain_text("back in service")


class _Committing:
    """Stands in for the `wf` harness where transactions really commit (callbacks run by themselves)."""

    def run(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

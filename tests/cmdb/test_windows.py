"""Maintenance windows as data: validation, description, and admin edits recorded in the change history."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from cmdb.models import ChangeRecord, MaintenanceWindow
from tests.factories.cmdb import ClusterFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_a_window_is_validated_before_it_is_saved():
    site, other = SiteFactory(code="w1", timezone="Asia/Shanghai"), SiteFactory(code="w2")
    window = MaintenanceWindow(site=site, cluster=ClusterFactory(site=other), kind="weekly", timezone="Mars/Olympus")
    with pytest.raises(ValidationError) as exc:
        window.full_clean()
    assert {"cluster", "timezone", "weekday", "start_time", "end_time"} <= set(exc.value.message_dict)
    freeze = MaintenanceWindow(
        site=site,
        kind="freeze",
        starts_at=dt.datetime(2026, 12, 2, tzinfo=dt.UTC),
        ends_at=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
    )
    with pytest.raises(ValidationError, match="after the start"):
        freeze.full_clean()
    weekly = MaintenanceWindow(site=site, kind="weekly", weekday=1, start_time=dt.time(2), end_time=dt.time(6))
    weekly.full_clean()
    assert weekly.describe() == "Tue 02:00-06:00 Asia/Shanghai"  # the site's zone when none is given


def test_admin_edits_are_recorded_in_the_change_history():
    site = SiteFactory(code="w3")
    root = UserFactory(username="w-root", is_superuser=True, is_staff=True)
    client = Client()
    client.force_login(root)
    response = client.post(
        "/admin/cmdb/maintenancewindow/add/",
        {
            "site": site.pk,
            "kind": "weekly",
            "name": "Tuesday night",
            "weekday": 1,
            "start_time": "02:00",
            "end_time": "06:00",
            "timezone": "Asia/Shanghai",
            "is_active": "on",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    window = MaintenanceWindow.objects.get(site=site)
    record = ChangeRecord.objects.get(object_id=window.pk, content_type__model="maintenancewindow")
    assert record.action == "create" and record.source == "admin" and record.actor == root

"""Progress of a rollout: the JSON document (API), the htmx fragment, ETA, constant query counts."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from cmdb import models as m
from tests.factories.cmdb import UserFactory
from workflows.rollouts.models import NodeRun
from workflows.rollouts.options import RolloutOptions
from workflows.rollouts.progress import rollout_progress
from workflows.rollouts.selectors import NodeSelector
from workflows.rollouts.services import rollout_create, rollout_prepare, rollout_start


@pytest.fixture
def rollout(demo_fleet, fakes):
    package = m.DriverPackage.objects.get(component="nvidia-driver", version="570.133.20")
    r = rollout_create(
        package=package,
        selector=NodeSelector(clusters=("sh1-train",)),
        options=RolloutOptions.from_dict(
            {"canary_size": 1, "wave_size": 4, "failure_budget": 0, "verify_timeout_minutes": 0}
        ),
    )
    r = rollout_prepare(rollout=r)
    first_wave_node = NodeRun.objects.filter(rollout=r, wave__index=1).order_by("position").first()
    fakes.executor.fail(host=first_wave_node.hostname, contains="570.133.20", stderr="E: dkms build failed")
    fakes.run(rollout_start, rollout=r)
    r.refresh_from_db()
    return r


@pytest.fixture
def lead(db):
    user = UserFactory(username="lead")
    user.user_permissions.add(
        Permission.objects.get(codename="view_rollout"), Permission.objects.get(codename="add_ticket")
    )
    return user


def test_progress_document_has_waves_nodes_failures_and_eta(rollout):
    p = rollout_progress(rollout)
    assert p["status"] == "paused" and "failure budget" in p["paused_reason"]
    assert [w["kind"] for w in p["waves"]][:2] == ["canary", "wave"]
    assert p["waves"][0]["succeeded"] == 1
    wave1 = p["waves"][1]
    assert wave1["failed"] == 1 and wave1["nodes"] is not None  # the running wave lists its nodes
    assert p["waves"][2]["nodes"] is None  # waves not moving give counts only
    failure = p["failures"][0]
    assert "dkms build failed" in failure["error"]
    assert any("rolling back" in line["message"] for line in failure["log"])
    assert p["eta"]["at"] is None  # paused: no ETA
    assert p["totals"]["nodes"] == 20


def test_eta_while_running_uses_what_happened_so_far(rollout):
    from workflows.rollouts.services import rollout_resume

    rollout_resume(rollout=rollout)  # no on-commit run: status running, nothing moved yet
    rollout.refresh_from_db()
    p = rollout_progress(rollout)
    assert p["eta"]["seconds_left"] is not None and p["eta"]["basis"].startswith("mean")


def test_progress_costs_the_same_queries_at_any_size(rollout, django_assert_max_num_queries):
    with django_assert_max_num_queries(12):
        rollout_progress(rollout)
    with django_assert_max_num_queries(12):
        rollout_progress(rollout, all_nodes=True)


def test_api_progress_and_list(client, rollout, lead):
    client.force_login(lead)
    listed = client.get("/api/rollouts/").json()
    assert [r["id"] for r in listed["results"]] == [rollout.pk]
    body = client.get(f"/api/rollouts/{rollout.pk}/progress/").json()
    assert body["status"] == "paused" and body["failures"]
    detail = client.get(f"/api/rollouts/{rollout.pk}/").json()
    assert detail["plan"]["node_count"] == 20


def test_api_hides_rollouts_from_people_without_access(client, rollout, db):
    client.force_login(UserFactory(username="nobody"))
    assert client.get("/api/rollouts/").json()["results"] == []
    assert client.get(f"/api/rollouts/{rollout.pk}/progress/").status_code == 404


def test_plan_preview_saves_nothing(client, demo_fleet, lead):
    from workflows.rollouts.models import Rollout

    client.force_login(lead)
    response = client.post(
        "/api/rollouts/plan-preview/",
        {
            "package": "nvidia-driver 570.133.20",
            "selector": {"clusters": ["sh1-train"], "hostnames": []},
            "options": {"canary_size": 2, "wave_size": 5},
            "hostnames": True,
        },
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["waves"][0]["kind"] == "canary" and len(body["waves"][0]["hostnames"]) == 2
    assert {r["code"] for r in body["refused"]} == {"health", "status"}
    assert not Rollout.objects.exists()
    bad = client.post(
        "/api/rollouts/plan-preview/",
        {"package": "nvidia-driver 1.0", "selector": {"clusters": ["x"]}},
        content_type="application/json",
    )
    assert bad.status_code == 400


def test_htmx_fragment_stops_polling_when_the_rollout_stops(client, rollout, lead):
    client.force_login(lead)
    page = client.get(f"/rollouts/{rollout.pk}/")
    assert page.status_code == 200 and b"Failures" in page.content
    fragment = client.get(f"/rollouts/{rollout.pk}/progress/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 286  # paused: htmx stops polling
    assert b"dkms build failed" in fragment.content

"""The jobs a failure touched: a repair ticket (and an incident) lists the jobs that ran on the node in the hours
before, from the node's scheduler, on the ticket page, its timeline and the postmortem."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from integrations.schedulers.base import SchedulerJob, SchedulerNode
from integrations.schedulers.demo import DemoScheduler
from integrations.schedulers.fake import _FakeNode
from integrations.schedulers.registry import override
from tests.workflows.helpers import open_by_hook, take
from workflows.engine import ticket_create
from workflows.models import StepRun, TimelineEntry
from workflows.services.job_impact import jobs_impact_read
from workflows.services.postmortems import postmortem_markdown, postmortem_report

pytestmark = pytest.mark.django_db

HOST = "sh9-h100-0001"


def job(
    job_id: str, start_h: float, end_h: float | None, *, state: str = "COMPLETED", user: str = "alice"
) -> SchedulerJob:
    """A job that started `start_h` hours ago and ended `end_h` hours ago (None: still running)."""
    now = timezone.now()
    return SchedulerJob(
        job_id=job_id,
        state=state,
        user=user,
        partition="gpu",
        name=f"train-{job_id}",
        nodes=(HOST,),
        start_at=now - dt.timedelta(hours=start_h),
        end_at=None if end_h is None else now - dt.timedelta(hours=end_h),
    )


def test_a_repair_lists_the_jobs_that_ran_on_the_node_before_the_failure(wf, fleet, tech, settings):
    settings.GPUOPS_WORKFLOWS = {"JOB_IMPACT_HOURS": 6}
    wf.scheduler.history[HOST] = [
        job("8812", 5, None, state="RUNNING"),  # running when the card failed
        job("8790", 10, 4, user="bob"),  # ended inside the window
        job("8700", 30, 20),  # ended before the window: not listed
    ]
    ticket = open_by_hook(wf, fleet)

    impact = ticket.data["jobs_impact"]
    assert [j["job_id"] for j in impact["jobs"]] == ["8812", "8790"]  # newest first
    assert impact["total"] == 2 and impact["node"] == HOST and impact["scheduler"] == "slurm"
    running = impact["jobs"][0]
    assert running["state"] == "RUNNING" and running["end_at"] is None and running["user"] == "alice"
    window = dt.datetime.fromisoformat(impact["window_end"]) - dt.datetime.fromisoformat(impact["window_start"])
    assert window == dt.timedelta(hours=6)
    assert wf.scheduler.calls["job_history"] == 1
    line = TimelineEntry.objects.get(ticket=ticket, message__contains="job(s) ran on")
    assert "2 job(s) ran on sh9-h100-0001 in the 6 h before: 8812 (alice), 8790 (bob)" in line.message

    client = Client()
    client.force_login(tech)
    page = client.get(f"/tickets/{ticket.pk}/").content.decode()
    assert 'id="jobs-impact"' in page and "train-8812" in page and "train-8790" in page and "train-8700" not in page


def test_the_jobs_are_read_once_however_often_the_drain_step_wakes(wf, fleet, settings):
    wf.scheduler.history[HOST] = [job("1", 2, None, state="RUNNING")]
    wf.scheduler.nodes[HOST] = _FakeNode(running=1)  # the drain waits for the running job
    ticket = open_by_hook(wf, fleet)
    assert ticket.state == "draining" and ticket.data["jobs_impact"]["total"] == 1
    wf.wake()
    wf.wake()
    assert wf.scheduler.calls["job_history"] == 1
    assert TimelineEntry.objects.filter(ticket=ticket, message__contains="job(s) ran on").count() == 1


def test_a_slurm_without_accounting_says_so_and_lists_the_jobs_running_now(wf, fleet):
    wf.scheduler.history_unavailable = "sacct: error: Slurm accounting storage is disabled"
    ticket = open_by_hook(wf, fleet)
    impact = ticket.data["jobs_impact"]
    assert impact["jobs"] == [] and impact["total"] == 0
    assert impact["note"].startswith("Job history unavailable:") and "accounting storage is disabled" in impact["note"]
    assert ticket.state == "diagnosing"  # the repair goes on


def test_a_scheduler_without_history_says_so(wf, fleet):
    from integrations.schedulers.noop import NoopScheduler

    node = fleet.node
    with override(NoopScheduler()):
        impact = jobs_impact_read(node, failed_at=timezone.now())
    assert impact["jobs"] == [] and "keeps no job history" in impact["note"]


def test_an_incident_lists_the_jobs_and_its_postmortem_names_them(wf, fleet, tech, lead):
    wf.scheduler.history[HOST] = [job("4242", 3, 1, state="FAILED", user="carol")]
    ticket = wf.run(
        ticket_create, type_="incident", title="NCCL hangs", requester=tech, inputs={"node": fleet.node.hostname}
    )
    ticket = take(wf, ticket, "start_work", lead)
    run = StepRun.objects.get(ticket=ticket, step="jobs_impact")
    assert run.status == "succeeded"
    assert [j["job_id"] for j in ticket.data["jobs_impact"]["jobs"]] == ["4242"]
    report = postmortem_report(ticket, lead)
    assert report.as_dict()["jobs"]["jobs"][0]["user"] == "carol"
    markdown = postmortem_markdown(report)
    assert "## Jobs on sh9-h100-0001 before the incident" in markdown and "| 4242 | FAILED | carol |" in markdown


def test_an_incident_without_a_node_lists_nothing(wf, tech, lead):
    ticket = wf.run(ticket_create, type_="incident", title="Badge reader broken", requester=tech)
    ticket = take(wf, ticket, "start_work", lead)
    assert "jobs_impact" not in ticket.data
    assert StepRun.objects.get(ticket=ticket, step="jobs_impact").status == "succeeded"


def test_the_demo_scheduler_makes_up_a_stable_history_and_says_so(fleet):
    demo = DemoScheduler()
    end = dt.datetime(2026, 12, 3, 10, tzinfo=dt.UTC)
    start = end - dt.timedelta(hours=24)
    target = SchedulerNode(name=HOST)
    jobs = demo.job_history(target, start_at=start, end_at=end)
    assert jobs == demo.job_history(target, start_at=start, end_at=end)
    assert 1 <= len(jobs) <= 6
    assert all(start <= j.start_at <= j.end_at <= end for j in jobs)
    with override(demo):
        impact = jobs_impact_read(fleet.node, failed_at=end)
    assert "made up" in impact["note"] and impact["total"] == len(jobs)

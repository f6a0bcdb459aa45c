"""The hook points adapters and ingestion expose, and the glue in workflows/glue/ that the workflows app
connects at start-up (docs/architecture.md)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser

from integrations.conf import integrations_setting
from integrations.procurement import hooks as procurement_hooks
from integrations.switches import cabling_tickets, host_lldp
from inventory_agents.signals import report_applied
from workflows import glue, registry
from workflows.definitions import TICKET_TYPES
from workflows.glue import cabling as cabling_glue
from workflows.glue import host_lldp as host_lldp_glue
from workflows.glue import procurement as procurement_glue


def _receivers() -> list[object]:
    return [entry[1]() for entry in report_applied.receivers]  # (lookup key, weak ref, ...) per receiver


def test_every_ticket_type_is_registered_from_the_one_list():
    assert [wf.type for wf in registry.workflows()] == sorted(wf.type for wf in TICKET_TYPES)
    assert {"repair", "decommission", "incident", "cabling", "driver_rollout", "provisioning", "procurement"} == {
        wf.type for wf in TICKET_TYPES
    }


def test_the_glue_is_connected_at_start_up():
    assert procurement_glue.on_request_changed in procurement_hooks._observers
    assert procurement_glue.tickets_resync in procurement_hooks._resyncs
    assert procurement_hooks._default == (
        procurement_glue.provisioning_ticket_open,
        procurement_glue.provisioning_available,
    )
    assert isinstance(cabling_tickets._desk, cabling_glue.CablingTicketDesk)
    assert host_lldp._latest_report_check is host_lldp_glue.report_is_latest
    assert host_lldp_glue.on_report_applied in _receivers()
    glue.register()  # again, as a second ready() would: nothing doubles
    assert procurement_hooks._observers.count(procurement_glue.on_request_changed) == 1
    assert _receivers().count(host_lldp_glue.on_report_applied) == 1


def test_without_a_ticket_desk_cabling_tickets_are_refused_and_pages_show_none(monkeypatch):
    monkeypatch.setattr(cabling_tickets, "_desk", None)
    with pytest.raises(cabling_tickets.CablingTicketsRefused, match="No ticket system"):
        cabling_tickets.cabling_tickets_open(object(), requester=None)  # type: ignore[arg-type]
    assert cabling_tickets.cabling_tickets_by_port() == {}
    assert not cabling_tickets.cabling_tickets_may_open(AnonymousUser())


def test_without_observers_a_request_change_registers_nothing(monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(procurement_hooks, "_observers", [])
    monkeypatch.setattr(procurement_hooks, "_resyncs", [])
    monkeypatch.setattr(procurement_hooks, "_default", None)

    class Request:
        pk = 1

    with django_capture_on_commit_callbacks() as callbacks:
        procurement_hooks.request_changed_on_commit(Request(), note="x")  # type: ignore[arg-type]
    assert callbacks == [] and procurement_hooks.requests_resync() == 0
    assert not procurement_hooks.provisioning_available()


@pytest.mark.django_db
def test_a_failing_observer_never_undoes_the_change(monkeypatch, django_capture_on_commit_callbacks):
    seen: list[procurement_hooks.RequestChanged] = []

    def boom(change: procurement_hooks.RequestChanged) -> None:
        raise RuntimeError("ticket engine down")

    monkeypatch.setattr(procurement_hooks, "_observers", [boom, seen.append])

    class Request:
        pk = 7

    with django_capture_on_commit_callbacks(execute=True):
        procurement_hooks.request_changed_on_commit(Request(), open_ticket=True)  # type: ignore[arg-type]
    assert seen == [procurement_hooks.RequestChanged(request_id=7, open_ticket=True)]


def test_adapter_settings_are_the_integrations_own_and_old_locations_still_count(settings):
    settings.GPUOPS_INTEGRATIONS = {}
    settings.GPUOPS_WORKFLOWS = {}
    settings.GPUOPS_ROLLOUTS = {}
    assert integrations_setting("SCHEDULERS") == {"default": "integrations.schedulers.noop.NoopScheduler"}
    settings.GPUOPS_WORKFLOWS = {"SCHEDULERS": {"slurm": "a.B"}}
    settings.GPUOPS_ROLLOUTS = {"EXECUTOR": "c.D"}
    assert (integrations_setting("SCHEDULERS"), integrations_setting("EXECUTOR")) == ({"slurm": "a.B"}, "c.D")
    settings.GPUOPS_INTEGRATIONS = {"SCHEDULERS": {"slurm": "e.F"}}
    assert integrations_setting("SCHEDULERS") == {"slurm": "e.F"}
    with pytest.raises(KeyError):
        integrations_setting("VERIFY_TIMEOUT_MINUTES")  # a workflows setting, not an adapter's

"""Table-driven: every declared transition, from its first source, with valid inputs, reaches its target.
The audit test fails when a workflow gains a transition this table does not exercise."""

from __future__ import annotations

from typing import Any

import pytest

from cmdb import models as m
from workflows.engine import ticket_create, transition_apply
from workflows.models import Ticket
from workflows.registry import workflow, workflows
from workflows.services.postmortems import postmortem_save

# (type, transition) -> (ticket data to preset, inputs)
CASES: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {
    ("repair", "start"): ({}, {}),
    ("repair", "drained"): ({}, {}),
    ("repair", "diagnose_replace"): ({}, {"note": "dead"}),
    ("repair", "diagnose_reseat"): ({}, {}),
    ("repair", "diagnose_false_alarm"): ({}, {"note": "test job"}),
    ("repair", "no_spare"): ({}, {}),
    ("repair", "spare_reserved"): ({}, {}),
    ("repair", "confirm_swap"): ({"spare_serial": "SP-1"}, {"old_serial": "1654SH900003", "new_serial": "SP-1"}),
    ("repair", "reserve_again"): ({}, {}),
    ("repair", "cmdb_updated"): ({}, {}),
    ("repair", "verified"): ({}, {}),
    ("repair", "verify_timed_out"): ({}, {}),
    ("repair", "reverify"): ({}, {}),
    ("repair", "force_resume"): ({}, {"note": "dcgmi diag passed"}),
    ("repair", "node_resumed"): ({}, {}),
    ("repair", "node_resumed_done"): ({}, {}),
    ("repair", "record_rma_shipment"): ({}, {"rma_vendor": "NVIDIA", "rma_number": "R1", "rma_tracking": "T1"}),
    ("repair", "receive_replacement"): ({}, {"replacement_serial": "NEW-1"}),
    ("repair", "replacement_stocked"): ({}, {}),
    ("repair", "cancel"): ({}, {"cancel_reason": "dup"}),
    ("decommission", "submit"): ({}, {}),
    ("decommission", "approve"): ({}, {}),
    ("decommission", "reject"): ({}, {}),
    ("decommission", "revise"): ({}, {}),
    ("decommission", "drained"): ({}, {}),
    ("decommission", "removed"): ({}, {}),
    ("decommission", "confirm_wipe"): ({}, {"wipe_method": "crypto_erase", "wipe_evidence": "log 1"}),
    ("decommission", "confirm_unrack"): ({}, {"card_disposition": "scrap"}),
    ("decommission", "finalized"): ({}, {}),
    ("decommission", "cancel"): ({}, {"cancel_reason": "x"}),
    ("incident", "start_work"): ({}, {}),
    ("incident", "wait"): ({}, {"wait_reason": "vendor"}),
    ("incident", "continue_work"): ({}, {}),
    ("incident", "resolve"): ({}, {"resolution": "fixed"}),
    ("incident", "reopen"): ({}, {"note": "back"}),
    ("incident", "close"): ({}, {}),
    ("incident", "cancel"): ({}, {"cancel_reason": "x"}),
}


# The ticket types of this issue; other apps register their own (driver_rollout, ...) and test them themselves.
OWN_TYPES = {"repair", "decommission", "incident"}


def test_every_declared_transition_has_a_case():
    declared = {(wf.type, t.name) for wf in workflows() if wf.type in OWN_TYPES for t in wf.transitions}
    assert declared == set(CASES), f"missing: {sorted(declared - set(CASES))}; stale: {sorted(set(CASES) - declared)}"


def _ticket(type_: str, fleet, lead) -> Ticket:
    inputs = {
        "repair": {"accelerator": fleet.failed.serial},
        "decommission": {"node": fleet.node.hostname},
        "incident": {},
    }[type_]
    return ticket_create(
        type_=type_, title=f"{type_} case", requester=lead, inputs=inputs, change_plan="plan", rollback_plan="rollback"
    )


@pytest.mark.django_db
@pytest.mark.parametrize(("type_", "name"), sorted(CASES))
def test_transition_reaches_its_target(type_, name, fleet, lead, django_capture_on_commit_callbacks):
    wf = workflow(type_)
    t = wf.transition(name)
    preset, inputs = CASES[(type_, name)]
    with django_capture_on_commit_callbacks(execute=False):  # steps are not run here, only the graph
        ticket = _ticket(type_, fleet, lead)
        source = sorted(t.sources)[0]
        if (type_, name) == ("repair", "confirm_swap"):
            preset = {**preset, "reservation_id": fleet.reservation_for(ticket).pk}
        if (type_, name) == ("incident", "close"):  # closing needs the postmortem
            postmortem_save(ticket=ticket, actor=lead, data={"summary": "what happened", "root_cause": "unknown"})
        Ticket.objects.filter(pk=ticket.pk).update(state=source, data={**ticket.data, **preset})
        ticket.refresh_from_db()
        result = transition_apply(
            ticket=ticket, name=name, actor=None if t.is_system else lead, data=inputs, system=t.is_system
        )
    assert result.ticket.state == t.target
    assert result.log.source == source and result.log.target == t.target
    assert [r.step for r in result.runs] == ([t.step] if t.step else [])
    assert result.ticket.is_open == (t.target not in wf.terminal)
    assert m.ChangeRecord.objects.filter(correlation_id=ticket.correlation_id).count() == 0  # no step ran

"""Requests: the approval chain chosen by amount (rules are data), votes, and placing the PO on approval."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from integrations.exceptions import PermanentError, TransientError
from integrations.procurement.fakes import FakeProcurementClient
from integrations.procurement.models import ApprovalRule, RequestState
from integrations.procurement.services import requests as svc
from integrations.procurement.services.orders import order_place
from tests.factories.cmdb import UserFactory
from tests.integrations.procurement.procurement_helpers import request_make

pytestmark = pytest.mark.django_db


def test_small_request_needs_one_level_and_is_ordered_on_the_last_vote(
    site, approvers, django_capture_on_commit_callbacks
):
    req = request_make(site=site, requester=approvers["requester"])  # 2 x 10k + 3 x 25k = 95,000
    assert req.total_amount == Decimal("95000")
    req = svc.request_submit(request=req)
    assert req.state == RequestState.SUBMITTED and [lv["name"] for lv in req.approval_chain] == ["ops lead"]
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        req = svc.request_approve(request=req, approver=approvers["lead"], comment="ok")
    assert any("place_order" in repr(cb) for cb in callbacks)  # enqueued only on commit
    req.refresh_from_db()
    assert req.state == RequestState.ORDERED and req.po_number == "PO-1001" and req.po_state == "created"
    assert req.po_idempotency_key == f"gpuops-{req.reference}-r1"
    assert FakeProcurementClient.calls == [("order_create", req.po_idempotency_key)]
    assert [line.po_line_ref for line in req.lines.all()] == ["PO-1001-1", "PO-1001-2"]
    assert all(line.po_state == "created" for line in req.lines.all())


def test_large_request_needs_every_level_and_one_person_satisfies_one_level_only(site, approvers):
    both = UserFactory(username="both")
    both.groups.add(approvers["ops"], approvers["finance"])
    req = svc.request_submit(request=request_make(site=site, requester=approvers["requester"], cards=8))
    assert [lv["name"] for lv in req.approval_chain] == ["ops lead", "finance"]  # 220,000
    req = svc.request_approve(request=req, approver=both)
    assert req.state == RequestState.SUBMITTED
    progress = svc.approval_progress(req)
    assert [(p.name, p.approvers) for p in progress] == [("ops lead", ("both",)), ("finance", ())]
    assert svc.request_approve(request=req, approver=both).state == RequestState.SUBMITTED  # a second vote: no-op
    req = svc.request_approve(request=req, approver=approvers["cfo"])
    assert req.state == RequestState.APPROVED


def test_rules_are_data_changing_a_threshold_changes_the_chain(site, approvers):
    ApprovalRule.objects.filter(name="finance").update(min_amount=Decimal("50000"))
    req = svc.request_submit(request=request_make(site=site, requester=approvers["requester"]))
    assert [lv["name"] for lv in req.approval_chain] == ["ops lead", "finance"]


@pytest.mark.parametrize(
    ("who", "message"),
    [("requester", "cannot approve their own"), ("outsider", "is not in the group")],
)
def test_votes_that_do_not_count_are_refused(site, approvers, who, message):
    approvers["requester"].groups.add(approvers["ops"])
    voter = approvers["requester"] if who == "requester" else UserFactory(username="outsider")
    req = svc.request_submit(request=request_make(site=site, requester=approvers["requester"]))
    with pytest.raises(ValidationError, match=message):
        svc.request_approve(request=req, approver=voter)


def test_no_rule_covering_the_amount_refuses_to_submit(site, approvers):
    ApprovalRule.objects.all().delete()
    req = request_make(site=site, requester=approvers["requester"])
    with pytest.raises(ValidationError, match=r"No approval rule covers 95,000\.00 USD"):
        svc.request_submit(request=req)


def test_reject_closes_the_request(site, approvers):
    req = svc.request_submit(request=request_make(site=site, requester=approvers["requester"]))
    with pytest.raises(ValidationError):
        svc.request_reject(request=req, approver=approvers["lead"], comment="")
    req = svc.request_reject(request=req, approver=approvers["lead"], comment="no budget")
    assert req.state == RequestState.REJECTED and not req.is_open


def test_a_line_names_exactly_one_item(site):
    with pytest.raises(ValidationError, match="exactly one"):
        svc.request_create(title="t", justification="j", budget_code="b", lines=[svc.LineInput(quantity=1, site=site)])


def test_placing_the_po_is_idempotent_and_keeps_errors_on_the_request(site, approvers):
    req = svc.request_submit(request=request_make(site=site, requester=approvers["requester"]))
    req = svc.request_approve(request=req, approver=approvers["lead"])  # on-commit task not run here
    FakeProcurementClient.fail_next(TransientError("procurement timed out"))
    with pytest.raises(TransientError):
        order_place(request_id=req.pk)
    req.refresh_from_db()
    assert req.po_number == "" and "timed out" in req.po_error and req.po_attempts == 1
    # The Celery retry: same key, one PO.
    req = order_place(request_id=req.pk)
    assert req.po_number == "PO-1001" and req.po_error == ""
    assert order_place(request_id=req.pk).po_number == "PO-1001"  # a duplicate task changes nothing
    assert len(FakeProcurementClient.orders()) == 1
    assert {key for _, key in FakeProcurementClient.calls} == {req.po_idempotency_key}


def test_a_refused_order_is_a_permanent_error_on_the_request(site, approvers):
    req = svc.request_approve(
        request=svc.request_submit(request=request_make(site=site, requester=approvers["requester"])),
        approver=approvers["lead"],
    )
    FakeProcurementClient.fail_next(PermanentError("budget code CAPEX-26 closed"))
    with pytest.raises(PermanentError):
        order_place(request_id=req.pk)
    req.refresh_from_db()
    assert req.state == RequestState.APPROVED and "CAPEX-26 closed" in req.po_error


def test_cancel_only_before_the_po(site, approvers, approved_request):
    with pytest.raises(ValidationError, match="cancel the PO"):
        svc.request_cancel(request=approved_request, actor=None, reason="changed our mind")
    draft = request_make(site=site, requester=approvers["requester"])
    assert svc.request_cancel(request=draft, actor=None, reason="dup").state == RequestState.CANCELLED

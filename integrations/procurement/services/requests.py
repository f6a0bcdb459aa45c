"""Procurement requests: create, submit into the approval chain, vote, cancel, and minimum-stock refills.

Each public function is a transaction boundary: it locks the request row (select_for_update), checks the
state, writes, and registers side effects on commit (placing the PO is a Celery task enqueued only after the
approval that completes the chain is committed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from cmdb.models import AcceleratorModel, PartModel, ServerModel, Site

from ..conf import procurement_setting
from ..models import (
    EDITABLE_REQUEST_STATES,
    ApprovalRule,
    ApprovalVote,
    ProcurementRequest,
    RequestApproval,
    RequestLine,
    RequestState,
)
from ..tickets import ticket_sync_on_commit


@dataclass(frozen=True)
class LineInput:
    """One line to create: exactly one of the three models, a positive quantity, a site, an estimated price."""

    quantity: int
    site: Site
    server_model: ServerModel | None = None
    accelerator_model: AcceleratorModel | None = None
    part_model: PartModel | None = None
    unit_price: Decimal | None = None


@dataclass(frozen=True)
class LevelProgress:
    """How far one level of the chain is: who approved it and how many more are needed."""

    rule_id: int
    name: str
    level: int
    group_id: int
    required: int
    approvers: tuple[str, ...]

    @property
    def is_satisfied(self) -> bool:
        return len(self.approvers) >= self.required


def _note(request: ProcurementRequest, text: str) -> None:
    stamp = timezone.now().strftime("%Y-%m-%d %H:%M")
    request.notes = f"{request.notes}\n{stamp} {text}".strip()


def unit_price_estimate(
    *,
    server_model: ServerModel | None = None,
    accelerator_model: AcceleratorModel | None = None,
    part_model: PartModel | None = None,
) -> Decimal:
    """The unit price of the last priced line for the same item, else a card's price in the cost model
    (`AcceleratorModel.unit_price`), else 0 (a selector)."""
    line = (
        RequestLine.objects.filter(
            server_model=server_model, accelerator_model=accelerator_model, part_model=part_model, unit_price__gt=0
        )
        .order_by("-id")
        .only("unit_price")
        .first()
    )
    if line is not None:
        return line.unit_price
    if accelerator_model is not None and accelerator_model.unit_price:
        return accelerator_model.unit_price
    return Decimal("0")


def _line_build(request: ProcurementRequest, line_no: int, spec: LineInput) -> RequestLine:
    price = spec.unit_price
    if price is None:
        price = unit_price_estimate(
            server_model=spec.server_model, accelerator_model=spec.accelerator_model, part_model=spec.part_model
        )
    line = RequestLine(
        request=request,
        line_no=line_no,
        server_model=spec.server_model,
        accelerator_model=spec.accelerator_model,
        part_model=spec.part_model,
        quantity=spec.quantity,
        site=spec.site,
        unit_price=price,
    )
    if spec.quantity < 1:
        raise ValidationError({"quantity": f"Line {line_no}: the quantity must be at least 1."})
    line.clean()
    return line


@transaction.atomic
def request_create(
    *,
    title: str,
    justification: str,
    budget_code: str,
    lines: Sequence[LineInput],
    requested_by: AbstractBaseUser | None = None,
    dedup_key: str = "",
) -> ProcurementRequest:
    """Create a draft request with its lines.

    Raises:
        ValidationError: no lines, a line naming zero or several items, a quantity below 1, empty fields.
    """
    errors: dict[str, str] = {}
    if not title.strip():
        errors["title"] = "A title is needed."
    if not justification.strip():
        errors["justification"] = "Say why this is needed."
    if not budget_code.strip():
        errors["budget_code"] = "A budget code is needed."
    if not lines:
        errors["lines"] = "Add at least one line."
    if errors:
        raise ValidationError(errors)
    request = ProcurementRequest.objects.create(
        title=title.strip()[:200],
        justification=justification.strip(),
        budget_code=budget_code.strip(),
        currency=procurement_setting("CURRENCY"),
        requested_by=requested_by if _is_user(requested_by) else None,
        dedup_key=dedup_key,
    )
    RequestLine.objects.bulk_create([_line_build(request, i, spec) for i, spec in enumerate(lines, start=1)])
    return request


def _is_user(user: Any) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


def approval_rules_for(amount: Decimal) -> list[ApprovalRule]:
    """The active rules whose range covers `amount`, in chain order (a selector)."""
    rules = ApprovalRule.objects.filter(is_active=True).select_related("group").order_by("level", "min_amount", "id")
    return [rule for rule in rules if rule.covers(amount)]


def approval_progress(request: ProcurementRequest) -> list[LevelProgress]:
    """Per level of the request's chain (current round): the approvers so far and the number required."""
    # Through the related manager so a prefetched list (the API's) costs no query per request.
    votes = sorted(
        (
            v
            for v in request.approvals.all()
            if v.round == request.approval_round and v.decision == ApprovalVote.APPROVED
        ),
        key=lambda v: (v.at, v.pk),
    )
    return [
        LevelProgress(
            rule_id=level["rule"],
            name=level["name"],
            level=level["level"],
            group_id=level["group"],
            required=level["required"],
            approvers=tuple(v.approver_repr for v in votes if v.rule_id == level["rule"]),
        )
        for level in request.approval_chain
    ]


def _locked(request: ProcurementRequest) -> ProcurementRequest:
    return ProcurementRequest.objects.select_for_update().get(pk=request.pk)


@transaction.atomic
def request_submit(*, request: ProcurementRequest, actor: AbstractBaseUser | None = None) -> ProcurementRequest:
    """Send a draft into approval: fix the chain from the amount, open a new round (older votes lapse).

    Raises:
        ValidationError: not a draft, no lines, or no approval rule covers the amount.
    """
    req = _locked(request)
    if req.state not in (RequestState.DRAFT, RequestState.SUBMITTED):
        raise ValidationError({"state": f"{req.reference} is {req.get_state_display()}; only a draft is submitted."})
    lines = list(req.lines.all())
    if not lines:
        raise ValidationError({"lines": "Add at least one line before submitting."})
    amount = sum((line.amount for line in lines), Decimal("0"))
    rules = approval_rules_for(amount)
    if not rules:
        raise ValidationError(
            {
                "amount": f"No approval rule covers {amount:,.2f} {req.currency}; "
                "an administrator adds one (Procurement > Approval rules)."
            }
        )
    req.approval_chain = [
        {"rule": r.pk, "name": r.name, "level": r.level, "group": r.group_id, "required": r.approvers_required}
        for r in rules
    ]
    req.approval_round += 1
    req.state = RequestState.SUBMITTED
    req.submitted_at = timezone.now()
    req.save()
    chain = ", ".join(f"{lv['name']} ({lv['required']})" for lv in req.approval_chain)
    ticket_sync_on_commit(
        req,
        open_ticket=True,
        note=f"{req.reference} submitted (round {req.approval_round}) for {amount:,.2f} "
        f"{req.currency}; approval chain: {chain}",
    )
    return req


def _qualifying_level(req: ProcurementRequest, approver: AbstractBaseUser) -> dict[str, Any] | None:
    """The lowest unsatisfied level of the chain whose group the approver belongs to."""
    group_ids = set(approver.groups.values_list("id", flat=True))
    done = {p.rule_id for p in approval_progress(req) if p.is_satisfied}
    for level in sorted(req.approval_chain, key=lambda lv: (lv["level"], lv["rule"])):
        if level["rule"] not in done and level["group"] in group_ids:
            return level
    return None


def _snapshot(req: ProcurementRequest) -> dict[str, Any]:
    return {
        "amount": str(req.total_amount),
        "currency": req.currency,
        "budget_code": req.budget_code,
        "lines": [
            {
                "line_ref": line.line_ref,
                "item": str(line.item),
                "quantity": line.quantity,
                "site": line.site_id,
                "unit_price": str(line.unit_price),
            }
            for line in req.lines.select_related("server_model", "accelerator_model", "part_model")
        ],
    }


@transaction.atomic
def request_approve(
    *, request: ProcurementRequest, approver: AbstractBaseUser, comment: str = ""
) -> ProcurementRequest:
    """Record an approval; when every level of the chain is satisfied the request is approved and the PO is
    placed (task `integrations.procurement.place_order`, enqueued on commit).

    A vote counts for the lowest unsatisfied level whose group the approver is in, so one person never
    satisfies two levels. Voting again in the same round is a no-op.
    Raises:
        ValidationError: not waiting for approval, the approver is the requester, or is in no open level's group.
    """
    req = _locked(request)
    if req.state != RequestState.SUBMITTED:
        raise ValidationError({"state": f"{req.reference} is {req.get_state_display()}, not waiting for approval."})
    if RequestApproval.objects.filter(request=req, round=req.approval_round, approver=approver).exists():
        return req
    if req.requested_by_id is not None and req.requested_by_id == approver.pk:
        raise ValidationError({"approver": "A requester cannot approve their own request."})
    level = _qualifying_level(req, approver)
    if level is None:
        raise ValidationError(
            {"approver": f"{approver} is not in the group of any level still open on {req.reference}."}
        )
    RequestApproval.objects.create(
        request=req,
        round=req.approval_round,
        rule_id=level["rule"],
        approver=approver,
        approver_repr=str(approver)[:150],
        decision=ApprovalVote.APPROVED,
        comment=comment,
        snapshot=_snapshot(req),
        at=timezone.now(),
    )
    done = sum(1 for p in approval_progress(req) if p.is_satisfied)
    said = f": {comment}" if comment else ""
    ticket_sync_on_commit(
        req,
        note=f"{approver} approved {req.reference} for level '{level['name']}' "
        f"({done}/{len(req.approval_chain)} levels done){said}",
    )
    if all(p.is_satisfied for p in approval_progress(req)):
        req.state = RequestState.APPROVED
        req.approved_at = timezone.now()
        # One key per approval: every attempt to place this PO (task retries included) sends it.
        req.po_idempotency_key = f"gpuops-{req.reference}-r{req.approval_round}"
        req.save()
        from ..tasks import place_order  # the tasks module imports services; import here to avoid a cycle

        place_order.apply_async_on_commit(args=[req.pk])
    return req


@transaction.atomic
def request_reject(*, request: ProcurementRequest, approver: AbstractBaseUser, comment: str) -> ProcurementRequest:
    """Reject the request (one rejection by an approver of any open level is final for the round)."""
    req = _locked(request)
    if req.state != RequestState.SUBMITTED:
        raise ValidationError({"state": f"{req.reference} is {req.get_state_display()}, not waiting for approval."})
    if not comment.strip():
        raise ValidationError({"comment": "Say why it is rejected."})
    if _qualifying_level(req, approver) is None:
        raise ValidationError({"approver": f"{approver} is not an approver of {req.reference}."})
    RequestApproval.objects.update_or_create(
        request=req,
        round=req.approval_round,
        approver=approver,
        defaults={
            "approver_repr": str(approver)[:150],
            "decision": ApprovalVote.REJECTED,
            "comment": comment,
            "snapshot": _snapshot(req),
            "at": timezone.now(),
        },
    )
    req.state, req.is_open, req.decided_at = RequestState.REJECTED, False, timezone.now()
    req.save()
    ticket_sync_on_commit(req, note=f"{approver} rejected {req.reference}: {comment}")
    return req


@transaction.atomic
def request_revise(*, request: ProcurementRequest, actor: AbstractBaseUser | None = None) -> ProcurementRequest:
    """Reopen a rejected request as a draft (its lines can be edited again, then it is resubmitted)."""
    req = _locked(request)
    if req.state != RequestState.REJECTED:
        raise ValidationError({"state": f"{req.reference} is {req.get_state_display()}, not rejected."})
    if req.dedup_key and ProcurementRequest.objects.filter(dedup_key=req.dedup_key, is_open=True).exists():
        raise ValidationError({"state": f"Another open request refills the same stock ({req.dedup_key})."})
    req.state, req.is_open, req.decided_at = RequestState.DRAFT, True, None
    _note(req, f"reopened as a draft by {actor or 'gpuops'}")
    req.save()
    ticket_sync_on_commit(req)
    return req


@transaction.atomic
def request_cancel(*, request: ProcurementRequest, actor: AbstractBaseUser | None, reason: str) -> ProcurementRequest:
    """Cancel a request before its PO exists. After that, cancellation is the procurement system's
    (`po.cancelled`), because gpuops cannot unilaterally withdraw an order a supplier may be filling."""
    req = _locked(request)
    if req.state not in (RequestState.DRAFT, RequestState.SUBMITTED, RequestState.APPROVED) or req.po_number:
        raise ValidationError(
            {
                "state": f"{req.reference} is {req.get_state_display()}; once ordered, cancel the PO "
                "in the procurement system."
            }
        )
    req.state, req.is_open, req.decided_at = RequestState.CANCELLED, False, timezone.now()
    _note(req, f"cancelled by {actor or 'gpuops'}: {reason}")
    req.save()
    ticket_sync_on_commit(req)
    return req


@dataclass(frozen=True)
class RefillOutcome:
    request: ProcurementRequest
    created: bool
    changed: bool


def refill_dedup_key(*, site: Site, accelerator_model: AcceleratorModel | None, part_model: PartModel | None) -> str:
    if accelerator_model is not None:
        return f"minstock:{site.pk}:accelerator_model:{accelerator_model.pk}"
    assert part_model is not None
    return f"minstock:{site.pk}:part_model:{part_model.pk}"


def refill_request_upsert(
    *,
    site: Site,
    quantity: int,
    reason: str,
    budget_code: str,
    accelerator_model: AcceleratorModel | None = None,
    part_model: PartModel | None = None,
) -> RefillOutcome:
    """Open, or update, the one open refill request for (site, model): never one request per event.

    A new request is created and submitted at once (it still needs its approvals). An open one still being
    decided gets the new quantity; if that changes the amount approvers already voted on, a new round starts
    (their votes lapse). One already approved or ordered is left as it is, with a note.
    Concurrent callers: the partial unique constraint on `dedup_key` lets one create; the other updates.
    """
    if (accelerator_model is None) == (part_model is None):
        raise ValueError("Pass exactly one of accelerator_model and part_model.")
    key = refill_dedup_key(site=site, accelerator_model=accelerator_model, part_model=part_model)
    for _ in range(2):
        try:
            with transaction.atomic():
                return _refill_upsert_once(
                    site=site,
                    quantity=quantity,
                    reason=reason,
                    budget_code=budget_code,
                    accelerator_model=accelerator_model,
                    part_model=part_model,
                    key=key,
                )
        except IntegrityError:
            continue  # another worker opened it between our read and our insert: update theirs
    raise RuntimeError(f"could not open or update the refill request {key}")


def _refill_upsert_once(
    *,
    site: Site,
    quantity: int,
    reason: str,
    budget_code: str,
    accelerator_model: AcceleratorModel | None,
    part_model: PartModel | None,
    key: str,
) -> RefillOutcome:
    now = timezone.now()
    existing = ProcurementRequest.objects.select_for_update().filter(dedup_key=key, is_open=True).first()
    if existing is None:
        item = accelerator_model or part_model
        req = request_create(
            title=f"Refill {item} at {site.code}",
            justification=reason,
            budget_code=budget_code,
            dedup_key=key,
            lines=[LineInput(quantity=quantity, site=site, accelerator_model=accelerator_model, part_model=part_model)],
        )
        req.trigger_count, req.last_triggered_at = 1, now
        req.save(update_fields=["trigger_count", "last_triggered_at", "updated_at"])
        return RefillOutcome(request=request_submit(request=req), created=True, changed=True)
    existing.trigger_count += 1
    existing.last_triggered_at = now
    changed = False
    line = existing.lines.first()
    if existing.state in EDITABLE_REQUEST_STATES and line is not None and line.quantity != quantity:
        _note(existing, f"refill quantity {line.quantity} -> {quantity}: {reason}")
        line.quantity = quantity
        line.save(update_fields=["quantity"])
        changed = True
    elif existing.state not in EDITABLE_REQUEST_STATES:
        _note(
            existing, f"stock low again while {existing.get_state_display().lower()} (would order {quantity}): {reason}"
        )
    existing.save()
    if (
        changed
        and existing.state == RequestState.SUBMITTED
        and existing.approvals.filter(round=existing.approval_round).exists()
    ):
        existing = request_submit(request=existing)  # the amount changed under the approvers: new round
    return RefillOutcome(request=existing, created=False, changed=changed)


__all__ = [
    "LevelProgress",
    "LineInput",
    "RefillOutcome",
    "approval_progress",
    "approval_rules_for",
    "refill_dedup_key",
    "refill_request_upsert",
    "request_approve",
    "request_cancel",
    "request_create",
    "request_reject",
    "request_revise",
    "request_submit",
    "unit_price_estimate",
]

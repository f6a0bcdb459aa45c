"""The workflow engine: open tickets, take transitions, record approvals, comment, pause, resume, retry.

Every public function here is a service (style-anchors 9.3): it is the transaction boundary, locks the ticket
row, re-checks what the caller may do inside the transaction, writes the timeline, and registers the work
that must follow (automated steps, notifications) with `transaction.on_commit`. Running the steps is
workflows.runner's job; reading tickets is workflows.selectors'.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import IntegrityError, models, transaction
from django.db.models import Max
from django.utils import timezone

from gpuops.context import new_correlation_id

from .declarations import Field, Transition, Workflow
from .models import (
    ACTIVE_STEP_STATUSES,
    Approval,
    ApprovalDecision,
    LinkRole,
    StepRun,
    StepStatus,
    Ticket,
    TicketLink,
    TicketPriority,
    TimelineEntry,
    TimelineKind,
    TransitionLog,
)
from .permissions import can_operate, can_take, can_view, has_ticket_perm, ticket_grants_sync, ticket_objects_check
from .registry import workflow


class WorkflowError(Exception):
    """A request the workflow refuses. `errors` are for people; `field_errors` name the offending inputs."""

    def __init__(self, errors: str | Sequence[str], *, field_errors: Mapping[str, str] | None = None) -> None:
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        self.field_errors = dict(field_errors or {})
        super().__init__("; ".join(self.errors))


class NotAllowedError(WorkflowError):
    """Not in this state, paused, or a system transition."""


class ForbiddenError(WorkflowError):
    """The user lacks the permission."""


class GuardError(WorkflowError):
    """Inputs invalid or a guard refused."""


class IdempotencyKeyReusedError(WorkflowError):
    """The Idempotency-Key was used before for a different request (another body, ticket or transition)."""

    def __init__(self, what: str = "") -> None:
        super().__init__(
            "This Idempotency-Key was used for a different request"
            + (f" ({what})" if what else "")
            + "; send a new key for a new request."
        )


@dataclass
class CreateResult:
    ticket: Ticket
    replayed: bool = False


@dataclass
class TransitionResult:
    ticket: Ticket
    log: TransitionLog
    runs: list[StepRun] = field(default_factory=list)
    replayed: bool = False


# --- helpers ------------------------------------------------------------------------------------------------------


def _actor_repr(actor: AbstractBaseUser | None) -> str:
    if actor is None or not getattr(actor, "is_authenticated", False):
        return ""
    return str(actor.get_username())[:150]


def timeline_add(
    *,
    ticket: Ticket,
    kind: str,
    message: str,
    actor: AbstractBaseUser | None = None,
    body: str = "",
    data: Mapping[str, Any] | None = None,
    step_run: StepRun | None = None,
    at=None,
    idempotency_key: str | None = None,
) -> TimelineEntry:
    """Append one timeline entry."""
    return TimelineEntry.objects.create(
        ticket=ticket,
        at=at or timezone.now(),
        kind=kind,
        message=message[:500],
        body=body,
        data=dict(data or {}),
        actor=actor if _actor_repr(actor) else None,
        actor_repr=_actor_repr(actor),
        step_run=step_run,
        idempotency_key=idempotency_key,
    )


def _lock(ticket: Ticket | int) -> Ticket:
    pk = ticket.pk if isinstance(ticket, Ticket) else ticket
    return Ticket.objects.select_for_update().get(pk=pk)


def fields_clean(
    fields: Sequence[Field], raw: Mapping[str, Any] | None, *, user: AbstractBaseUser | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Clean declared inputs. Node and accelerator fields are resolved to objects (by hostname / serial) that
    `user` may see. Returns (values, field errors); undeclared keys are ignored."""
    from cmdb.models import Accelerator, Node
    from cmdb.permissions import can

    raw = raw or {}
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for f in fields:
        given = raw.get(f.name)
        if f.kind in ("node", "accelerator") and isinstance(given, Node | Accelerator):
            values[f.name] = given  # the engine's own callers (the health hook) pass objects
            continue
        value, error = f.clean(given)
        if not error and value is not None and f.kind in ("node", "accelerator"):
            model, lookup = (Node, "hostname") if f.kind == "node" else (Accelerator, "serial")
            obj = model.objects.filter(**{lookup: value}).first()
            if obj is None or (user is not None and not can(user, "view", obj)):
                error = f"{f.label}: no {f.kind} {value!r} that you can see."
            value = obj
        if error:
            errors[f.name] = error
        else:
            values[f.name] = value
    return values, errors


def _jsonable_inputs(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, models.Model) else v) for k, v in values.items()}


def notify_on_commit(ticket: Ticket, event: str, message: str) -> None:
    """Send a notification about `ticket` through every configured notifier, after commit (one task each).
    The outbox rows are written now, in the caller's transaction: a broker down at commit delays the
    notification to the beat sweep instead of failing the caller or losing it."""
    from .services.notifications import notifications_dispatch, notifications_record

    if ids := notifications_record(ticket=ticket, event=event, message=message):
        transaction.on_commit(functools.partial(notifications_dispatch, outbox_ids=ids))


# --- tickets ------------------------------------------------------------------------------------------------------


def link_add(*, ticket: Ticket, obj: models.Model, role: str = LinkRole.SUBJECT) -> TicketLink:
    """Link a CMDB object (node, accelerator, rack, switch, link) to the ticket; an existing link is kept."""
    kind = obj._meta.model_name
    if kind not in TicketLink.OBJECT_FIELDS:
        raise WorkflowError(f"Tickets cannot link a {kind}.")
    link, _ = TicketLink.objects.get_or_create(
        ticket=ticket, role=role, **{kind: obj}, defaults={"object_repr": str(obj)[:300]}
    )
    return link


@transaction.atomic
def ticket_create(
    *,
    type_: str,
    title: str,
    requester: AbstractBaseUser | None,
    description: str = "",
    priority: str = TicketPriority.NORMAL,
    inputs: Mapping[str, Any] | None = None,
    change_plan: str = "",
    rollback_plan: str = "",
    assignee: AbstractBaseUser | None = None,
    assignee_group: Group | None = None,
    watchers: Iterable[AbstractBaseUser] = (),
    links: Iterable[tuple[str, models.Model]] = (),
    dedup_key: str = "",
    start: bool = False,
    idempotency_key: str | None = None,
    request_digest: str = "",
) -> Ticket:
    """Open a ticket of workflow `type_` in its initial state.

    `inputs` are the workflow's create fields (e.g. the failed card's serial); node/accelerator inputs become
    subject links. A `requester` (None: opened by the system) needs `workflows.add_ticket` and must see the
    linked objects. With `start`, the workflow's start transition is taken at once (by the requester, with
    its permission; by the system when there is no requester). Side effects: view grants, a timeline entry,
    a notification on commit.
    """
    wf = workflow(type_)
    if requester is not None and not (requester.is_superuser or requester.has_perm("workflows.add_ticket")):
        raise ForbiddenError("You may not open tickets.")
    if priority not in TicketPriority.values:
        raise GuardError(f"Unknown priority {priority!r}.", field_errors={"priority": "Unknown priority."})
    values, errors = fields_clean(wf.create_fields, inputs, user=requester)
    if not title.strip():
        errors["title"] = "A title is required."
    if errors:
        raise GuardError(list(errors.values()), field_errors=errors)
    subjects = [v for v in values.values() if isinstance(v, models.Model)]
    all_links = [(LinkRole.SUBJECT, obj) for obj in subjects] + list(links)
    node = _site_anchor(all_links)
    dedup_key = dedup_key or (wf.dedup(values) if wf.dedup else "")
    if dedup_key and (twin := Ticket.objects.filter(dedup_key=dedup_key, is_open=True).first()):
        raise GuardError(f"{twin.reference} is already open for this: {twin.title}")
    if assignee_group is None and (group_name := wf.default_group_name()):
        assignee_group = Group.objects.filter(name=group_name).first()
    now = timezone.now()
    ticket = Ticket.objects.create(
        type=wf.type,
        title=title.strip()[:200],
        description=description,
        state=wf.initial,
        priority=priority,
        requester=requester,
        assignee=assignee,
        assignee_group=assignee_group,
        site_id=getattr(node, "site_id", None),
        cluster_id=getattr(node, "cluster_id", None),
        correlation_id=new_correlation_id(),
        dedup_key=dedup_key,
        change_plan=change_plan,
        rollback_plan=rollback_plan,
        data=_jsonable_inputs(values),
        due_at=now + wf.sla[priority],
        idempotency_key=idempotency_key,
        request_digest=request_digest,
    )
    if watchers:
        ticket.watchers.add(*watchers)
    for role, obj in all_links:
        link_add(ticket=ticket, obj=obj, role=role)
    if wf.on_create:
        wf.on_create(ticket, values)
        ticket.save(update_fields=["data", "updated_at"])
    if wf.default_plans and not (ticket.change_plan.strip() and ticket.rollback_plan.strip()):
        plan, rollback = wf.default_plans(ticket)
        ticket.change_plan = ticket.change_plan.strip() or plan
        ticket.rollback_plan = ticket.rollback_plan.strip() or rollback
        ticket.save(update_fields=["change_plan", "rollback_plan", "updated_at"])
    if refused := ticket_objects_check(requester, ticket):  # every linked object, once on_create linked them
        raise ForbiddenError(refused)
    ticket_grants_sync(ticket)
    who = _actor_repr(requester) or "the system"
    timeline_add(
        ticket=ticket,
        kind=TimelineKind.CREATED,
        actor=requester,
        message=f"{wf.label} ticket opened by {who}",
        data={"inputs": _jsonable_inputs(values)},
    )
    notify_on_commit(ticket, "opened", f"{ticket.reference} opened: {ticket.title}")
    if start and wf.start_transition:
        # A person starts it with their own permission; the system (health hook) needs none.
        transition_apply(ticket=ticket, name=wf.start_transition, actor=requester, system=requester is None)
        ticket.refresh_from_db()
    return ticket


def ticket_create_once(*, idempotency_key: str, **kwargs: Any) -> CreateResult:
    """`ticket_create` under a client's idempotency key (the API's Idempotency-Key, scoped per user).

    The same key with the same request returns the ticket it opened (`replayed`), however many retries race:
    the key is unique on Ticket, so on PostgreSQL a concurrent insert waits for the first and then fails, and
    ticket_create's atomic block (a savepoint inside a caller's transaction) rolls back only its own work
    before the winner is read. The same key with another request raises IdempotencyKeyReusedError.
    """
    kwargs["watchers"], kwargs["links"] = list(kwargs.get("watchers", ())), list(kwargs.get("links", ()))
    digest = _request_digest({k: v for k, v in kwargs.items() if k != "requester"})
    if (prior := _ticket_for_key(idempotency_key, digest)) is not None:
        return CreateResult(ticket=prior, replayed=True)
    try:
        return CreateResult(ticket=ticket_create(idempotency_key=idempotency_key, request_digest=digest, **kwargs))
    except IntegrityError:
        if (prior := _ticket_for_key(idempotency_key, digest)) is None:
            raise
        return CreateResult(ticket=prior, replayed=True)


def _request_digest(parts: Mapping[str, Any]) -> str:
    def encode(value: Any) -> str:
        return f"{value._meta.label}:{value.pk}" if isinstance(value, models.Model) else str(value)

    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=encode).encode()).hexdigest()


def _ticket_for_key(idempotency_key: str, digest: str) -> Ticket | None:
    prior = Ticket.objects.filter(idempotency_key=idempotency_key).first()
    if prior is not None and prior.request_digest != digest:
        raise IdempotencyKeyReusedError(f"it opened {prior.reference} with another body")
    return prior


def _site_anchor(links: Iterable[tuple[str, models.Model]]) -> Any:
    """The object whose site/cluster scope the ticket: the first subject node, else a subject card's node."""
    from cmdb.models import Accelerator, Node

    objs = [obj for role, obj in links if role == LinkRole.SUBJECT]
    node = next((o for o in objs if isinstance(o, Node)), None)
    if node is None:
        card = next((o for o in objs if isinstance(o, Accelerator)), None)
        node = card.node if card is not None and card.node_id else card
    return node


# --- transitions --------------------------------------------------------------------------------------------------


def _runs_supersede(ticket: Ticket, *, keep: StepRun | None, reason: str) -> int:
    """Cancel the active runs of a ticket that is leaving their state (a running one finds out when it tries
    to record its outcome). `keep` is the run whose outcome is being applied."""
    qs = StepRun.objects.filter(ticket=ticket, status__in=ACTIVE_STEP_STATUSES)
    if keep is not None:
        qs = qs.exclude(pk=keep.pk)
    now = timezone.now()
    return qs.update(status=StepStatus.CANCELLED, ended_at=now, updated_at=now, error=reason[:1000])


def run_start(
    *, ticket: Ticket, wf: Workflow, step_name: str, actor: AbstractBaseUser | None, log: TransitionLog | None
) -> StepRun:
    """Write a pending run of `step_name` and publish its task after commit (task id = run id)."""
    spec = wf.step_spec(step_name)
    last = StepRun.objects.filter(ticket=ticket, step=step_name).aggregate(n=Max("sequence"))["n"] or 0
    run = StepRun.objects.create(
        ticket=ticket,
        step=step_name,
        sequence=last + 1,
        max_attempts=spec.max_attempts,
        time_limit_s=spec.time_limit_s,
        actor=actor if _actor_repr(actor) else None,
        transition_log=log,
    )
    timeline_add(ticket=ticket, kind=TimelineKind.STEP, step_run=run, message=f"Step '{spec.label}' queued")
    run_enqueue_on_commit(run)
    return run


def run_enqueue_on_commit(run: StepRun) -> None:
    from .runner import run_publish

    transaction.on_commit(functools.partial(run_publish, run_id=str(run.pk), time_limit_s=run.time_limit_s))


def transition_apply(
    *,
    ticket: Ticket,
    name: str,
    actor: AbstractBaseUser | None = None,
    data: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
    system: bool = False,
    by_run: StepRun | None = None,
) -> TransitionResult:
    """Take transition `name` on `ticket`.

    Locks the ticket; refuses (NotAllowedError) when the ticket is not in one of the sources, is paused, or the
    transition is the engine's own; refuses (ForbiddenError) a person without its permission; cleans the inputs
    and runs the guards (GuardError lists every problem). Then sets the target state, stores the inputs in
    `ticket.data`, writes a TransitionLog and a timeline entry, cancels runs of the state being left, and
    starts the transition's step. A repeated `idempotency_key` returns the first result unchanged.
    `system=True` is the engine acting (a step outcome, an approval quorum): no permission check.
    """
    wf = workflow(ticket.type)
    try:
        t = wf.transition(name)
    except KeyError:
        raise NotAllowedError(f"{wf.label} has no transition '{name}'.") from None
    with transaction.atomic():
        if idempotency_key and (replay := _transition_replay(ticket, name, idempotency_key)):
            return replay
        locked = _lock(ticket)
        # Asked again under the lock: a concurrent retry with the same key may have committed while we waited.
        if idempotency_key and (replay := _transition_replay(ticket, name, idempotency_key)):
            return replay
        if not system:
            _check_person_may_take(locked, t, actor)
        if locked.is_paused and not system and not t.allowed_when_paused:
            raise NotAllowedError(f"{locked.reference} is paused; resume it first.")
        if locked.state not in t.sources:
            raise NotAllowedError(
                f"{locked.reference} is '{wf.state_label(locked.state)}'; '{t.label}' needs "
                + " or ".join(f"'{wf.state_label(s)}'" for s in sorted(t.sources))
                + "."
            )
        values, field_errors = fields_clean(t.fields, data, user=actor if not system else None)
        errors = list(field_errors.values())
        if not field_errors:
            errors += change_plan_errors(locked, wf, t)
            for guard in t.guards:
                errors += guard(locked, values)
            if not errors and t.name in wf.window_transitions:
                from .services.governance import change_window_errors

                errors += change_window_errors(locked, wf, t)
        if errors:
            raise GuardError(errors, field_errors=field_errors)
        return _transition_commit(
            locked, wf, t, actor=actor, values=values, idempotency_key=idempotency_key, by_run=by_run
        )


def _transition_replay(ticket: Ticket, name: str, idempotency_key: str) -> TransitionResult | None:
    prior = TransitionLog.objects.filter(idempotency_key=idempotency_key).first()
    if prior is None:
        return None
    if prior.ticket_id != ticket.pk or prior.name != name:
        raise IdempotencyKeyReusedError()
    return TransitionResult(
        ticket=Ticket.objects.get(pk=ticket.pk), log=prior, runs=list(prior.runs.all()), replayed=True
    )


def change_plan_errors(ticket: Ticket, wf: Workflow, t: Transition) -> list[str]:
    """The engine's own guard for change tickets: nothing goes to approval (or, for a change type without an
    approval, starts work) without its plan and rollback plan (DESIGN.md, change safety). Applies to every
    workflow declared `is_change`."""
    if not wf.is_change:
        return []
    # With an approval: before submitting. Without one (provisioning, cabling): before the work starts.
    gate = t.target == wf.approval.state if wf.approval else t.name in wf.window_transitions
    if not gate:
        return []
    errors = []
    if not ticket.change_plan.strip():
        errors.append("Write the change plan before submitting.")
    if not ticket.rollback_plan.strip():
        errors.append("Write the rollback plan before submitting.")
    return errors


def _check_person_may_take(ticket: Ticket, t: Transition, actor: AbstractBaseUser | None) -> None:
    if t.is_system:
        raise NotAllowedError(f"'{t.label}' is taken by the workflow itself, not by hand.")
    if not can_view(actor, ticket):
        raise ForbiddenError("You cannot see this ticket.")
    if not can_take(actor, ticket, t):
        raise ForbiddenError(f"You lack the permission workflows.{t.permission} for '{t.label}'.")


def _transition_commit(
    ticket: Ticket,
    wf: Workflow,
    t: Transition,
    *,
    actor: AbstractBaseUser | None,
    values: dict[str, Any],
    idempotency_key: str | None,
    by_run: StepRun | None,
) -> TransitionResult:
    source = ticket.state
    stored = {f.name: values[f.name] for f in t.fields if f.store and f.name in values}
    ticket.data.update(_jsonable_inputs(stored))
    ticket.data.update(t.sets)
    ticket.state = t.target
    if wf.approval and t.target == wf.approval.state:
        ticket.approval_round += 1  # a (re)submission starts a new round: earlier votes lapse
    now = timezone.now()
    if t.target in wf.terminal:
        ticket.is_open, ticket.closed_at, ticket.is_paused = False, now, False
    ticket.save()
    log = TransitionLog.objects.create(
        ticket=ticket,
        name=t.name,
        source=source,
        target=t.target,
        actor=actor if _actor_repr(actor) else None,
        data=_jsonable_inputs(values),
        at=now,
        idempotency_key=idempotency_key,
    )
    cancelled = _runs_supersede(ticket, keep=by_run, reason=f"superseded by '{t.label}'")
    inputs = _jsonable_inputs(values)
    note = inputs.pop("note", "") or ""
    by = f" (step '{wf.step_spec(by_run.step).label}')" if by_run is not None else ""
    timeline_add(
        ticket=ticket,
        kind=TimelineKind.TRANSITION,
        actor=actor,
        body=note,
        message=f"{t.label}: {wf.state_label(source)} → {wf.state_label(t.target)}{by}",
        data={
            "transition": t.name,
            "source": source,
            "target": t.target,
            "inputs": inputs,
            "cancelled_runs": cancelled,
        },
    )
    runs = (
        [
            run_start(
                ticket=ticket,
                wf=wf,
                step_name=t.step,
                actor=actor if actor else (by_run.actor if by_run else None),
                log=log,
            )
        ]
        if t.step
        else []
    )
    if t.target in wf.waiting_states or t.target in wf.terminal or (wf.approval and t.target == wf.approval.state):
        notify_on_commit(ticket, t.target, f"{ticket.reference} is now '{wf.state_label(t.target)}': {ticket.title}")
    return TransitionResult(ticket=ticket, log=log, runs=runs)


# --- approvals ----------------------------------------------------------------------------------------------------


def approval_snapshot(ticket: Ticket) -> dict[str, Any]:
    """Exactly what an approver is shown: the plans, the linked objects as they are now, the planned diff."""
    wf = workflow(ticket.type)
    links = ticket.links.select_related("node", "accelerator", "rack", "switch")
    objects = []
    for link in links:
        target = link.target
        objects.append(
            {
                "role": link.role,
                "kind": link.kind,
                "repr": link.object_repr,
                "url": link.admin_url,
                "status": getattr(target, "status", getattr(target, "lifecycle", "")) if target else "",
            }
        )
    preview = [c.as_dict() for c in wf.plan_preview(ticket)] if wf.plan_preview else []
    return {
        "round": ticket.approval_round,
        "title": ticket.title,
        "change_plan": ticket.change_plan,
        "rollback_plan": ticket.rollback_plan,
        "objects": objects,
        "planned_changes": preview,
    }


@transaction.atomic
def approval_record(*, ticket: Ticket, actor: AbstractBaseUser, decision: str, comment: str = "") -> Approval:
    """Record `actor`'s decision on the ticket's current approval round.

    Refuses: a ticket not awaiting approval, a requester approving their own ticket, a user without the
    approval permission, a second vote in the same round, a rejection without a reason. A rejection takes the
    workflow's reject transition at once; the N-th distinct approval takes its approve transition.
    """
    wf = workflow(ticket.type)
    rule = wf.approval
    if rule is None:
        raise NotAllowedError(f"{wf.label} tickets need no approval.")
    locked = _lock(ticket)
    if locked.state != rule.state:
        raise NotAllowedError(f"{locked.reference} is not awaiting approval.")
    if not can_view(actor, locked):
        raise ForbiddenError("You cannot see this ticket.")
    if locked.requester_id == actor.pk:
        raise ForbiddenError("A requester cannot approve their own ticket.")
    if not has_ticket_perm(actor, rule.permission, locked):
        raise ForbiddenError(f"You lack the permission workflows.{rule.permission}.")
    if decision not in ApprovalDecision.values:
        raise GuardError(f"Unknown decision {decision!r}.")
    if locked.approvals.filter(round=locked.approval_round, approver=actor).exists():
        raise NotAllowedError("You already decided on this round.")
    if decision == ApprovalDecision.REJECTED and not comment.strip():
        raise GuardError("Say why you reject it.", field_errors={"comment": "A rejection needs a reason."})
    approval = Approval.objects.create(
        ticket=locked,
        round=locked.approval_round,
        approver=actor,
        approver_repr=_actor_repr(actor),
        decision=decision,
        comment=comment,
        snapshot=approval_snapshot(locked),
        at=timezone.now(),
    )
    approvals = locked.approvals.filter(round=locked.approval_round, decision=ApprovalDecision.APPROVED).count()
    needed = rule.required_count()
    verb = "approved" if decision == ApprovalDecision.APPROVED else "rejected"
    timeline_add(
        ticket=locked,
        kind=TimelineKind.APPROVAL,
        actor=actor,
        body=comment,
        message=f"{_actor_repr(actor)} {verb} (round {locked.approval_round}, {approvals}/{needed} approvals)",
        data={"decision": decision, "round": locked.approval_round},
    )
    if decision == ApprovalDecision.REJECTED:
        transition_apply(ticket=locked, name=rule.reject_transition, system=True, actor=actor)
    elif approvals >= needed:
        transition_apply(ticket=locked, name=rule.approve_transition, system=True, actor=actor)
    return approval


# --- comments, assignment, watching -------------------------------------------------------------------------------


def comment_add(
    *, ticket: Ticket, actor: AbstractBaseUser, body: str, idempotency_key: str | None = None
) -> TimelineEntry:
    """Add a comment (anyone who can see the ticket). Watchers are notified.

    A repeated `idempotency_key` with the same ticket and text returns the first comment and notifies nobody
    again; with another ticket or text it raises IdempotencyKeyReusedError. Retries of one ticket queue on its
    row lock; a racing key on another ticket meets the unique index (get after IntegrityError).
    """
    try:
        return _comment_add(ticket=ticket, actor=actor, body=body, idempotency_key=idempotency_key)
    except IntegrityError:
        if not idempotency_key or (prior := _comment_for_key(ticket, body, idempotency_key)) is None:
            raise
        return prior


def _comment_for_key(ticket: Ticket, body: str, idempotency_key: str) -> TimelineEntry | None:
    prior = TimelineEntry.objects.filter(idempotency_key=idempotency_key).first()
    if prior is not None and (prior.ticket_id != ticket.pk or prior.body != body.strip()):
        raise IdempotencyKeyReusedError("another comment")
    return prior


@transaction.atomic
def _comment_add(*, ticket: Ticket, actor: AbstractBaseUser, body: str, idempotency_key: str | None) -> TimelineEntry:
    if not body.strip():
        raise GuardError("A comment needs text.", field_errors={"body": "Empty comment."})
    locked = _lock(ticket)
    if not can_view(actor, locked):
        raise ForbiddenError("You cannot see this ticket.")
    if idempotency_key and (prior := _comment_for_key(locked, body, idempotency_key)) is not None:
        return prior
    entry = timeline_add(
        ticket=locked,
        kind=TimelineKind.COMMENT,
        actor=actor,
        body=body.strip(),
        message=f"{_actor_repr(actor)} commented",
        idempotency_key=idempotency_key,
    )
    Ticket.objects.filter(pk=locked.pk).update(updated_at=timezone.now())
    notify_on_commit(locked, "comment", f"{_actor_repr(actor)} commented on {locked.reference}: {body[:200]}")
    return entry


@transaction.atomic
def ticket_assign(
    *, ticket: Ticket, actor: AbstractBaseUser, assignee: AbstractBaseUser | None, assignee_group: Group | None
) -> Ticket:
    """Assign to a person and/or a group (who then see the ticket). Needs `workflows.change_ticket`."""
    locked = _lock(ticket)
    if not (can_view(actor, locked) and has_ticket_perm(actor, "change_ticket", locked)):
        raise ForbiddenError("You may not reassign this ticket.")
    locked.assignee, locked.assignee_group = assignee, assignee_group
    locked.save(update_fields=["assignee", "assignee_group", "updated_at"])
    ticket_grants_sync(locked)
    who = ", ".join(x for x in [_actor_repr(assignee), assignee_group.name if assignee_group else ""] if x)
    timeline_add(ticket=locked, kind=TimelineKind.ASSIGNMENT, actor=actor, message=f"Assigned to {who or 'nobody'}")
    notify_on_commit(locked, "assigned", f"{locked.reference} assigned to {who or 'nobody'}")
    return locked


@transaction.atomic
def ticket_watch(*, ticket: Ticket, user: AbstractBaseUser, watching: bool) -> None:
    """Start or stop watching a ticket one can see."""
    if not can_view(user, ticket):
        raise ForbiddenError("You cannot see this ticket.")
    if watching:
        ticket.watchers.add(user)
        ticket_grants_sync(ticket)
    else:
        ticket.watchers.remove(user)


@transaction.atomic
def ticket_plans_update(
    *, ticket: Ticket, actor: AbstractBaseUser, title: str, description: str, change_plan: str, rollback_plan: str
) -> Ticket:
    """Edit the text of a ticket while its workflow allows (drafts): never under an approver's eyes."""
    wf = workflow(ticket.type)
    locked = _lock(ticket)
    from .permissions import can_change

    if not can_change(actor, locked):
        raise ForbiddenError("You may not edit this ticket.")
    if locked.state not in wf.editable_states:
        raise NotAllowedError(f"{locked.reference} cannot be edited in state '{wf.state_label(locked.state)}'.")
    if not title.strip():
        raise GuardError("A title is required.", field_errors={"title": "Required."})
    locked.title, locked.description = title.strip()[:200], description
    locked.change_plan, locked.rollback_plan = change_plan, rollback_plan
    locked.save()
    timeline_add(ticket=locked, kind=TimelineKind.NOTE, actor=actor, message="Plans and description edited")
    return locked


# --- operator actions on automation -------------------------------------------------------------------------------


def _check_operator(ticket: Ticket, actor: AbstractBaseUser) -> None:
    if not can_operate(actor, ticket):
        raise ForbiddenError("You lack the permission workflows.operate_ticket.")


@transaction.atomic
def ticket_pause(*, ticket: Ticket, actor: AbstractBaseUser, reason: str = "") -> Ticket:
    """Hold the ticket's automation: queued steps do not start and people cannot take transitions (except
    cancel) until resumed. A step already running finishes its attempt."""
    locked = _lock(ticket)
    _check_operator(locked, actor)
    if not locked.is_open or locked.is_paused:
        raise NotAllowedError(f"{locked.reference} is {'paused already' if locked.is_paused else 'closed'}.")
    locked.is_paused = True
    locked.save(update_fields=["is_paused", "updated_at"])
    timeline_add(ticket=locked, kind=TimelineKind.OPERATOR, actor=actor, message="Paused", body=reason)
    return locked


@transaction.atomic
def ticket_resume(*, ticket: Ticket, actor: AbstractBaseUser) -> Ticket:
    """Release a paused ticket and requeue its pending and retrying runs (waiting ones wake when due)."""
    locked = _lock(ticket)
    _check_operator(locked, actor)
    if not locked.is_paused:
        raise NotAllowedError(f"{locked.reference} is not paused.")
    locked.is_paused = False
    locked.save(update_fields=["is_paused", "updated_at"])
    runs = list(StepRun.objects.filter(ticket=locked, status__in=[StepStatus.PENDING, StepStatus.RETRY]))
    for run in runs:
        run_enqueue_on_commit(run)
    timeline_add(
        ticket=locked, kind=TimelineKind.OPERATOR, actor=actor, message=f"Resumed ({len(runs)} queued step(s) requeued)"
    )
    return locked


@transaction.atomic
def step_retry(*, run: StepRun, actor: AbstractBaseUser) -> StepRun:
    """Run a failed, waiting or stuck step again now, with a fresh attempt budget. Effects it performed
    already are not repeated (same run, same effect keys)."""
    locked_run = StepRun.objects.select_for_update().get(pk=run.pk)
    ticket = _lock(locked_run.ticket_id)
    _check_operator(ticket, actor)
    if ticket.is_paused:
        raise NotAllowedError(f"{ticket.reference} is paused; resume it first.")
    retryable = {StepStatus.FAILED, StepStatus.WAITING, StepStatus.RETRY, StepStatus.PENDING}
    if locked_run.status not in retryable:
        raise NotAllowedError(
            f"Step '{locked_run.step}' is {locked_run.status}; only a failed, waiting or queued step can be retried."
        )
    if locked_run.status == StepStatus.FAILED and _moved_on_since(locked_run):
        raise NotAllowedError(f"The ticket has moved on since step '{locked_run.step}' failed.")
    wf = workflow(ticket.type)
    previous = locked_run.status
    now = timezone.now()
    locked_run.status, locked_run.attempts, locked_run.wake_at, locked_run.error = StepStatus.PENDING, 0, None, ""
    # A retried wait starts a fresh wait: the operator is saying "keep trying".
    locked_run.state = {k: v for k, v in locked_run.state.items() if not k.startswith("deadline:")}
    locked_run.ended_at, locked_run.updated_at = None, now
    locked_run.save()
    timeline_add(
        ticket=ticket,
        kind=TimelineKind.OPERATOR,
        actor=actor,
        step_run=locked_run,
        message=f"Retry of step '{wf.step_spec(locked_run.step).label}' requested (was {previous})",
    )
    run_enqueue_on_commit(locked_run)
    return locked_run


def _moved_on_since(run: StepRun) -> bool:
    """A failed run belongs to the state it failed in; once a transition was taken after it, it is history."""
    since = run.ended_at or run.updated_at
    return TransitionLog.objects.filter(ticket_id=run.ticket_id, at__gt=since).exists()


__all__ = [
    "CreateResult",
    "ForbiddenError",
    "GuardError",
    "IdempotencyKeyReusedError",
    "NotAllowedError",
    "TransitionResult",
    "WorkflowError",
    "approval_record",
    "approval_snapshot",
    "change_plan_errors",
    "comment_add",
    "fields_clean",
    "link_add",
    "notify_on_commit",
    "run_enqueue_on_commit",
    "run_start",
    "step_retry",
    "ticket_assign",
    "ticket_create",
    "ticket_create_once",
    "ticket_pause",
    "ticket_plans_update",
    "ticket_resume",
    "ticket_watch",
    "timeline_add",
    "transition_apply",
]

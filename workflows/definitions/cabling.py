"""Cabling repair: put right one cabling fault the cabling report found, and prove it with the switches' own view.

Opened from a fabric's cabling report (the API option, the button on the fabric's cabling page,
`manage.py cabling_report --open-tickets`): one ticket per fault (integrations/switches/cabling_faults.py) - a
crossed pair is ONE ticket naming both cables and the swap, a cable in the wrong port one ticket naming the move,
any other miswired, missing or unexpected cable one ticket. Never a second ticket while one is open for any of
its ports. Or opened by hand, naming the fabric and the switch ports. A port may be on another fabric's switch:
a cable that landed there is exactly what to fix.

    open --start_drain--> draining [drain: the affected nodes in service, all at once] --drained--> recabling
    open --start_live (the nodes keep running)--> recabling
    recabling --confirm_recabled--> verifying [verify: poll the ports' switches that have SNMP, re-run the
                                               fabric's cabling validation; every port of the ticket must be ok]
    verifying --verified--> resuming [resume: the nodes this ticket drained, to their status before]
                                      --node_resumed--> done
    verifying --verify_timed_out (still wrong after CABLING_VERIFY_TIMEOUT_MINUTES)--> verify_failed
    verify_failed --reverify--> verifying;  --recable_again--> recabling;  --force_resume--> resuming
    any open state --cancel--> cancelled [release: resume the nodes this ticket drained]

Ticket data: fabric_id, fabric, ports (sorted "switch:port"), node_ids (on create); findings (verify: each
port's finding at the last check); cancel_reason.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import models
from django.db.models import Q

from cmdb.models import Fabric, Link, Node, NodeStatus, Switch
from cmdb.models.network import SwitchStatus
from cmdb.services.nodes import node_uncordon, nodes_set_status
from integrations.switches.cabling import Finding, PortRef
from integrations.switches.cabling_service import fabric_cabling_report
from integrations.switches.services import switches_poll_all

from ..conf import workflows_setting
from ..declarations import Field, Transition, Workflow, step
from ..engine import GuardError, link_add
from ..models import LinkRole, StepEffect, Ticket
from ..steps import Done, Failed, StepContext, StepOutcome, WaitForEvent
from .common import drain_reason, node_drain, node_resume
from .repair import HOLDS_NODE as REPAIR_HOLDS_NODE


class CablingState(models.TextChoices):
    OPEN = "open", "Open"
    DRAINING = "draining", "Draining nodes"
    RECABLING = "recabling", "Re-cabling"
    VERIFYING = "verifying", "Verifying cabling"
    VERIFY_FAILED = "verify_failed", "Still wrong"
    RESUMING = "resuming", "Resuming nodes"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"


S = CablingState
TERMINAL = frozenset({S.DONE, S.CANCELLED})
OPEN_STATES = frozenset(S.values) - TERMINAL


# --- identity: a fabric and its switch ports ----------------------------------------------------------------------


def ports_parse(text: str) -> list[PortRef]:
    """`switch:port` items separated by spaces or commas, sorted and unique (the port may contain ':')."""
    refs = set()
    for item in re.split(r"[\s,]+", str(text or "").strip()):
        switch, sep, port = item.partition(":")
        if item and (not sep or not switch or not port):
            raise GuardError(f"{item!r} is not switch:port.", field_errors={"ports": "Write switch:port items."})
        if item:
            refs.add(PortRef(switch, port))
    return sorted(refs)


def dedup_key_for(fabric_id: int, ports: Sequence[PortRef]) -> str:
    """One open ticket per fault: the fabric and the fault's ports."""
    key = f"cabling:{fabric_id}:" + "+".join(str(p) for p in sorted(ports))
    if len(key) > 128:  # Ticket.dedup_key's width
        key = f"cabling:{fabric_id}:sha1:" + hashlib.sha1(key.encode()).hexdigest()
    return key


def open_tickets_by_port() -> dict[str, Ticket]:
    """Open cabling tickets by each port they cover ("switch:port"), whichever fabric's report opened them: switch
    names are unique, so a port is one place, and a cable misplaced across two fabrics is one job, not two."""
    covering: dict[str, Ticket] = {}
    for ticket in Ticket.objects.filter(type="cabling", is_open=True).order_by("pk"):
        for port in ticket.data.get("ports", []):
            covering.setdefault(port, ticket)
    return covering


def open_ticket_for_ports(ports: Sequence[PortRef], covering: Mapping[str, Ticket] | None = None) -> Ticket | None:
    """The open cabling ticket that already covers one of `ports` (the same fault, or one seen in another shape
    since: one crossed cable fixed, the other not; or the same cable seen from the other fabric), if any."""
    covering = open_tickets_by_port() if covering is None else covering
    return next((covering[str(p)] for p in ports if str(p) in covering), None)


def _dedup(values: Mapping[str, Any]) -> str:
    fabric = Fabric.objects.filter(name=values.get("fabric") or "").first()
    try:
        ports = ports_parse(values.get("ports") or "")
    except GuardError:
        return ""
    return dedup_key_for(fabric.pk, ports) if fabric is not None and ports else ""


def planned_links(fabric: Fabric, ports: Sequence[PortRef]) -> list[Link]:
    """The fabric's planned cables ending on any of `ports` (either end of a switch-to-switch cable)."""
    query = Q()
    for p in ports:
        query |= Q(b_switch_port__switch__name=p.device, b_switch_port__name=p.port)
        query |= Q(a_switch_port__switch__name=p.device, a_switch_port__name=p.port)
    return list(
        Link.objects.filter(query, fabric=fabric).select_related(
            "a_nic_port__nic__node", "a_switch_port__switch", "b_switch_port__switch"
        )
    )


def _on_create(ticket: Ticket, values: Mapping[str, Any]) -> None:
    """Check the fabric and ports, refuse a port another open ticket covers, link the switches, planned cables
    and nodes, and remember what verification needs."""
    fabric = Fabric.objects.select_for_update().filter(name=values["fabric"]).first()  # one creator at a time
    if fabric is None:
        raise GuardError(f"No fabric named {values['fabric']!r}.", field_errors={"fabric": "Unknown fabric."})
    ports = ports_parse(values["ports"])
    if not ports:
        raise GuardError("Name at least one switch port.", field_errors={"ports": "Required."})
    # Any switch of the CMDB: a cable of this fabric plugged into another fabric's switch is a fault to fix here.
    switches = {s.name: s for s in Switch.objects.filter(name__in={p.device for p in ports})}
    if unknown := sorted({p.device for p in ports} - set(switches)):
        raise GuardError(f"No switch named {', '.join(unknown)}.", field_errors={"ports": "Unknown switch."})
    if (twin := open_ticket_for_ports(ports)) is not None:
        raise GuardError(f"{twin.reference} is already open for {', '.join(twin.data.get('ports', []))}.")
    for name in sorted(switches):
        link_add(ticket=ticket, obj=switches[name], role=LinkRole.SUBJECT)
    for link in planned_links(fabric, ports):
        link_add(ticket=ticket, obj=link, role=LinkRole.RELATED)
        if link.a_nic_port_id:
            link_add(ticket=ticket, obj=link.a_nic_port.nic.node, role=LinkRole.SUBJECT)
    node_ids = sorted(
        set(ticket.links.filter(role=LinkRole.SUBJECT, node__isnull=False).values_list("node_id", flat=True))
    )
    ticket.data.update(
        {"fabric_id": fabric.pk, "fabric": fabric.name, "ports": [str(p) for p in ports], "node_ids": node_ids}
    )
    if ticket.site_id is None:  # no node to scope it (a switch-to-switch cable): the fabric's site does
        Ticket.objects.filter(pk=ticket.pk).update(site_id=fabric.site_id)
        ticket.site_id = fabric.site_id


# --- several nodes in one step ------------------------------------------------------------------------------------


class NodeStepContext(StepContext):
    """The step's context for one of several nodes: its effect and deadline names carry the node, so draining
    (resuming) the second node is not mistaken for the first one's, already done. Shares the step's state and log."""

    def __init__(self, ctx: StepContext, node: Node) -> None:
        self.__dict__.update(ctx.__dict__)  # not super().__init__: a view of `ctx`, not a new context
        self.node_id = node.pk

    def _key(self, name: str) -> str:
        return super()._key(f"{name}:node:{self.node_id}")

    def deadline(self, name: str, after: dt.timedelta) -> dt.datetime:
        return super().deadline(f"{name}:node:{self.node_id}", after)


def drained_by(ticket: Ticket) -> dict[int, str | None]:
    """The nodes this ticket's drain touched (its scheduler drain ran), with the status each had before (None
    when the CMDB was not changed yet)."""
    found: dict[int, str | None] = {}
    for effect in StepEffect.objects.filter(
        ticket=ticket, name__in=("scheduler_drain", "cmdb_drain"), key__contains=":node:"
    ).order_by("at", "id"):
        node_id = int(effect.key.rsplit(":node:", 1)[1])
        if effect.name == "cmdb_drain" and found.get(node_id) is None:
            found[node_id] = (effect.result or {}).get("status_before")
        else:
            found.setdefault(node_id, None)
    return found


def in_service(node: Node) -> bool:
    """Whether `node` takes jobs: active and not cordoned. Any other node (racked, failed, in maintenance,
    cordoned by someone) is not this ticket's to drain, nor to put into service afterwards."""
    return node.status == NodeStatus.ACTIVE and not node.is_cordoned


def _cabling_holders(ticket: Ticket, node: Node) -> list[tuple[Ticket, str | None]]:
    """The other open cabling tickets whose drain touched `node`, oldest first, each with the node's status before
    that drain (None when that ticket did not change the CMDB)."""
    holders = []
    for other in Ticket.objects.filter(type="cabling", is_open=True).exclude(pk=ticket.pk).order_by("pk"):
        if node.pk in other.data.get("node_ids", []) and node.pk in (drained := drained_by(other)):
            holders.append((other, drained[node.pk]))
    return holders


def _cabling_drain_of(ticket: Ticket, node: Node) -> tuple[Ticket, str] | None:
    """Another open cabling ticket that drained `node`, and the node's status before that drain."""
    return next(((other, before) for other, before in _cabling_holders(ticket, node) if before), None)


def _held_elsewhere(ticket: Ticket, node: Node) -> list[str]:
    """What else keeps `node` out of service: a cabling ticket that drained it, a repair working on it, an open
    provisioning of it, a change (driver rollout, provisioning) holding its node lock."""
    from workflows.rollouts.locks import node_lock_holders

    cabling = [other for other, _ in _cabling_holders(ticket, node)]
    repairs = Ticket.objects.filter(type="repair", is_open=True, state__in=REPAIR_HOLDS_NODE, links__node=node)
    provisioning = Ticket.objects.filter(type="provisioning", is_open=True, links__node=node)
    locks = node_lock_holders([node.pk], exclude_key=f"ticket:{ticket.pk}")
    return sorted({t.reference for t in [*cabling, *repairs, *provisioning]} | set(locks.values()))


def _node_restore(ctx: StepContext, node: Node, status_before: str | None) -> str:
    """Undo this ticket's drain of `node`: back to exactly the status it had, in the scheduler only when that
    was in service. Returns what was done, for the step's message."""
    node_ctx = NodeStepContext(ctx, node)
    if status_before is None:  # only the scheduler drain ran: the CMDB still says what the node is
        status_before = node.status
    elif node.status not in (NodeStatus.DRAINING, NodeStatus.MAINTENANCE):
        # Someone changed it since the drain (failed, decommissioned...): theirs now, not ours to resume.
        return f"{node} left as is ({node.status} now)"
    if status_before == NodeStatus.ACTIVE:
        node_resume(node_ctx, node, status_before=status_before)
        return f"resumed {node}"

    # Drained while not in service (before drains were limited to nodes in service): its status back, its
    # cordon lifted if it is this ticket's, and no resume in the scheduler - it took no jobs before either.
    def cmdb_restore() -> dict[str, Any]:
        fresh = Node.objects.get(pk=node.pk)
        nodes_set_status(node_ids=[fresh.pk], status=status_before, reason=drain_reason(ctx.ticket))
        ours = fresh.is_cordoned and fresh.cordon_reason.startswith(f"{ctx.ticket.reference}: ")
        if ours:
            node_uncordon(node=fresh)
        return {"status": status_before, "uncordoned": ours}

    node_ctx.effect("cmdb_restore", cmdb_restore)
    return f"{node} back to {status_before}, not resumed"


def _resume_drained(ctx: StepContext) -> str:
    done, kept = [], []
    for node_id, status_before in sorted(drained_by(ctx.ticket).items()):
        node = Node.objects.select_related("cluster").filter(pk=node_id).first()
        if node is None:
            continue
        if holders := _held_elsewhere(ctx.ticket, node):
            ctx.log(f"{node} stays drained for {', '.join(holders)}")
            kept.append(f"{node} (held by {', '.join(holders)})")
            continue
        done.append(_node_restore(ctx, node, status_before))
    parts = ["; ".join(done) if done else "no node to resume"]
    if kept:
        parts.append(f"left drained: {', '.join(kept)}")
    return "; ".join(parts)


# --- steps --------------------------------------------------------------------------------------------------------


@step("drain", label="Drain the affected nodes", time_limit_s=300)
def drain(ctx: StepContext) -> StepOutcome:
    """Drain the nodes on the ticket's cables that are in service (active, not cordoned) in their scheduler, mark
    them draining and cordoned with the ticket as reason, and wait until their jobs are gone (then they are in
    maintenance). All are asked to drain before waiting on any, so a crossed pair across two nodes costs one
    drain's time. A node another open cabling ticket drained is held too (the last ticket done resumes it); any
    other node not in service is left alone, and so is not resumed at the end either."""
    nodes = list(
        Node.objects.select_related("cluster", "site")
        .filter(pk__in=ctx.ticket.data.get("node_ids", []))
        .order_by("hostname")
    )
    ours = drained_by(ctx.ticket)  # an earlier attempt's drains: no longer "in service", still ours to finish
    draining, left_alone = [], []
    for node in nodes:
        if node.pk in ours or in_service(node):
            draining.append(node)
        elif (other := _cabling_drain_of(ctx.ticket, node)) is not None:
            # Another cabling fault's ticket drained it: hold it as drained too, so the first one done does not
            # resume it under this ticket's technician; the last one done restores the status from before.
            holder, before = other
            NodeStepContext(ctx, node).effect(
                "cmdb_drain",
                lambda before=before, holder=holder: {
                    "status_before": before,
                    "drain_reason": f"drained by {holder.reference}",
                },
            )
            draining.append(node)
        else:
            left_alone.append(node)
    waits: list[WaitForEvent] = []
    failures: list[Failed] = []
    for node in draining:
        _, outcome = node_drain(NodeStepContext(ctx, node), node)
        if isinstance(outcome, Failed):
            failures.append(outcome)
        elif outcome is not None:
            waits.append(outcome)
    if failures:
        return Failed(reason="; ".join(f.reason for f in failures))
    if waits:
        return WaitForEvent(
            key=waits[0].key, recheck_in=min(w.recheck_in for w in waits), message="; ".join(w.message for w in waits)
        )
    parts = [f"drained {', '.join(n.hostname for n in draining)}" if draining else "no node to drain"]
    if left_alone:
        parts.append(
            "not in service, left alone: "
            + ", ".join(f"{n.hostname} ({n.status}{', cordoned' if n.is_cordoned else ''})" for n in left_alone)
        )
    elif not nodes:
        parts = ["no node on these cables"]
    return Done(transition="drained", message="; ".join(parts))


def _port_problem(port: PortRef, finding: Finding | None, planned: bool) -> str:
    if finding is None:
        # A planned port nobody has reported on is not proven; an unplanned one nobody sees is clean.
        return f"{port}: no observation yet" if planned else ""
    return finding.message if finding.is_problem else ""


@step("verify", label="Re-validate the cabling", time_limit_s=300)
def verify(ctx: StepContext) -> StepOutcome:
    """Poll the ports' switches that have SNMP configured (the others' latest observations, switch or host LLDP,
    stand), re-run the fabric's cabling validation and pass when every port of the ticket is ok. Otherwise look
    again every CABLING_VERIFY_POLL_SECONDS, and give up after CABLING_VERIFY_TIMEOUT_MINUTES (verify_failed,
    where people decide)."""
    data = ctx.ticket.data
    fabric = Fabric.objects.get(pk=data["fabric_id"])
    ports = ports_parse(" ".join(data["ports"]))
    pollable = list(
        Switch.objects.filter(
            fabric=fabric, name__in={p.device for p in ports}, mgmt_ip__isnull=False, status=SwitchStatus.ACTIVE
        ).exclude(snmp_credential_ref="")
    )
    for run in switches_poll_all(switches=pollable) if pollable else []:
        ctx.log(
            f"SNMP poll of {run.switch}: {run.status}" + (f" ({run.error})" if run.error else ""),
            level="info" if run.status == "ok" else "warning",
        )
    findings = {PortRef(f.switch, f.port): f for f in fabric_cabling_report(fabric)}
    planned = set()
    for link in planned_links(fabric, ports):
        for end in (link.a_switch_port, link.b_switch_port):
            if end is not None:
                planned.add(PortRef(end.switch.name, end.name))
    seen = {str(p): findings[p].message if p in findings else "not observed" for p in ports}
    left = [problem for p in ports if (problem := _port_problem(p, findings.get(p), p in planned))]
    if not left:
        return Done(transition="verified", data={"findings": seen}, message="; ".join(seen.values()))
    timeout = dt.timedelta(minutes=workflows_setting("CABLING_VERIFY_TIMEOUT_MINUTES"))
    if ctx.now >= ctx.deadline("verify", timeout):
        return Done(
            transition="verify_timed_out",
            data={"findings": seen},
            message=f"still wrong after {timeout}: {'; '.join(left)}",
        )
    return WaitForEvent(
        key="",
        recheck_in=dt.timedelta(seconds=workflows_setting("CABLING_VERIFY_POLL_SECONDS")),
        data={"findings": seen},
        message=f"not right yet: {'; '.join(left)}",
    )


@step("resume", label="Resume the drained nodes", time_limit_s=300)
def resume(ctx: StepContext) -> StepOutcome:
    """Resume the nodes this ticket drained, restore exactly their status from before and lift the ticket's
    cordon - except a node something else still holds (another cabling fault, a repair of one of its cards, an
    open provisioning, a node lock) or whose status someone changed meanwhile."""
    return Done(transition="node_resumed", message=_resume_drained(ctx))


@step("release", label="Resume what the ticket drained", time_limit_s=300)
def release(ctx: StepContext) -> StepOutcome:
    """On cancel: resume the nodes this ticket drained (also one drained halfway), as `resume` does."""
    return Done(message=_resume_drained(ctx))


# --- the graph ----------------------------------------------------------------------------------------------------

NOTE = Field("note", "Note", kind="textarea", required=False, store=False)

TRANSITIONS = (
    Transition(
        "start_drain",
        "Drain the nodes, then re-cable",
        frozenset({S.OPEN}),
        S.DRAINING,
        "cabling_work",
        step="drain",
        fields=(NOTE,),
        description="The nodes on these cables are drained first: their jobs lose these links otherwise.",
    ),
    Transition(
        "start_live",
        "Re-cable without draining",
        frozenset({S.OPEN}),
        S.RECABLING,
        "cabling_work",
        style="secondary",
        fields=(Field("note", "Why no drain is needed", kind="textarea", store=False),),
        description="For cables no job uses (a node not in service, a spare port).",
    ),
    Transition("drained", "Nodes drained", frozenset({S.DRAINING}), S.RECABLING, None),
    Transition(
        "confirm_recabled",
        "Cables fixed: verify",
        frozenset({S.RECABLING}),
        S.VERIFYING,
        "cabling_work",
        step="verify",
        fields=(NOTE,),
        description="The switches are polled and the fabric's cabling validated again for these ports.",
    ),
    Transition("verified", "Cabling verified", frozenset({S.VERIFYING}), S.RESUMING, None, step="resume"),
    Transition("verify_timed_out", "Verification timed out", frozenset({S.VERIFYING}), S.VERIFY_FAILED, None),
    Transition(
        "reverify",
        "Verify again",
        frozenset({S.VERIFY_FAILED}),
        S.VERIFYING,
        "cabling_work",
        step="verify",
        fields=(NOTE,),
    ),
    Transition(
        "recable_again",
        "Re-cable again",
        frozenset({S.VERIFY_FAILED}),
        S.RECABLING,
        "cabling_work",
        style="secondary",
        fields=(NOTE,),
    ),
    Transition(
        "force_resume",
        "Resume without verification",
        frozenset({S.VERIFY_FAILED}),
        S.RESUMING,
        "cabling_force_resume",
        step="resume",
        style="danger",
        fields=(Field("note", "Why it is right although validation disagrees", kind="textarea", store=False),),
    ),
    Transition("node_resumed", "Nodes resumed", frozenset({S.RESUMING}), S.DONE, None),
    Transition(
        "cancel",
        "Cancel",
        OPEN_STATES,
        S.CANCELLED,
        "cabling_cancel",
        step="release",
        allow_requester=True,
        allowed_when_paused=True,
        style="danger",
        fields=(Field("cancel_reason", "Why cancel", kind="textarea"),),
    ),
)


def _default_plans(ticket: Ticket) -> tuple[str, str]:
    """The fault's fix and how to put the cables back as they were."""
    ports = ", ".join(ticket.data.get("ports") or []) or "the ticket's ports"
    fabric = ticket.data.get("fabric") or "the fabric"
    plan = (
        f"On {fabric}: drain the nodes on {ports} (unless no job uses them), re-cable as the cabling report "
        "says, verify with the switches' own view (LLDP/SNMP) and the cabling validation, then resume the nodes."
    )
    rollback = (
        f"Put the cables on {ports} back where they were (the ticket's findings record the observed ports), "
        "verify, and resume the nodes this ticket drained (cancel releases them)."
    )
    return plan, rollback


WORKFLOW = Workflow(
    type="cabling",
    label="Cabling repair",
    prefix="CAB",
    states=CablingState,
    initial=S.OPEN,
    terminal=TERMINAL,
    transitions=TRANSITIONS,
    drain_timeout=dt.timedelta(hours=4),
    steps=(drain, verify, resume, release),
    create_fields=(
        Field("fabric", "Fabric (name)", max_length=100),
        Field(
            "ports",
            "Switch ports",
            help_text="switch:port items separated by spaces, e.g. su1-leaf2:Ethernet1/3 su1-leaf5:Ethernet1/3",
        ),
    ),
    waiting_states=frozenset({S.OPEN, S.RECABLING, S.VERIFY_FAILED}),
    editable_states=frozenset({S.OPEN, S.RECABLING}),
    is_change=True,
    window_transitions=frozenset({"start_drain", "start_live"}),
    default_plans=_default_plans,
    default_group=lambda: workflows_setting("REPAIR_ASSIGNEE_GROUP"),
    dedup=_dedup,
    on_create=_on_create,
    sla={
        "critical": dt.timedelta(hours=8),
        "high": dt.timedelta(days=1),
        "normal": dt.timedelta(days=3),
        "low": dt.timedelta(days=10),
    },
    description=__doc__ or "",
)

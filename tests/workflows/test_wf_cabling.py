"""Cabling repair tickets end to end: a crossed pair seen by the switches' SNMP LLDP becomes one ticket; drain,
re-cable, verify by polling the switches and re-validating, resume. Plus dedup, timeouts, cancel, every
transition of the graph and its committed diagram."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from cmdb import models as m
from integrations.ports import LldpNeighbor, SwitchSnapshot
from integrations.switches import services
from integrations.switches.cabling_tickets import cabling_tickets_open
from integrations.switches.fakes import FakeSnmpPoller, empty_snapshot
from integrations.switches.models import ObservationSource, ObservedLink, PollRun
from tests.factories.cmdb import NodeFactory
from tests.workflows.helpers import open_by_hook, take, ticket_fresh
from workflows.definitions import cabling as cabling_wf
from workflows.definitions.common import scheduler_node
from workflows.engine import GuardError, link_add, ticket_create, transition_apply
from workflows.graph import workflow_markdown
from workflows.models import LinkRole, StepRun, StepStatus, Ticket
from workflows.registry import workflow
from workflows.rollouts.locks import LockOwner, node_locks_acquire

pytestmark = pytest.mark.django_db

HOST_CHASSIS = "0e:00:00:00:09:99"  # the node's lldpd chassis id
PORTS = ["sh9-leaf0:Ethernet1/1", "sh9-leaf1:Ethernet1/1"]


@dataclass
class Cabled:
    fabric: m.Fabric
    leaves: list[m.Switch]
    macs: list[str]  # the node's NIC port MAC per rail
    poller: FakeSnmpPoller

    def snapshots(self, *, crossed: bool) -> dict[str, SwitchSnapshot]:
        """What each leaf's LLDP table says: port Ethernet1/1 sees the node's rail-r port (or the other one)."""
        out = {}
        for rail, leaf in enumerate(self.leaves):
            mac = self.macs[1 - rail if crossed else rail]
            neighbour = LldpNeighbor("Ethernet1/1", HOST_CHASSIS, mac, "sh9-h100-0001")
            out[leaf.mgmt_ip] = SwitchSnapshot(
                system=empty_snapshot(leaf.name).system, ports=(), lldp_neighbors=(neighbour,)
            )
        return out

    def switches_see(self, *, crossed: bool) -> None:
        self.poller.responses = self.snapshots(crossed=crossed)


@pytest.fixture
def cabled(fleet, monkeypatch) -> Cabled:
    """A rail-optimised RoCE fabric at the fleet's site: the fleet's node has two NICs planned on port Ethernet1/1
    of their rail's leaf; both leaves are polled over SNMP (a fake poller) and see the two cables crossed."""
    vendor, _ = m.Vendor.objects.get_or_create(slug="arista", defaults={"name": "Arista"})
    fabric = m.Fabric.objects.create(
        name="sh9-roce", kind="roce", purpose="compute", site=fleet.site, is_rail_optimized=True, rail_count=2
    )
    leaves, macs = [], []
    for rail in range(2):
        leaf = m.Switch.objects.create(
            name=f"sh9-leaf{rail}",
            vendor=vendor,
            site=fleet.site,
            fabric=fabric,
            rail=rail,
            mgmt_ip=f"10.9.0.{rail + 1}",
            snmp_credential_ref="sh9-snmp",
        )
        port = m.SwitchPort.objects.create(switch=leaf, name="Ethernet1/1")
        nic = m.Nic.objects.create(node=fleet.node, name=f"mlx5_{rail}", kind="roce", rail=rail)
        nic_port = m.NicPort.objects.create(nic=nic, name="1", mac=f"b8:3f:d2:00:09:0{rail}")
        m.Link.objects.create(fabric=fabric, a_nic_port=nic_port, b_switch_port=port, cable_serial=f"CBL-{rail}")
        leaves.append(leaf)
        macs.append(nic_port.mac)
    monkeypatch.setenv("GPUOPS_CREDENTIAL_SH9_SNMP", '{"community": "c"}')
    poller = FakeSnmpPoller()
    monkeypatch.setattr(services, "snmp_poller_get", lambda: poller)
    result = Cabled(fabric=fabric, leaves=leaves, macs=macs, poller=poller)
    result.switches_see(crossed=True)
    services.switches_poll_all(switches=leaves)
    return result


def _open(wf, cabled: Cabled, requester) -> Ticket:
    (result,) = wf.run(cabling_tickets_open, cabled.fabric, requester=requester)
    assert result.created
    return Ticket.objects.get(pk=result.ticket_id)


def _node(fleet) -> m.Node:
    return m.Node.objects.get(pk=fleet.node.pk)


def test_crossed_pair_is_one_ticket_drained_recabled_verified_resumed(wf, cabled, fleet, lead):
    ticket = _open(wf, cabled, lead)
    assert (ticket.type, ticket.state, ticket.reference) == ("cabling", "open", f"CAB-{ticket.pk}")
    assert ticket.data["ports"] == PORTS and ticket.data["node_ids"] == [fleet.node.pk]
    assert ticket.title == "Crossed cables on sh9-leaf0:Ethernet1/1 and sh9-leaf1:Ethernet1/1"
    assert "Swap the cables on sh9-leaf0:Ethernet1/1 and sh9-leaf1:Ethernet1/1." in ticket.description
    assert "CBL-0" in ticket.description and "CBL-1" in ticket.description
    assert ticket.site_id == fleet.site.pk and ticket.assignee_group.name == "dc-technicians"

    ticket = take(wf, ticket, "start_drain", lead, note="jobs would lose both rails")
    assert ticket.state == "recabling"
    node = _node(fleet)
    assert node.status == "maintenance" and node.cordon_reason.startswith(f"{ticket.reference}: ")
    assert wf.scheduler.calls["drain"] == 1
    drain_log = list(StepRun.objects.get(ticket=ticket, step="drain").log_lines.values_list("message", flat=True))
    assert "cmdb_drain: done" in drain_log and len(drain_log) == len(set(drain_log))  # each line written once

    # The technician says done, but the switches still see the cables crossed: verification waits, polling.
    polls = PollRun.objects.count()
    ticket = take(wf, ticket, "confirm_recabled", lead)
    assert ticket.state == "verifying"
    run = StepRun.objects.get(ticket=ticket, step="verify")
    assert run.status == StepStatus.WAITING
    assert PollRun.objects.count() == polls + 2  # both leaves polled by the step
    assert ticket.timeline.filter(message__contains="not right yet").exists()

    cabled.switches_see(crossed=False)
    wf.wake()
    ticket = ticket_fresh(ticket)
    assert ticket.state == "done" and not ticket.is_open
    assert set(ticket.data["findings"]) == set(PORTS)
    assert all(" ok " in message for message in ticket.data["findings"].values())
    node = _node(fleet)
    assert node.status == "active" and not node.is_cordoned and wf.scheduler.calls["resume"] == 1
    assert set(m.Link.objects.filter(fabric=cabled.fabric).values_list("status", flat=True)) == {"planned"}

    # The step's polls recorded the re-cabled observations under the ticket's correlation id.
    records = m.ChangeRecord.objects.filter(correlation_id=ticket.correlation_id, content_type__model="observedlink")
    assert sorted(r.action for r in records) == ["create", "create", "delete", "delete"]
    assert {r.source for r in records} == {"integration"}


def test_without_snmp_the_latest_observations_stand_until_a_timeout_then_reverify(wf, cabled, fleet, lead, settings):
    settings.GPUOPS_WORKFLOWS = {"CABLING_VERIFY_TIMEOUT_MINUTES": 0}
    m.Switch.objects.filter(fabric=cabled.fabric).update(snmp_credential_ref="")
    ticket = _open(wf, cabled, lead)
    ticket = take(wf, ticket, "start_live", lead, note="node not in service")
    assert ticket.state == "recabling" and wf.scheduler.calls["drain"] == 0
    polls = PollRun.objects.count()
    ticket = take(wf, ticket, "confirm_recabled", lead)
    assert ticket.state == "verify_failed" and PollRun.objects.count() == polls  # nothing to poll
    assert "miswired" in ticket.timeline.filter(message__contains="still wrong after").get().message

    # Someone else's poll (the beat task) sees the cables right now.
    for leaf in cabled.leaves:
        services.switch_snapshot_apply(
            switch=leaf, snapshot=cabled.snapshots(crossed=False)[leaf.mgmt_ip], run=PollRun.objects.create(switch=leaf)
        )
    ticket = take(wf, ticket, "reverify", lead)
    assert ticket.state == "done"
    assert wf.scheduler.calls["resume"] == 0 and _node(fleet).status == "active"  # nothing was drained


def test_force_resume_after_a_failed_verification(wf, cabled, fleet, lead, settings):
    settings.GPUOPS_WORKFLOWS = {"CABLING_VERIFY_TIMEOUT_MINUTES": 0}
    ticket = _open(wf, cabled, lead)
    for name in ("start_drain", "confirm_recabled"):
        ticket = take(wf, ticket, name, lead)
    assert ticket.state == "verify_failed"
    ticket = take(wf, ticket, "recable_again", lead)
    assert ticket.state == "recabling"
    ticket = take(wf, ticket, "confirm_recabled", lead)
    ticket = take(wf, ticket, "force_resume", lead, note="the plan is wrong: fixed in the CMDB tomorrow")
    assert ticket.state == "done" and _node(fleet).status == "active"


def test_cancel_resumes_what_the_ticket_drained(wf, cabled, fleet, lead):
    ticket = _open(wf, cabled, lead)
    ticket = take(wf, ticket, "start_drain", lead)
    ticket = take(wf, ticket, "cancel", lead, cancel_reason="the plan was wrong, not the cables")
    assert ticket.state == "cancelled"
    node = _node(fleet)
    assert node.status == "active" and not node.is_cordoned and wf.scheduler.calls["resume"] == 1


def test_a_node_a_repair_holds_stays_drained(wf, cabled, fleet, lead):
    ticket = _open(wf, cabled, lead)
    ticket = take(wf, ticket, "start_drain", lead)
    repair = open_by_hook(wf, fleet)  # a card fails meanwhile: the repair works on the drained node
    assert repair.state == "diagnosing"
    ticket = take(wf, ticket, "cancel", lead, cancel_reason="done by the repair")
    node = _node(fleet)
    assert node.status == "maintenance" and node.is_cordoned and wf.scheduler.calls["resume"] == 0
    release = StepRun.objects.get(ticket=ticket, step="release")
    assert release.log_lines.filter(message__contains=f"stays drained for {repair.reference}").exists()


def test_one_open_ticket_per_fault_and_per_port(wf, cabled, fleet, lead):
    ticket = _open(wf, cabled, lead)
    (again,) = wf.run(cabling_tickets_open, cabled.fabric, requester=lead)
    assert (again.created, again.ticket_id) == (False, ticket.pk)

    def by_hand(ports: str, fabric: str = "sh9-roce") -> Ticket:
        return wf.run(
            ticket_create, type_="cabling", title="by hand", requester=lead, inputs={"fabric": fabric, "ports": ports}
        )

    with pytest.raises(GuardError, match=f"{ticket.reference} is already open"):
        by_hand(" ".join(reversed(PORTS)))  # the same fault, spelled in another order
    with pytest.raises(GuardError, match=f"{ticket.reference} is already open for"):
        by_hand(PORTS[0])
    with pytest.raises(GuardError, match="No switch named leaf9"):
        by_hand("leaf9:Ethernet1/1")
    with pytest.raises(GuardError, match="No fabric named"):
        by_hand(PORTS[0], fabric="nope")
    with pytest.raises(GuardError, match="is not switch:port"):
        by_hand("sh9-leaf0")

    take(wf, ticket, "cancel", lead, cancel_reason="reopen by hand")
    mine = by_hand(f"{PORTS[0]}, {PORTS[0]}")
    # By hand, the node comes from the port's planned cable.
    assert mine.data["ports"] == [PORTS[0]] and mine.data["node_ids"] == [fleet.node.pk]


# --- a cable on another fabric's switch ---------------------------------------------------------------------------


def test_a_cable_on_another_fabrics_switch_gets_its_ticket_and_verifies(wf, cabled, fleet, lead):
    """The host reports its rail-0 cable on a leaf of another fabric: missing on sh9-leaf0 + unexpected on that
    leaf is one "moved" fault, and its ticket names the foreign switch."""
    vendor = cabled.leaves[0].vendor
    other = m.Fabric.objects.create(name="sh9-storage", kind="roce", purpose="storage", site=fleet.site)
    b_leaf = m.Switch.objects.create(name="sh9-st-leaf0", vendor=vendor, site=fleet.site, fabric=other)
    b_port = m.SwitchPort.objects.create(switch=b_leaf, name="Ethernet1/1")
    rail0 = m.NicPort.objects.get(mac=cabled.macs[0])
    crossed = cabled.snapshots(crossed=False)
    leaf0 = cabled.leaves[0]
    crossed[leaf0.mgmt_ip] = empty_snapshot(leaf0.name)  # leaf0 sees nothing: the cable is on the other leaf
    cabled.poller.responses = crossed
    services.switches_poll_all(switches=cabled.leaves)
    host_row = ObservedLink.objects.create(
        source=ObservationSource.HOST_LLDP,
        node=fleet.node,
        nic_port=rail0,
        local_device=fleet.node.hostname,
        local_port="ens1f0",
        remote_chassis_id="0e:00:00:00:0b:01",
        remote_port="Ethernet1/1",
        remote_system=b_leaf.name,
        switch=b_leaf,
        switch_port=b_port,
    )

    (result,) = wf.run(cabling_tickets_open, cabled.fabric, requester=lead)
    assert result.created and result.fault.kind == "moved" and not result.skipped
    ticket = Ticket.objects.get(pk=result.ticket_id)
    assert ticket.data["ports"] == ["sh9-leaf0:Ethernet1/1", "sh9-st-leaf0:Ethernet1/1"]
    assert ticket.data["node_ids"] == [fleet.node.pk]
    assert set(
        ticket.links.filter(role=LinkRole.SUBJECT, switch__isnull=False).values_list("switch__name", flat=True)
    ) == {"sh9-leaf0", "sh9-st-leaf0"}

    # The storage fabric's own report sees that cable too (unexpected on its leaf): the same job, no second ticket.
    from integrations.switches.cabling import Endpoint, Finding, FindingKind

    seen_from_b = [
        Finding(
            kind=FindingKind.UNEXPECTED,
            switch=b_leaf.name,
            port="Ethernet1/1",
            found=Endpoint(device=fleet.node.hostname, port="ens1f0/1"),
        )
    ]
    (from_b,) = wf.run(cabling_tickets_open, other, requester=lead, findings=seen_from_b)
    assert not from_b.created and from_b.ticket_id == ticket.pk
    assert Ticket.objects.filter(type="cabling", is_open=True).count() == 1

    # The technician moves the cable; the switch and the host's next report see it on its planned port.
    cabled.switches_see(crossed=False)
    ObservedLink.objects.filter(pk=host_row.pk).update(
        switch=leaf0, switch_port=leaf0.ports.get(), remote_system=leaf0.name
    )
    ticket = take(wf, ticket, "start_live", lead, note="spare rail")
    ticket = take(wf, ticket, "confirm_recabled", lead)
    assert ticket.state == "done", ticket.timeline.values_list("message", flat=True)


# --- which nodes the ticket drains and resumes ---------------------------------------------------------------------


@pytest.mark.parametrize(("status", "cordoned"), [("failed", False), ("racked", False), ("active", True)])
def test_a_node_not_in_service_is_neither_drained_nor_resumed(wf, cabled, fleet, lead, status, cordoned):
    m.Node.objects.filter(pk=fleet.node.pk).update(
        status=status, is_cordoned=cordoned, cordon_reason="bad PSU" if cordoned else ""
    )
    ticket = _open(wf, cabled, lead)
    ticket = take(wf, ticket, "start_drain", lead)
    assert ticket.state == "recabling" and wf.scheduler.calls["drain"] == 0
    assert (
        "not in service, left alone: sh9-h100-0001"
        in ticket.timeline.filter(message__contains="left alone").get().message
    )
    ticket = take(wf, ticket, "cancel", lead, cancel_reason="x")
    node = _node(fleet)
    assert (node.status, node.is_cordoned) == (status, cordoned) and wf.scheduler.calls["resume"] == 0


def test_a_node_drained_out_of_service_is_restored_to_its_status_not_resumed(wf, cabled, fleet, lead, monkeypatch):
    """A ticket whose drain took a failed node (as drains did before they were limited to nodes in service) puts
    it back to failed, lifts its cordon, and does not hand it to the scheduler."""
    m.Node.objects.filter(pk=fleet.node.pk).update(status="failed")
    ticket = _open(wf, cabled, lead)
    with monkeypatch.context() as patch:
        patch.setattr(cabling_wf, "in_service", lambda node: True, raising=False)
        ticket = take(wf, ticket, "start_drain", lead)
    assert _node(fleet).status == "maintenance" and wf.scheduler.calls["drain"] == 1
    ticket = take(wf, ticket, "cancel", lead, cancel_reason="x")
    node = _node(fleet)
    assert node.status == "failed" and not node.is_cordoned and wf.scheduler.calls["resume"] == 0


def test_a_node_someone_else_changed_meanwhile_is_not_resumed(wf, cabled, fleet, lead):
    from cmdb.services.nodes import nodes_set_status

    ticket = take(wf, _open(wf, cabled, lead), "start_drain", lead)
    nodes_set_status(node_ids=[fleet.node.pk], status="failed", reason="PSU dead")
    ticket = take(wf, ticket, "cancel", lead, cancel_reason="x")
    assert _node(fleet).status == "failed" and wf.scheduler.calls["resume"] == 0
    message = ticket.timeline.filter(message__contains="left as is").get().message
    assert "sh9-h100-0001 left as is (failed now)" in message


def _provisioning_of(node: m.Node) -> str:
    ticket = Ticket.objects.create(type="provisioning", title="bring up", state="joining", correlation_id="prv-1")
    link_add(ticket=ticket, obj=node, role=LinkRole.SUBJECT)
    return ticket.reference


def _rollout_lock_on(node: m.Node) -> str:
    assert node_locks_acquire(node_ids=[node.pk], owner=LockOwner(key="rollout:7", label="ROL-7")) == {}
    return "ROL-7"


@pytest.mark.parametrize("hold", [_provisioning_of, _rollout_lock_on])
def test_a_node_a_provisioning_or_a_node_lock_holds_stays_drained(wf, cabled, fleet, lead, hold):
    ticket = take(wf, _open(wf, cabled, lead), "start_drain", lead)
    holder = hold(fleet.node)
    ticket = take(wf, ticket, "cancel", lead, cancel_reason="x")
    node = _node(fleet)
    assert node.status == "maintenance" and node.is_cordoned and wf.scheduler.calls["resume"] == 0
    release = StepRun.objects.get(ticket=ticket, step="release")
    assert release.log_lines.filter(message__contains=f"stays drained for {holder}").exists()


def test_two_cabling_tickets_on_one_node_keep_it_drained_until_both_are_done(wf, cabled, fleet, lead):
    def by_hand(port: str) -> Ticket:
        return wf.run(
            ticket_create,
            type_="cabling",
            title=port,
            requester=lead,
            inputs={"fabric": cabled.fabric.name, "ports": port},
        )

    first = take(wf, by_hand(PORTS[0]), "start_drain", lead)
    # The node is drained already: the second ticket drains it in the scheduler again, and both hold it.
    second = take(wf, by_hand(PORTS[1]), "start_drain", lead)
    assert (first.state, second.state) == ("recabling", "recabling") and wf.scheduler.calls["drain"] == 2
    take(wf, first, "cancel", lead, cancel_reason="x")
    assert _node(fleet).status == "maintenance" and wf.scheduler.calls["resume"] == 0
    take(wf, second, "cancel", lead, cancel_reason="x")
    node = _node(fleet)
    assert node.status == "active" and not node.is_cordoned and wf.scheduler.calls["resume"] == 1


def test_all_nodes_are_asked_to_drain_before_waiting_for_any(wf, cabled, fleet, lead):
    """Cables of two nodes on one ticket: the second node drains while the first still runs jobs."""
    other = NodeFactory(hostname="sh9-h100-0002", site=fleet.site, cluster=fleet.cluster, status="active")
    nic = m.Nic.objects.create(node=other, name="mlx5_0", kind="roce", rail=0)
    nic_port = m.NicPort.objects.create(nic=nic, name="1", mac="b8:3f:d2:00:09:10")
    port = m.SwitchPort.objects.create(switch=cabled.leaves[0], name="Ethernet1/2")
    m.Link.objects.create(fabric=cabled.fabric, a_nic_port=nic_port, b_switch_port=port)
    ticket = wf.run(
        ticket_create,
        type_="cabling",
        title="two nodes",
        requester=lead,
        inputs={"fabric": cabled.fabric.name, "ports": "sh9-leaf0:Ethernet1/1 sh9-leaf0:Ethernet1/2"},
    )
    assert ticket.data["node_ids"] == sorted([fleet.node.pk, other.pk])
    wf.scheduler._node(scheduler_node(fleet.node)).running = 3

    ticket = take(wf, ticket, "start_drain", lead)
    assert ticket.state == "draining"
    assert [name for op, name, _ in wf.scheduler.log if op == "drain"] == ["sh9-h100-0001", "sh9-h100-0002"]
    assert m.Node.objects.get(pk=other.pk).status == "maintenance"

    wf.scheduler._node(scheduler_node(fleet.node)).running = 0
    wf.wake()
    ticket = ticket_fresh(ticket)
    assert ticket.state == "recabling" and wf.scheduler.calls["drain"] == 2
    assert _node(fleet).status == "maintenance"


# --- every transition of the graph, table-driven -----------------------------------------------------------------

# transition -> (ticket data to preset, inputs); fold into tests/workflows/test_wf_transitions.py's CASES.
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "start_drain": ({}, {"note": "x"}),
    "start_live": ({}, {"note": "spare port"}),
    "drained": ({}, {}),
    "confirm_recabled": ({}, {}),
    "verified": ({}, {}),
    "verify_timed_out": ({}, {}),
    "reverify": ({}, {}),
    "recable_again": ({}, {}),
    "force_resume": ({}, {"note": "plan fixed"}),
    "node_resumed": ({}, {}),
    "cancel": ({}, {"cancel_reason": "x"}),
}


def test_every_declared_transition_has_a_case():
    assert {t.name for t in workflow("cabling").transitions} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_transition_reaches_its_target(name, cabled, lead, django_capture_on_commit_callbacks):
    wf = workflow("cabling")
    t = wf.transition(name)
    preset, inputs = CASES[name]
    with django_capture_on_commit_callbacks(execute=False):  # steps are not run here, only the graph
        ticket = ticket_create(
            type_="cabling",
            title="case",
            requester=lead,
            inputs={"fabric": cabled.fabric.name, "ports": " ".join(PORTS)},
        )
        source = sorted(t.sources)[0]
        Ticket.objects.filter(pk=ticket.pk).update(state=source, data={**ticket.data, **preset})
        ticket.refresh_from_db()
        result = transition_apply(
            ticket=ticket, name=name, actor=None if t.is_system else lead, data=inputs, system=t.is_system
        )
    assert result.ticket.state == t.target
    assert [r.step for r in result.runs] == ([t.step] if t.step else [])
    assert result.ticket.is_open == (t.target not in wf.terminal)


def test_committed_diagram_is_current():
    path = Path(django_settings.BASE_DIR) / "docs" / "workflows" / "cabling.md"
    assert path.read_text() == workflow_markdown(workflow("cabling")), "run: python manage.py workflows_graph"


def test_dc_technicians_may_work_and_cancel_cabling_tickets(db):
    from workflows.services.bootstrap import groups_bootstrap

    techs = groups_bootstrap()["dc-technicians"]
    codenames = set(techs.permissions.values_list("codename", flat=True))
    assert {"cabling_work", "cabling_cancel"} <= codenames and "cabling_force_resume" not in codenames

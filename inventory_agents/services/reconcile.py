"""One report applied to the CMDB in one transaction, with the node row locked.

Order inside the transaction (the number of statements does not depend on the number of cards or ports):
lock node -> lock the cards the report can touch -> policies, open events, NICs, software -> compute in memory ->
write cards (slots cleared first, one bulk_update, one bulk_create), placements, events, NICs, software, the
node, change records, the failed-card hook for new severe events (each call in a savepoint: a receiver's error
is stored on the report, never rolls it back), the report row and the node's ingest state.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import time
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from cmdb.models import Accelerator, Node, NodeStatus
from cmdb.services.changelog import records_for_bulk, records_write, tracked_update
from cmdb.services.firmware import node_firmware_current, node_firmware_record
from cmdb.services.topology import node_topology_current, node_topology_record, topology_departures

from ..models import AgentState, AgentToken, Report, ReportStatus
from ..signals import report_applied, report_received, signal_send
from .cards import cards_reconcile, collector_signal, conflict_signal, placements_write
from .events import EventBook, events_open_load
from .health import PolicyBook
from .network import NicStep, SoftwareStep
from .normalize import Observed, Signal, host_view_empty
from .passes import QUIET_FIELDS, Pass, PendingSignal, bulk_save, has_changes
from .tokens import UNKNOWN_SERIAL_PREFIX

NODE_FACT_FIELDS = ("cpu_model", "cpu_count", "memory_gib", "os_name", "kernel", "bios_version")


def _node_facts(run: Pass) -> None:
    """Reported facts onto the node, except the fields an operator locked against the agent."""
    node, locked = run.node, set(run.node.locked_fields or [])
    for name, value in run.observed.node_facts.items():
        if name in NODE_FACT_FIELDS and name not in locked and getattr(node, name) != value:
            setattr(node, name, value)
    serial = run.observed.node_serial
    if serial and serial != node.serial and "serial" not in locked:
        if node.serial.startswith(UNKNOWN_SERIAL_PREFIX) and not Node.objects.filter(serial=serial).exists():
            node.serial = serial  # enrolled without a readable serial: the first real one is adopted
        else:
            # The node's identity is not rewritten from a report: a board swap or a wrong record, someone checks.
            conflict_signal(
                run,
                "node_serial_mismatch",
                serial,
                f"{node.hostname} reports system serial {serial}; the CMDB has {node.serial}.",
            )
    node.is_stale = False


def _collector_signals(run: Pass) -> None:
    """A failing collector is worth an event on the node (its section is not trusted for drift meanwhile)."""
    for name, error in run.observed.collector_errors.items():
        collector_signal(run, name, f"collector {name}: {error}")


def _firmware(run: Pass) -> None:
    """Store the reported firmware when it changed (no query otherwise: the row came with the node lock)."""
    components = run.observed.firmware
    if components is None:
        return  # an agent before 1.1.0, or its firmware assembly failed: the stored versions stand
    failed = frozenset(run.observed.collector_errors)
    if node_firmware_record(run.node, components, node_firmware_current(run.node), failed) is not None:
        run.summary["firmware_changed"] += 1


def _topology(run: Pass) -> None:
    """Store the reported topology when it changed (no query otherwise: the row came with the node lock), and
    raise a `topology` signal for each pair that departs from the server model's expected topology.

    A departure is put on the card named first in the pair (GPU3 -> the card at slot 3), so it is graded and
    reaches the repair workflow like a card's own signal; a pair without such a card stays on the node."""
    topology = run.observed.topology
    if topology is None:
        return  # no topology tool ran (or it failed): the stored one stands
    if node_topology_record(run.node, topology, node_topology_current(run.node)) is not None:
        run.summary["topology_changed"] += 1
    model = run.node.server_model
    departures = topology_departures(model.expected_topology if model else {}, topology)
    if not departures:
        return
    by_slot = {c.slot_index: c for c in run.node_cards if c.slot_index is not None and not c.is_missing}
    for departure in departures:
        match = re.fullmatch(r"(?:GPU|NPU|DCU|HCU)(\d+)", departure.a) or re.fullmatch(
            r"(?:GPU|NPU|DCU|HCU)(\d+)", departure.b
        )
        card = by_slot.get(int(match.group(1))) if match else None
        signal = Signal(
            "topology",
            "departure",
            f"{run.node.hostname}: {departure.message}"[:300],
            (f"topology:{departure.pair}:{departure.actual}",),
        )
        run.summary["topology_departures"] += 1
        run.signals.append(
            PendingSignal(
                signal=signal,
                vendor_id=card.model.vendor_id if card else None,
                accelerator=card,
                dedup_key="" if card else f"node:{run.node.pk}:topology:{departure.pair}"[:200],
            )
        )


def _orphan_signals(run: Pass) -> None:
    """Signals for PCI addresses no reported card has: the CMDB card at that address (often a card that fell
    off the bus and so is absent from the tool output) gets them; otherwise they stay on the node."""
    by_bus = {c.pci_bus_id: c for c in run.node_cards if c.pci_bus_id}
    for bus, signals in run.observed.orphan_signals.items():
        card = by_bus.get(bus)
        for signal in signals:
            run.signals.append(
                PendingSignal(signal=signal, vendor_id=card.model.vendor_id if card else None, accelerator=card)
            )


def _write_cards(run: Pass, new_cards: list[Accelerator]) -> None:
    """Pre-clear changing slots, one UPDATE of the changed cards (changed fields only), one UPDATE of last_seen_at
    for the cards seen unchanged, one bulk_create of the new ones."""
    pairs = [(before, obj) for before, obj in run.updated.values() if isinstance(obj, Accelerator)]
    moving = [
        obj.pk
        for before, obj in pairs
        if before.get("slot_index") is not None
        and (obj.slot_index != before.get("slot_index") or obj.node_id != before.get("node_id"))
    ]
    if moving:
        # Slots are unique per node and Postgres checks that row by row, so a swap inside one UPDATE would
        # collide: free every slot that changes hands first.
        Accelerator.objects.filter(pk__in=moving).update(slot_index=None)
    written = {obj.pk for obj in bulk_save(Accelerator, pairs, run.now, always=("last_seen_at",))}
    seen = [obj.pk for _, obj in pairs if obj.pk not in written and obj.last_seen_at == run.now]
    if seen:
        tracked_update(Accelerator.objects.filter(pk__in=seen), last_seen_at=run.now)
    if new_cards:
        Accelerator.objects.bulk_create(new_cards)
        run.created += new_cards


def _write_node(run: Pass, before: dict[str, Any], health: str) -> None:
    node = run.node
    node.health = health
    fields = {name: getattr(node, name) for name in (*NODE_FACT_FIELDS, "serial", "is_stale", "health")}
    changed = has_changes(before, node)
    if changed:
        node.version += 1
        run.updated[id(node)] = (before, node)
    Node.objects.filter(pk=node.pk).update(
        **fields, last_seen_at=run.now, **({"version": F("version") + 1, "updated_at": run.now} if changed else {})
    )


def _records(run: Pass, correlation_id: str) -> int:
    updated = [(before, obj) for before, obj in run.updated.values() if has_changes(before, obj)]
    records = records_for_bulk(created=run.created, updated=updated, reason=f"agent report {correlation_id}")
    kept = []
    for record in records:
        if record.action == "update":
            record.changes = {k: v for k, v in record.changes.items() if k not in QUIET_FIELDS}
            if not record.changes:
                continue
        kept.append(record)
    return records_write(kept)


def report_apply(
    *,
    node_id: int,
    observed: Observed,
    report: Report,
    token: AgentToken | None,
    now: dt.datetime | None = None,
    started: float | None = None,
) -> dict[str, int]:
    """Reconcile `observed` into the CMDB for node `node_id`; store `report` (status applied). Returns the summary.
    A report older than the last applied one (checked under the lock) is stored as superseded, nothing applied.

    Runs in one transaction under a row lock of the node, so concurrent reports of one node apply one after the
    other and the second sees the first's result. Raises on database errors (the caller retries transient ones).
    """
    now = now or timezone.now()
    with transaction.atomic():
        node = (
            Node.objects.select_for_update(of=("self",))
            .select_related("server_model", "topology", "firmware")
            .get(pk=node_id)
        )
        # Read after the lock, in its own statement: a report that waited for the lock must see the state the
        # previous one committed (a row joined into the locking query would come from the older snapshot).
        state = AgentState.objects.filter(node_id=node_id).first()
        if report_is_superseded(state, observed):
            # The check before the lock saw an older state: a newer report of this node committed while this one
            # waited. Applying it now would move the CMDB (and last_collected_at) backwards.
            report.status = ReportStatus.SUPERSEDED
            report.save(force_insert=True)
            return {}
        run = Pass(
            node=node,
            observed=observed,
            now=now,
            policies=PolicyBook.load(),
            known_fingerprints=frozenset(state.signal_fingerprints if state else []),
        )
        node_before = node.snapshot()
        _node_facts(run)
        new_cards = cards_reconcile(run)
        _topology(run)
        _firmware(run)
        _orphan_signals(run)
        _collector_signals(run)
        book = EventBook(run, events_open_load(run, [c.pk for c in run.node_cards if c.pk]))
        book.health()  # before the card write, so each card is written once with its final health
        _write_cards(run, new_cards)
        placements_write(run, new_cards)
        book.apply()  # events need card ids
        book.write()
        nic_step = NicStep(run)
        nic_step.reconcile()
        nic_step.write()
        SoftwareStep(run).reconcile_and_write()
        _write_node(run, node_before, book.node_health())
        if run.invalidate_nodes:
            AgentState.objects.filter(node_id__in=run.invalidate_nodes).update(last_hash="")
        run.summary["records"] = _records(run, report.correlation_id)
        # Before the report row, so a receiver's failure is stored on it (the hook runs in a savepoint).
        report.errors = book.hooks_call(report.correlation_id)

        report.status = ReportStatus.APPLIED
        report.summary = dict(run.summary)
        report.duration_ms = int((time.monotonic() - started) * 1000) if started is not None else 0
        report.save(force_insert=True)
        state_values = {
            "last_hash": observed.digest,
            "last_full_at": now,
            "last_report": report,
            "last_collected_at": observed.collected_at,
            "agent_version": observed.agent_version,
            "signal_fingerprints": book.fingerprints_to_remember(),
            "host_view_empty": host_view_empty(observed),
        }
        if state is None:
            AgentState.objects.create(node_id=node.pk, reports_applied=1, **state_values)
        else:
            AgentState.objects.filter(pk=node.pk).update(reports_applied=F("reports_applied") + 1, **state_values)
        if token is not None:
            tracked_update(AgentToken.objects.filter(pk=token.pk), last_used_at=now)
        signal_send(
            report_applied,
            node=node,
            report_id=report.id,
            observed=observed,
            # Nothing for discovery in this report nor in the last one: no host view to replace or resolve.
            host_view_still_empty=bool(state is not None and state.host_view_empty and state_values["host_view_empty"]),
        )
        transaction.on_commit(functools.partial(signal_send, report_received, node=node, status="applied"))
    return dict(run.summary)


def report_is_superseded(state: AgentState | None, observed: Observed) -> bool:
    """Is `observed` older than the last applied report of its node (a spool replay, or the loser of a race)?"""
    return bool(
        state is not None
        and state.last_collected_at
        and observed.collected_at
        and observed.collected_at < state.last_collected_at
    )


def node_status_allows_reports(node: Node) -> bool:
    """Decommissioned nodes keep their history frozen; their agent is refused (403)."""
    return node.status != NodeStatus.DECOMMISSIONED

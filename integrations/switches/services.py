"""Discovery services: poll switches and write what they report into the CMDB and the observation tables.

`switch_snapshot_apply` is the transaction boundary for one switch: it locks the switch row, upserts its
SwitchPorts in bulk with change records for what changed, and replaces its LLDP observations (records for the
observations that appeared, disappeared or changed: `observations.observations_sync`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from cmdb.models import Switch, SwitchPort
from cmdb.models.network import SwitchStatus
from cmdb.services.changelog import records_for_bulk, records_write, tracked_bulk_update
from gpuops.context import ChangeSource, change_context
from integrations.exceptions import IntegrationError, PermanentError
from integrations.ports import SnmpCredential, SnmpPoller, SnmpTarget, SwitchPortInfo, SwitchSnapshot

from .credentials import snmp_credential_resolve
from .models import ObservationSource, ObservedLink, PollRun, PollStatus
from .observations import observations_remove, observations_sync

log = logging.getLogger(__name__)

DEFAULT_POLLER = "integrations.switches.snmp.PysnmpPoller"
PORT_FIELDS = ("description", "speed_mbps", "admin_state", "oper_state", "mac")


def snmp_poller_get() -> SnmpPoller:
    """The configured SnmpPoller (settings.GPUOPS_SNMP_POLLER, a dotted path; the pysnmp adapter by default)."""
    path = getattr(settings, "GPUOPS_SNMP_POLLER", DEFAULT_POLLER)
    return import_string(path)(concurrency=getattr(settings, "GPUOPS_SNMP_CONCURRENCY", 32))


def snmp_target_for(
    switch: Switch,
    *,
    credential: SnmpCredential | None = None,
    port: int = 161,
    timeout_s: float = 2.0,
    retries: int = 1,
) -> SnmpTarget:
    if not switch.mgmt_ip:
        raise PermanentError(f"switch {switch.name} has no mgmt_ip")
    cred = credential or snmp_credential_resolve(switch.snmp_credential_ref)
    return SnmpTarget(host=switch.mgmt_ip, port=port, credential=cred, timeout_s=timeout_s, retries=retries)


@dataclass(frozen=True)
class PortApplyCounts:
    seen: int
    created: int
    updated: int


def _port_values(info: SwitchPortInfo) -> dict[str, object]:
    return {
        "description": info.alias[:200],
        "speed_mbps": info.speed_mbps,
        "admin_state": info.admin_state,
        "oper_state": info.oper_state,
        "mac": info.mac,
    }


def _ports_upsert(switch: Switch, ports: Iterable[SwitchPortInfo], *, reason: str) -> PortApplyCounts:
    # select_related: the change records need str(port), which reads port.switch (one query per port otherwise).
    existing = {p.name: p for p in SwitchPort.objects.filter(switch=switch).select_related("switch")}
    now = timezone.now()
    created: list[SwitchPort] = []
    updated: list[tuple[dict, SwitchPort]] = []
    seen = 0
    for info in ports:
        current = existing.get(info.name)
        if current is None and not info.is_physical:
            continue  # VLAN interfaces, loopbacks, docker0: not cable ends, not CMDB ports
        seen += 1
        values = _port_values(info)
        if current is None:
            created.append(SwitchPort(switch=switch, name=info.name[:64], **values))
            continue
        if all(getattr(current, k) == v for k, v in values.items()):
            continue
        before = current.snapshot()
        for key, value in values.items():
            setattr(current, key, value)
        current.version += 1
        current.updated_at = now
        updated.append((before, current))
    # Bulk paths bypass the change-record signals by design: records_for_bulk/records_write stand in for them.
    SwitchPort.objects.bulk_create(created, batch_size=500)
    # record=False: the records of the created and the updated ports go in the one INSERT below.
    tracked_bulk_update(updated, [*PORT_FIELDS, "version", "updated_at"], batch_size=500, record=False)
    records_write(records_for_bulk(created=created, updated=updated, reason=reason))
    for _, obj in updated:
        obj.mark_saved()
    return PortApplyCounts(seen=seen, created=len(created), updated=len(updated))


def _switch_facts_fill(switch: Switch, snapshot: SwitchSnapshot) -> None:
    """Fill blank model/serial from the device. Never overwrite: a differing serial means the CMDB record and
    the box disagree (an RMA swap, a wrong IP) - a person decides, so we only log it."""
    changed = False
    sysinfo = snapshot.system
    if sysinfo.model and not switch.model_name:
        switch.model_name = sysinfo.model[:100]
        changed = True
    if sysinfo.serial:
        if not switch.serial:
            if not Switch.objects.filter(serial=sysinfo.serial).exclude(pk=switch.pk).exists():
                switch.serial = sysinfo.serial[:100]
                changed = True
        elif switch.serial != sysinfo.serial:
            log.warning("switch %s: CMDB serial %s, device reports %s", switch.name, switch.serial, sysinfo.serial)
    if changed:
        switch.save()  # single-row save: the signal writes the change record


def _observations_replace(switch: Switch, snapshot: SwitchSnapshot, run: PollRun) -> int:
    """Make the switch's LLDP observations this poll's neighbours, with change records for the difference."""
    ports = {p.name: p for p in SwitchPort.objects.filter(switch=switch)}
    for port in ports.values():
        port.switch = switch  # str(port) in change records without a query
    old = {}
    for row in ObservedLink.objects.filter(switch=switch, source=ObservationSource.LLDP).select_related("switch_port"):
        row.switch = switch
        if row.switch_port_id:
            row.switch_port.switch = switch
        old[(row.local_port, row.remote_chassis_id, row.remote_port)] = row
    wanted: dict[tuple[str, str, str], ObservedLink] = {}
    for nb in snapshot.lldp_neighbors:
        key = (nb.local_port[:64], nb.remote_chassis_id[:64], nb.remote_port[:128])
        wanted.setdefault(
            key,
            ObservedLink(
                source=ObservationSource.LLDP,
                switch=switch,
                switch_port=ports.get(nb.local_port),
                local_device=switch.name,
                local_port=key[0],
                remote_chassis_id=key[1],
                remote_port=key[2],
                remote_system=nb.remote_system[:253],
                remote_port_description=nb.remote_port_description[:253],
                poll_run=run,
            ),
        )
    reason = f"SNMP poll #{run.pk}"
    # Rows another switch left under this name (it was renamed, the name reused) would collide on the unique key.
    stale = list(
        ObservedLink.objects.filter(source=ObservationSource.LLDP, local_device=switch.name).exclude(switch=switch)
    )
    observations_remove(stale, reason=reason)
    # Kept rows keep first_seen_at; last_seen_at and the run say this poll confirmed them. A renamed switch or a
    # port that reached the CMDB since re-resolves the row silently; a neighbour announcing itself differently
    # is an update record.
    observations_sync(
        old=old,
        wanted=wanted,
        reason=reason,
        resolution=("local_device", "switch_port"),
        announced=("remote_system", "remote_port_description"),
        touch={"poll_run": run},
    )
    return len(snapshot.lldp_neighbors)


def switch_snapshot_apply(*, switch: Switch, snapshot: SwitchSnapshot, run: PollRun) -> PollRun:
    """Write one poll's result: SwitchPorts (bulk, with change records), blank facts, observed LLDP links (with
    change records for what appeared, disappeared or changed), and the run's counters.

    Records carry the INTEGRATION source; their correlation id is the run's task id when a worker polled, else
    the caller's (a management command's run, a workflow step's ticket)."""
    with change_context(source=ChangeSource.INTEGRATION, correlation_id=run.task_id or None), transaction.atomic():
        # Lock the switch so two overlapping polls of it (beat + a manual run) serialise instead of racing.
        locked = Switch.objects.select_for_update().get(pk=switch.pk)
        counts = _ports_upsert(locked, snapshot.ports, reason=f"SNMP poll #{run.pk}")
        _switch_facts_fill(locked, snapshot)
        neighbors = _observations_replace(locked, snapshot, run)
        run.status = PollStatus.OK
        run.finished_at = timezone.now()
        run.ports_seen, run.ports_created, run.ports_updated = counts.seen, counts.created, counts.updated
        run.neighbors_seen = neighbors
        run.save()
    return run


def _run_fail(run: PollRun, exc: Exception) -> PollRun:
    run.status = PollStatus.FAILED
    run.error = str(exc)[:2000]
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def switch_poll(
    switch: Switch, *, poller: SnmpPoller | None = None, target: SnmpTarget | None = None, task_id: str = ""
) -> PollRun:
    """Poll one switch and apply the result. Returns the PollRun (failed runs keep the error text); the
    adapter's TransientError/PermanentError is re-raised after the run is recorded, so callers can retry."""
    run = PollRun.objects.create(switch=switch, kind="snmp", task_id=task_id)
    try:
        target = target or snmp_target_for(switch)
        snapshot = (poller or snmp_poller_get()).poll(target)
    except IntegrationError as exc:
        _run_fail(run, exc)
        raise
    return switch_snapshot_apply(switch=switch, snapshot=snapshot, run=run)


def switches_poll_all(
    *, poller: SnmpPoller | None = None, switches: Sequence[Switch] | None = None, task_id: str = ""
) -> list[PollRun]:
    """Poll every active switch with a mgmt IP and a credential reference, concurrently (the poller bounds
    how many at once), and apply each result in its own transaction: one bad switch fails only its run."""
    if switches is None:
        switches = list(
            Switch.objects.filter(status=SwitchStatus.ACTIVE, mgmt_ip__isnull=False).exclude(snmp_credential_ref="")
        )
    runs: list[PollRun] = []
    targets: list[SnmpTarget] = []
    polled: list[tuple[Switch, PollRun]] = []
    for switch in switches:
        run = PollRun.objects.create(switch=switch, kind="snmp", task_id=task_id)
        runs.append(run)
        try:
            targets.append(snmp_target_for(switch))
        except IntegrationError as exc:
            _run_fail(run, exc)
            continue
        polled.append((switch, run))
    results = (poller or snmp_poller_get()).poll_many(targets) if targets else []
    for (switch, run), result in zip(polled, results, strict=True):
        if isinstance(result, Exception):
            _run_fail(run, result)
            continue
        try:
            switch_snapshot_apply(switch=switch, snapshot=result, run=run)
        except Exception as exc:  # one switch's bad data must not stop the sweep
            log.exception("applying the poll of %s failed", switch.name)
            _run_fail(run, exc)
    return runs

"""Provisioning services: one function per step of bringing a `received` node to `active`, plus rollback.

    assign position -> plan links -> (operator confirms cabling) -> configure switch ports -> OS install
    -> baseline driver -> burn-in -> join the cluster

The provisioning ticket (workflows/definitions/provisioning.py) calls these from its automated steps, each
through the step context's `effect` (database) or `external` (adapters) so a retried step never repeats one.
Every function records what it changed on the ProvisioningRun; `provisioning_rollback_*` undo exactly that.
Each raises ProvisioningError with a reason an operator can act on.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from cmdb.models import (
    Accelerator,
    AcceleratorLifecycle,
    Cluster,
    DriverPackage,
    FabricKind,
    InstalledSoftware,
    Link,
    LinkStatus,
    Node,
    NodeStatus,
    Rack,
)
from cmdb.services.nodes import nodes_set_status
from cmdb.services.topology import node_topology_check
from gpuops.context import new_correlation_id
from integrations.exceptions import PermanentError
from integrations.executors import command_render, executor_get
from integrations.os_install import OsInstallJob, OsInstallRequest, os_installer_get
from integrations.ports import CliTarget, ConfigDiff, ConfigPushResult, PortConfig, SwitchConfigurator
from inventory_agents.services.liveness import cards_last_seen

from ..conf import rollouts_setting
from ..locks import LockOwner, node_locks_acquire, node_locks_release
from ..models import ProvisioningRun, ProvisioningStatus
from .placement import PlacementError, fabric_for, links_plan, links_remove, position_assign, position_release


class ProvisioningError(Exception):
    """A step cannot go on; the message says why and what a person can do."""


# --- create -------------------------------------------------------------------------------------------------------


@transaction.atomic
def provisioning_create(
    *,
    node: Node,
    ticket: Any = None,
    rack: Rack | None = None,
    position: int | None = None,
    cluster: Cluster | None = None,
    os_image: str = "",
    fabric_id: int | None = None,
    actor: Any = None,
) -> ProvisioningRun:
    """Open a provisioning run for a `received` node and lock the node for it."""
    locked = Node.objects.select_for_update().get(pk=node.pk)
    if locked.status != NodeStatus.RECEIVED:
        raise ProvisioningError(f"{locked} is {locked.get_status_display().lower()}; provisioning starts from received")
    if rack is not None and rack.room.site_id != locked.site_id:
        raise ProvisioningError(f"rack {rack} is not in {locked}'s site {locked.site}")
    if cluster is not None and cluster.site_id != locked.site_id:
        raise ProvisioningError(f"cluster {cluster} is not at {locked}'s site {locked.site}")
    try:
        with transaction.atomic():
            run = ProvisioningRun.objects.create(
                ticket=ticket,
                node=locked,
                hostname=locked.hostname,
                cluster=cluster,
                options={
                    "rack_id": rack.pk if rack else None,
                    "position": position,
                    "os_image": os_image,
                    "fabric_id": fabric_id,
                },
                correlation_id=getattr(ticket, "correlation_id", "") or new_correlation_id(),
                created_by=actor if getattr(actor, "is_authenticated", False) else None,
            )
    except IntegrityError as exc:
        raise ProvisioningError(f"{locked} already has an open provisioning run") from exc
    held = node_locks_acquire(
        node_ids=[locked.pk], owner=LockOwner(run.lock_key, run.label, run.ticket_id), reason=f"provisioning {locked}"
    )
    if held:
        raise ProvisioningError(f"{locked} is locked by another open change: {held[locked.pk]}")
    return run


def provisioning_for_ticket(ticket_id: int) -> ProvisioningRun:
    """The ticket's run, with what the steps read joined in."""
    return ProvisioningRun.objects.select_related(
        "node__server_model__accelerator_model__vendor", "node__site", "cluster", "rack", "ticket"
    ).get(ticket_id=ticket_id)


def _node(run: ProvisioningRun) -> Node:
    if run.node is None:
        raise ProvisioningError(f"{run.hostname} no longer exists in the CMDB")
    return run.node


def provisioning_mark(
    run: ProvisioningRun, *, step: str, status: str = ProvisioningStatus.RUNNING, error: str = ""
) -> None:
    """Record where the run is (the panel shows it)."""
    ProvisioningRun.objects.filter(pk=run.pk).update(
        current_step=step, status=status, error=error[:4000], updated_at=timezone.now()
    )


# --- 1. rack position ---------------------------------------------------------------------------------------------


def provisioning_position(run: ProvisioningRun) -> dict[str, Any]:
    """Assign a rack position (free U, power budget) and mark the node `provisioning`."""
    node = _node(run)
    rack = (
        Rack.objects.select_related("room").filter(pk=run.options.get("rack_id")).first()
        if run.options.get("rack_id")
        else None
    )
    try:
        chosen = position_assign(node, rack=rack, position=run.options.get("position"), cluster_id=run.cluster_id)
    except PlacementError as exc:
        raise ProvisioningError(str(exc)) from exc
    ProvisioningRun.objects.filter(pk=run.pk).update(rack_id=chosen.rack_id, position=chosen.position, face=chosen.face)
    nodes_set_status(node_ids=[node.pk], status=NodeStatus.PROVISIONING, reason=f"{run.label}: provisioning")
    return {
        "rack": chosen.rack_label,
        "position": chosen.position,
        "face": chosen.face,
        "power_after_kw": str(chosen.power_after_kw),
        "power_budget_kw": str(chosen.power_budget_kw),
    }


# --- 2. planned links ---------------------------------------------------------------------------------------------


def provisioning_links(run: ProvisioningRun) -> dict[str, Any]:
    """Plan the links of the node's HCAs from the fabric's rail design."""
    node = Node.objects.get(pk=_node(run).pk)  # fresh: the rack was just assigned
    try:
        fabric = fabric_for(node, cluster_id=run.cluster_id, fabric_id=run.options.get("fabric_id"))
        planned = links_plan(node, fabric=fabric)
    except PlacementError as exc:
        raise ProvisioningError(str(exc)) from exc
    ids = sorted(set(run.planned_link_ids) | set(planned.created))
    ProvisioningRun.objects.filter(pk=run.pk).update(planned_link_ids=ids)
    run.planned_link_ids = ids
    return {
        "fabric": planned.fabric,
        "created": planned.created,
        "existing": planned.existing,
        "scalable_unit": planned.scalable_unit,
        "hcas_created": planned.hcas_created,
    }


def provisioning_cabling_confirmed(run: ProvisioningRun) -> int:
    """The technician confirmed the cables: the planned links become connected. Returns how many."""
    count = 0
    for link in Link.objects.filter(pk__in=run.planned_link_ids, status=LinkStatus.PLANNED):
        link.status = LinkStatus.CONNECTED
        link.save(update_fields=["status", "updated_at", "version"])
        count += 1
    return count


# --- 3. switch ports ----------------------------------------------------------------------------------------------

_configurator_override: SwitchConfigurator | None = None
_configurators: dict[str, SwitchConfigurator] = {}


def switch_configurator_get() -> SwitchConfigurator:
    """The configured SwitchConfigurator (integrations.ports), one instance per process; tests override it."""
    if _configurator_override is not None:
        return _configurator_override
    path = rollouts_setting("SWITCH_CONFIGURATOR")
    if path not in _configurators:
        _configurators[path] = import_string(path)(**rollouts_setting("SWITCH_CONFIGURATOR_OPTIONS"))
    return _configurators[path]


def switch_configurator_override(configurator: SwitchConfigurator | None) -> None:
    """Install a configurator for tests (None restores the configured one)."""
    global _configurator_override
    _configurator_override = configurator


def cli_target_for(switch: Any) -> CliTarget:
    """How to reach a switch's CLI; the credential is resolved from its reference at call time."""
    username = password = key_file = ""
    if switch.cli_credential_ref:
        from integrations.switches.credentials import cli_credential_resolve

        cred = cli_credential_resolve(switch.cli_credential_ref)
        username, password, key_file = cred.username, cred.password, cred.key_file
    return CliTarget(
        host=switch.mgmt_ip or switch.name,
        platform=switch.platform,
        username=username,
        password=password,
        key_file=key_file,
    )


def _push_json(switch_name: str, result: ConfigPushResult) -> dict[str, Any]:
    d = result.diff
    return {
        "switch": switch_name,
        "interface": d.interface,
        "before": list(d.before),
        "after": list(d.after),
        "commands": list(d.commands),
        "unified": d.unified,
        "applied": result.applied,
        "verified": result.verified,
        "rollback_commands": list(result.rollback_commands),
        "problems": list(result.problems),
    }


def port_config_for(link: Link, hostname: str) -> PortConfig | None:
    """The wanted state of the leaf port of `link`, from the fabric: None when provisioning leaves the port alone.

    RoCE / Ethernet: description `<host>:<hca>`, enabled, MTU (SWITCH_PORT_FABRICS[fabric]["mtu"], else
    SWITCH_PORT_MTU[fabric kind]) and the access VLAN where SWITCH_PORT_FABRICS names one. InfiniBand: the subnet
    manager owns the port; only a PKey named in SWITCH_PORT_FABRICS is asked for. The CMDB holds no VLAN, PKey or
    wanted MTU per fabric (SwitchPort.mtu is what discovery saw), hence the settings. Raises ProvisioningError for
    a setting that does not apply to the fabric's kind (a VLAN on InfiniBand, a PKey on Ethernet).
    """
    fabric, port = link.fabric, link.b_switch_port
    wanted = dict(rollouts_setting("SWITCH_PORT_FABRICS").get(fabric.name) or {})
    unknown = sorted(set(wanted) - {"vlan", "mtu", "pkey"})
    is_ib = fabric.kind == FabricKind.INFINIBAND
    wrong = unknown + [k for k in (("vlan", "mtu") if is_ib else ("pkey",)) if wanted.get(k) is not None]
    if wrong:
        raise ProvisioningError(
            f"SWITCH_PORT_FABRICS[{fabric.name!r}] sets {', '.join(wrong)}, which does not apply "
            f"to a {fabric.get_kind_display()} fabric's switch ports; fix the setting"
        )
    if is_ib:
        pkey = wanted.get("pkey")
        return PortConfig(interface=port.name, pkey=str(pkey)) if pkey else None
    nic = link.a_nic_port.nic if link.a_nic_port_id else None
    mtu = wanted.get("mtu") or rollouts_setting("SWITCH_PORT_MTU").get(fabric.kind)
    vlan = wanted.get("vlan")
    return PortConfig(
        interface=port.name,
        description=f"{hostname}:{nic.name if nic else '?'}"[:80],
        enabled=True,
        mtu=int(mtu) if mtu else None,
        vlan=int(vlan) if vlan else None,
    )


def _port_key(entry: dict[str, Any]) -> tuple[str, str]:
    return entry["switch"], entry["interface"]


@transaction.atomic
def _port_record(run: ProvisioningRun, entry: dict[str, Any]) -> dict[str, Any]:
    """Remember durably that a port was changed (or re-checked), before anything else can fail.

    One entry per port. A port already recorded keeps the lines of its first push (`before`, `rollback_commands`:
    the port as it was before provisioning touched it); a later push only updates whether it verified."""
    locked = ProvisioningRun.objects.select_for_update().get(pk=run.pk)
    ports = list(locked.configured_ports)
    for i, old in enumerate(ports):
        if _port_key(old) == _port_key(entry):
            keep = {k: old[k] for k in ("before", "commands", "unified", "rollback_commands") if old.get("applied")}
            ports[i] = entry = {**entry, **keep, "applied": bool(old.get("applied") or entry.get("applied"))}
            break
    else:
        ports.append(entry)
    ProvisioningRun.objects.filter(pk=run.pk).update(configured_ports=ports)
    run.configured_ports = ports
    return entry


def _port_recorded(run: ProvisioningRun, switch: str, interface: str) -> dict[str, Any] | None:
    ports = ProvisioningRun.objects.filter(pk=run.pk).values_list("configured_ports", flat=True).first() or []
    return next((p for p in ports if _port_key(p) == (switch, interface)), None)


def provisioning_port_configure(run: ProvisioningRun, link_id: int) -> dict[str, Any]:
    """Push the leaf port config of one of the node's links (see `port_config_for`); returns the push with its
    diff and rollback lines.

    A port the push changed is recorded on the run before its verification is looked at, so a rollback restores
    every port touched, including one whose verification failed. A port recorded as changed and verified by an
    earlier attempt is not pushed again. With SWITCH_CONFIG_DRY_RUN the push only shows the diff: nothing changes,
    nothing is recorded (a rollback has nothing to restore) and the result's `outcome` says "dry run: nothing
    pushed".
    """
    link = Link.objects.select_related("fabric", "b_switch_port__switch", "a_nic_port__nic").get(pk=link_id)
    switch, port = link.b_switch_port.switch, link.b_switch_port
    change = port_config_for(link, run.hostname)
    if change is None:
        return {"switch": switch.name, "interface": port.name, "skipped": "InfiniBand: the subnet manager owns it"}
    recorded = _port_recorded(run, switch.name, port.name)
    if recorded and recorded.get("verified"):
        return {**recorded, "already_done": True}
    dry_run = bool(rollouts_setting("SWITCH_CONFIG_DRY_RUN"))
    try:
        result = switch_configurator_get().push(cli_target_for(switch), change, dry_run=dry_run)
    except PermanentError as exc:
        raise ProvisioningError(f"{switch} {port.name}: {exc}") from exc
    # Said in the result (the step effect's record), so a dry run is never read as a configured port.
    outcome = "dry run: nothing pushed" if dry_run else "pushed" if result.applied else "already right"
    if dry_run and not run.options.get("switch_config_dry_run"):
        # Kept on the run so the ticket, the node page and the progress say "dry run - nothing changed".
        options = {**run.options, "switch_config_dry_run": True}
        ProvisioningRun.objects.filter(pk=run.pk).update(options=options)
        run.options = options
    pushed = {**_push_json(switch.name, result), "link_id": link_id, "dry_run": dry_run, "outcome": outcome}
    if result.applied or recorded:
        pushed = _port_record(run, pushed)
    if result.applied and not result.verified:
        raise ProvisioningError(
            f"{switch} {port.name}: pushed but the running config differs: {'; '.join(result.problems)}"
        )
    return pushed


def provisioning_node_links(run: ProvisioningRun) -> list[int]:
    """Every link of the node's NIC ports (planned now or cabled before)."""
    return list(Link.objects.filter(a_nic_port__nic__node_id=run.node_id).order_by("pk").values_list("pk", flat=True))


def provisioning_ports_rollback(run: ProvisioningRun, pushed: dict[str, Any]) -> dict[str, Any]:
    """Re-apply the lines a push replaced, and note on the run's entry whether the port is as it was."""
    from cmdb.models import Switch

    if not pushed.get("applied"):
        return {"switch": pushed.get("switch"), "interface": pushed.get("interface"), "restored": "nothing pushed"}
    switch = Switch.objects.get(name=pushed["switch"])
    diff = ConfigDiff(
        interface=pushed["interface"],
        before=tuple(pushed["before"]),
        after=tuple(pushed["after"]),
        commands=tuple(pushed["commands"]),
        unified=pushed["unified"],
    )
    result = switch_configurator_get().rollback(
        cli_target_for(switch),
        ConfigPushResult(diff=diff, applied=True, verified=True, rollback_commands=tuple(pushed["rollback_commands"])),
    )
    _port_record(run, {**pushed, "restored": result.verified, "restore_problems": list(result.problems)})
    return {
        "switch": switch.name,
        "interface": diff.interface,
        "restored": result.verified,
        "problems": list(result.problems),
    }


# --- 4. OS install ------------------------------------------------------------------------------------------------


def os_image_for(run: ProvisioningRun) -> str:
    if run.options.get("os_image"):
        return run.options["os_image"]
    node = _node(run)
    model = node.server_model.accelerator_model
    vendor = model.vendor.slug if model else ""
    images = rollouts_setting("OS_IMAGES")
    return images.get(vendor) or images.get("default", "")


def provisioning_os_start(run: ProvisioningRun, *, callback_url: str = "") -> dict[str, Any]:
    """Hand the node to the OS install system (idempotent by the run's key)."""
    from cmdb.models import NicPort

    node = _node(run)
    macs = tuple(m for m in NicPort.objects.filter(nic__node=node).exclude(mac="").values_list("mac", flat=True))
    job = os_installer_get().start(
        OsInstallRequest(
            hostname=node.hostname,
            serial=node.serial,
            image=os_image_for(run),
            bmc_address=node.bmc_address or "",
            macs=macs,
            callback_url=callback_url,
            idempotency_key=f"{run.lock_key}:os",
        )
    )
    _os_record(run, job)
    return {"ref": job.ref, "status": job.status, "message": job.message}


def _os_record(run: ProvisioningRun, job: OsInstallJob) -> None:
    ProvisioningRun.objects.filter(pk=run.pk).update(
        os_install_ref=job.ref, os_install_status=job.status, os_install_message=job.message[:500]
    )
    run.os_install_ref, run.os_install_status, run.os_install_message = job.ref, job.status, job.message[:500]


def provisioning_os_poll(run: ProvisioningRun) -> OsInstallJob:
    """The job's status: what a callback recorded if it finished, else asked of the install system."""
    if run.os_install_status in ("succeeded", "failed", "cancelled"):
        return OsInstallJob(ref=run.os_install_ref, status=run.os_install_status, message=run.os_install_message)
    job = os_installer_get().status(run.os_install_ref)
    _os_record(run, job)
    return job


def os_event_key(run_id: int) -> str:
    """The event the OS install step waits on; the callback view signals it."""
    return f"provisioning:{run_id}:os"


def os_install_callback_record(*, ref: str, status: str, message: str = "") -> ProvisioningRun | None:
    """A (verified) callback from the install system: record the status and wake the waiting step."""
    from integrations.os_install import JOB_STATUSES

    if status not in JOB_STATUSES:
        raise ProvisioningError(f"unknown install status {status!r}")
    with transaction.atomic():
        run = ProvisioningRun.objects.select_for_update().filter(os_install_ref=ref, is_open=True).first()
        if run is None:
            return None
        run.os_install_status, run.os_install_message = status, message[:500]
        run.save(update_fields=["os_install_status", "os_install_message", "updated_at"])
        if run.ticket_id:
            from workflows.runner import runs_wake_for_event

            runs_wake_for_event(os_event_key(run.pk))
    return run


# --- 5. baseline driver -------------------------------------------------------------------------------------------


def baseline_packages(run: ProvisioningRun) -> list[DriverPackage]:
    """The driver packages a new node gets: BASELINE_DRIVERS for its vendor, else the version most nodes of the
    target cluster run, else the newest package of the vendor's driver component that supports its cards."""
    node = _node(run)
    model = node.server_model.accelerator_model
    if model is None:
        raise ProvisioningError(f"{node}'s server model has no accelerator model: no baseline driver to choose")
    vendor = model.vendor.slug
    configured = rollouts_setting("BASELINE_DRIVERS").get(vendor)
    if configured:
        out = []
        for component, version in configured:
            package = DriverPackage.objects.filter(component=component, version=version).first()
            if package is None:
                raise ProvisioningError(f"BASELINE_DRIVERS names {component} {version}, which is not in the CMDB")
            out.append(package)
        return out
    component = rollouts_setting("DRIVER_COMPONENTS").get(vendor)
    if not component:
        raise ProvisioningError(f"no driver component configured for vendor {vendor} (DRIVER_COMPONENTS)")
    compatible = DriverPackage.objects.filter(component=component, supported_models=model)
    if run.cluster_id:
        versions = Counter(
            InstalledSoftware.objects.filter(node__cluster_id=run.cluster_id, component=component).values_list(
                "version", flat=True
            )
        )
        for version, _count in versions.most_common():
            package = compatible.filter(version=version).first()
            if package is not None:
                return [package]
    newest = sorted(
        compatible,
        key=lambda p: [int(x) if x.isdigit() else x for x in p.version.replace("-", ".").split(".")],
        reverse=True,
    )
    if not newest:
        raise ProvisioningError(f"no {component} package supports {model}")
    return [newest[0]]


def provisioning_driver_install(run: ProvisioningRun, package_id: int) -> dict[str, Any]:
    """Run one baseline package's install command on the node through the executor."""
    from ..node_steps import exec_target

    package = DriverPackage.objects.get(pk=package_id)
    command = command_render(
        package.install_command, version=package.version, previous_version="", component=package.component
    )
    result = executor_get().run(
        exec_target(_node(run)), command, timeout_s=float(rollouts_setting("COMMAND_TIMEOUT_SECONDS"))
    )
    if not result.ok:
        raise ProvisioningError(f"{package}: {result.summary()}")
    baseline = [b for b in run.baseline if b[0] != package.component] + [[package.component, package.version]]
    # A dry-run executor installed nothing: burn-in then cannot expect the agent to report these versions.
    options = {**run.options, "driver_dry_run": bool(result.dry_run)}
    ProvisioningRun.objects.filter(pk=run.pk).update(baseline=baseline, options=options)
    run.baseline, run.options = baseline, options
    return {"package": str(package), "command": command, "summary": result.summary(), "dry_run": result.dry_run}


# --- 6. burn-in ---------------------------------------------------------------------------------------------------


def burn_in_problems(
    run: ProvisioningRun, *, since: dt.datetime, check_versions: bool = True, notes: list[str] | None = None
) -> list[str]:
    """What a fresh agent report does not show yet: every expected card (the server model's slots) present,
    seen since `since` and healthy, the baseline driver versions installed, and the topology the server model
    expects (cmdb.services.topology.node_topology_check: each departing pair named). What was not checked (a
    model without an expected topology) is appended to `notes`."""
    node = Node.objects.select_related("server_model", "topology").get(pk=_node(run).pk)
    problems = []
    if node.last_seen_at is None or node.last_seen_at <= since:
        return ["no agent report yet"]
    cards = list(Accelerator.objects.filter(node=node, lifecycle=AcceleratorLifecycle.INSTALLED, is_missing=False))
    expected = node.server_model.accelerator_slots or len(cards)
    if len(cards) < expected:
        problems.append(f"{len(cards)} of {expected} cards reported")
    seen = cards_last_seen(node, cards)
    stale = [c.serial or str(c.pk) for c in cards if seen[c.pk] is None or seen[c.pk] <= since]
    if stale:
        problems.append(f"not seen in the latest report: {', '.join(stale[:8])}")
    sick = [f"{c.serial} ({c.health})" for c in cards if c.health != "ok"]
    if sick:
        problems.append(f"not healthy: {', '.join(sick[:8])}")
    if check_versions:
        installed = dict(InstalledSoftware.objects.filter(node=node).values_list("component", "version"))
        wrong = [f"{c} {installed.get(c, 'absent')} (want {v})" for c, v in run.baseline if installed.get(c) != v]
        if wrong:
            problems.append(f"driver: {', '.join(wrong)}")
    topology = node_topology_check(node)
    problems.extend(topology.problems)
    if topology.note and notes is not None:
        notes.append(topology.note)
    return problems


# --- 7. join ------------------------------------------------------------------------------------------------------


@transaction.atomic
def provisioning_join(run: ProvisioningRun) -> dict[str, Any]:
    """Put the node into its cluster and service: cluster set, status active, lock released, run done."""
    node = Node.objects.select_for_update().get(pk=_node(run).pk)
    if run.cluster_id and node.cluster_id != run.cluster_id:
        node.cluster_id = run.cluster_id
        node.save(update_fields=["cluster", "updated_at", "version"])
    nodes_set_status(node_ids=[node.pk], status=NodeStatus.ACTIVE, reason=f"{run.label}: provisioned")
    node_locks_release(owner_key=run.lock_key)
    ProvisioningRun.objects.filter(pk=run.pk).update(
        status=ProvisioningStatus.DONE, is_open=False, current_step="", error="", finished_at=timezone.now()
    )
    return {"cluster": run.cluster.name if run.cluster else "", "status": NodeStatus.ACTIVE}


# --- rollback -----------------------------------------------------------------------------------------------------


def provisioning_os_cancel(run: ProvisioningRun) -> dict[str, Any]:
    if not run.os_install_ref or run.os_install_status in ("succeeded", "failed", "cancelled"):
        return {"cancelled": False}
    try:
        os_installer_get().cancel(run.os_install_ref)
    except PermanentError as exc:
        return {"cancelled": False, "error": str(exc)}
    return {"cancelled": True}


@transaction.atomic
def provisioning_undo_cmdb(run: ProvisioningRun) -> dict[str, Any]:
    """Remove the planned links, release the rack position, put the node back to `received`, release the lock,
    close the run. Each part checks it still has something of ours to undo (idempotent)."""
    node = run.node
    removed = links_remove(run.planned_link_ids)
    released = False
    if node is not None and run.rack_id and run.position:
        released = position_release(node, rack_id=run.rack_id, position=run.position)
    if node is not None:
        nodes_set_status(node_ids=[node.pk], status=NodeStatus.RECEIVED, reason=f"{run.label}: rolled back")
    node_locks_release(owner_key=run.lock_key)
    ProvisioningRun.objects.filter(pk=run.pk).update(
        status=ProvisioningStatus.ROLLED_BACK, is_open=False, planned_link_ids=[], finished_at=timezone.now()
    )
    return {"links_removed": removed, "position_released": released}


def provisioning_cancel(run: ProvisioningRun) -> None:
    """Close a run that never started (the ticket was cancelled)."""
    node_locks_release(owner_key=run.lock_key)
    ProvisioningRun.objects.filter(pk=run.pk).update(
        status=ProvisioningStatus.CANCELLED, is_open=False, finished_at=timezone.now()
    )


__all__ = [
    "ProvisioningError",
    "baseline_packages",
    "burn_in_problems",
    "cli_target_for",
    "os_event_key",
    "os_image_for",
    "os_install_callback_record",
    "port_config_for",
    "provisioning_cabling_confirmed",
    "provisioning_cancel",
    "provisioning_create",
    "provisioning_driver_install",
    "provisioning_for_ticket",
    "provisioning_join",
    "provisioning_links",
    "provisioning_mark",
    "provisioning_node_links",
    "provisioning_os_cancel",
    "provisioning_os_poll",
    "provisioning_os_start",
    "provisioning_port_configure",
    "provisioning_ports_rollback",
    "provisioning_position",
    "provisioning_undo_cmdb",
    "switch_configurator_get",
    "switch_configurator_override",
]

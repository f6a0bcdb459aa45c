"""CMDB Celery tasks: thin wrappers that load by id, set the change context and call one service."""

from __future__ import annotations

from celery import shared_task

from gpuops.context import ChangeSource, change_context


@shared_task(name="cmdb.nodes_set_status", acks_late=True, ignore_result=True)
def nodes_set_status_task(node_ids: list[int], status: str, reason: str = "", correlation_id: str = "") -> int:
    """Set the lifecycle status of many nodes (idempotent: nodes already in `status` are left alone)."""
    from .services.nodes import nodes_set_status

    with change_context(source=ChangeSource.SYSTEM, correlation_id=correlation_id or None):
        return nodes_set_status(node_ids=node_ids, status=status, reason=reason)


@shared_task(name="cmdb.reservations_expire", acks_late=True, ignore_result=True)
def reservations_expire_task() -> int:
    """Release spare reservations that were never issued (beat: every 10 minutes)."""
    from .services.stock import reservations_expire

    with change_context(source=ChangeSource.SYSTEM):
        return reservations_expire()


@shared_task(name="cmdb.directory_sync", acks_late=True, ignore_result=True)
def directory_sync_task() -> int:
    """Hold LDAP accounts against the directory between sign-ons (beat, when LDAP is on). Returns how many were
    deactivated; an unreachable directory is logged and changes nothing (the next run tries again)."""
    import logging

    import ldap

    from .signon.ldap import ldap_accounts_sync

    with change_context(source=ChangeSource.SYSTEM):
        try:
            return len(ldap_accounts_sync().disabled)
        except ldap.LDAPError as exc:
            logging.getLogger("gpuops.security").warning("directory sync: the directory could not be read: %s", exc)
            return 0


@shared_task(name="cmdb.capacity_rollup", acks_late=True, ignore_result=True)
def capacity_rollup_task(months: int = 2) -> int:
    """Card-hours of the current and the previous month from the history (beat: hourly). Idempotent: each run
    replaces what the last one wrote. Returns the CardHours rows written."""
    from .services.capacity import capacity_rollup

    return capacity_rollup(months=months).rows

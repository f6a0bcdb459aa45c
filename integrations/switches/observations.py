"""Replace one observer's observations with what it reports now, writing change records for the difference.

Every discovery path goes through `observations_sync`: an SNMP poll (a switch's LLDP table), an ibnetdiscover
sweep (one subnet's InfiniBand ports) and an applied agent report (a node's lldpd). Rows are matched by the
caller's key - the observer's port and the neighbour's chassis id + port id - so a cable seen again keeps its
row, id and first_seen_at. ObservedLink is not a TrackedModel (every poll touches it), so its history is written
here: a record for each observation that appeared or disappeared, and for each whose announced facts changed
(the neighbour now calls itself another name). Re-resolving a row (which CMDB port it points at, a new LID) is
saved without a record: what the observer sees did not change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from cmdb.models.history import ChangeAction, ChangeRecord
from cmdb.services.changelog import record_build, records_write

from .models import ObservedLink

# What a record shows of an observation (empty values are left out), plus the CMDB ports it resolved to.
RECORD_FIELDS = (
    "local_device",
    "local_port",
    "remote_system",
    "remote_chassis_id",
    "remote_port",
    "remote_port_description",
    "remote_port_guid",
)
CHUNK = 900  # ids per `pk IN (...)`: stays under SQLite's bound-parameter limit on fabric-wide sweeps


@dataclass(frozen=True)
class SyncResult:
    created: int = 0
    removed: int = 0
    updated: int = 0  # seen again with changed announced facts (each with a record)
    kept: int = 0  # seen again (updated or not)


def _label(row: ObservedLink, name: str) -> str:
    """str() of a related object the row already holds; '' when unset or not loaded (never a query per row)."""
    field = ObservedLink._meta.get_field(name)
    if getattr(row, field.attname) is None or not field.is_cached(row):
        return ""
    return str(getattr(row, name))


def observation_facts(row: ObservedLink) -> dict[str, Any]:
    facts: dict[str, Any] = {name: getattr(row, name) for name in RECORD_FIELDS}
    facts["switch_port"] = _label(row, "switch_port") or _label(row, "switch")
    facts["nic_port"] = _label(row, "nic_port")
    return facts


def _record(row: ObservedLink, action: str, reason: str, changes: dict[str, list[Any]] | None = None) -> ChangeRecord:
    if changes is None:
        facts = observation_facts(row)
        changes = {k: [None, v] if action == ChangeAction.CREATE else [v, None] for k, v in facts.items() if v}
    return record_build(obj=row, action=action, changes=changes, reason=reason)


def _value(row: ObservedLink, name: str) -> Any:
    return getattr(row, ObservedLink._meta.get_field(name).attname)


def _copy(row: ObservedLink, new: ObservedLink, name: str) -> None:
    field = ObservedLink._meta.get_field(name)
    if field.is_relation and not field.is_cached(new):
        setattr(row, field.attname, getattr(new, field.attname))  # the id only: reading the object would query
    else:
        setattr(row, name, getattr(new, name))


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def observations_remove(rows: Sequence[ObservedLink], *, reason: str) -> int:
    """Delete rows, with a record each."""
    records_write([_record(row, ChangeAction.DELETE, reason) for row in rows])
    for ids in _chunks([row.pk for row in rows]):
        ObservedLink.objects.filter(pk__in=ids).delete()
    return len(rows)


def observations_sync(
    *,
    old: Mapping[Any, ObservedLink],
    wanted: Mapping[Any, ObservedLink],
    reason: str,
    resolution: Sequence[str],
    announced: Sequence[str] = (),
    touch: Mapping[str, Any] | None = None,
) -> SyncResult:
    """Make the observer's rows `old` exactly the unsaved rows `wanted` (both by the same key).

    Call inside the caller's transaction, holding the observer's lock (the switch or node row), under the change
    context the records should carry. `announced` fields changing on a kept row write an update record;
    `resolution` fields are refreshed silently; `touch` (plus last_seen_at) is set on every kept row. Changes
    nothing but last_seen_at (and `touch`) when `wanted` is what `old` already holds.
    """
    now = timezone.now()
    touch = {**(touch or {}), "last_seen_at": now}
    removed: list[ObservedLink] = []
    confirmed: list[int] = []
    refreshed: list[ObservedLink] = []
    records: list[ChangeRecord] = []
    for key, row in old.items():
        new = wanted.get(key)
        if new is None:
            removed.append(row)
            continue
        changes = {n: [_value(row, n), _value(new, n)] for n in announced if _value(row, n) != _value(new, n)}
        if not changes and all(_value(row, n) == _value(new, n) for n in resolution):
            confirmed.append(row.pk)
            continue
        for name in (*announced, *resolution):
            _copy(row, new, name)
        for name, value in touch.items():
            setattr(row, name, value)
        refreshed.append(row)
        if changes:
            records.append(_record(row, ChangeAction.UPDATE, reason, changes))
    created = [row for key, row in wanted.items() if key not in old]

    observations_remove(removed, reason=reason)
    for ids in _chunks(confirmed):
        ObservedLink.objects.filter(pk__in=ids).update(**touch)
    if refreshed:
        ObservedLink.objects.bulk_update(refreshed, [*announced, *resolution, *touch], batch_size=500)
    # Primary keys come back from the INSERT (PostgreSQL, SQLite >= 3.35): the records below need them.
    ObservedLink.objects.bulk_create(created, batch_size=1000)
    records += [_record(row, ChangeAction.CREATE, reason) for row in created]
    records_write(records)
    return SyncResult(
        created=len(created),
        removed=len(removed),
        updated=sum(r.action == ChangeAction.UPDATE for r in records),
        kept=len(confirmed) + len(refreshed),
    )

"""Writing the change history.

Single-row saves and deletes of TrackedModel subclasses are recorded by the signal receivers wired in
CmdbConfig.ready() (so the admin, the API, workflows and scripts can never forget). Bulk paths
(bulk_create / bulk_update / queryset.update) bypass signals by design: they go through `tracked_update` /
`tracked_bulk_update` below, which write the statement and its records (one INSERT). Nothing else calls
update() / bulk_update() on a tracked model (tests/test_tracked_writes.py scans the source for it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import connection, models
from django.db.models import F, QuerySet
from django.db.models.expressions import Combinable
from django.utils import timezone

from gpuops.context import current_context

from .. import hooks
from ..models.base import TrackedModel
from ..models.history import ChangeAction, ChangeRecord


def _diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, list[Any]]:
    before = before or {}
    after = after or {}
    keys = after.keys() | before.keys()
    return {k: [before.get(k), after.get(k)] for k in sorted(keys) if before.get(k) != after.get(k)}


def _actor_fields() -> dict[str, Any]:
    ctx = current_context()
    actor_id = ctx.actor_id
    return {
        "actor_id": actor_id,
        "actor_repr": str(ctx.actor)[:150] if actor_id else "",
        "source": ctx.source,
        "correlation_id": ctx.correlation_id,
    }


_REPR_ATTR = "_gpuops_change_repr"


def remember_repr(obj: models.Model) -> None:
    """Keep str(obj) for the delete record while the related rows its str() reads still exist."""
    setattr(obj, _REPR_ATTR, str(obj)[:300])


def record_build(
    *, obj: models.Model, action: str, changes: dict[str, list[Any]], reason: str = "", at=None
) -> ChangeRecord:
    """An unsaved ChangeRecord for `obj` under the current change context."""
    return ChangeRecord(
        at=at or timezone.now(),
        content_type=ContentType.objects.get_for_model(obj.__class__),
        object_id=obj.pk,
        object_repr=getattr(obj, _REPR_ATTR, None) or str(obj)[:300],
        action=action,
        changes=changes,
        reason=reason,
        **_actor_fields(),
    )


def record_save(instance: TrackedModel, *, created: bool) -> ChangeRecord | None:
    """Record a create or update; an update that changed no tracked field writes nothing."""
    after = instance.snapshot()
    if created:
        changes = _diff(None, after)
        action = ChangeAction.CREATE
    else:
        before = instance.loaded_snapshot()
        if before is None:
            # Saved without being loaded first (e.g. constructed with a pk): we cannot know the before.
            before = {}
        changes = _diff({k: v for k, v in before.items() if k in after}, after)
        if not changes:
            return None
        action = ChangeAction.UPDATE
    record = record_build(obj=instance, action=action, changes=changes)
    record.save()
    hooks.changes_recorded()
    instance.mark_saved()
    return record


def record_delete(instance: TrackedModel) -> ChangeRecord:
    record = record_build(obj=instance, action=ChangeAction.DELETE, changes=_diff(instance.snapshot(), None))
    record.save()
    hooks.changes_recorded()
    return record


def records_for_bulk(
    *,
    created: Iterable[TrackedModel] = (),
    updated: Iterable[tuple[dict[str, Any], TrackedModel]] = (),
    deleted: Iterable[TrackedModel] = (),
    reason: str = "",
) -> list[ChangeRecord]:
    """Build (not save) the records for a bulk operation. `updated` pairs a before-snapshot with the object."""
    now = timezone.now()
    records: list[ChangeRecord] = []
    for obj in created:
        records.append(
            record_build(
                obj=obj, action=ChangeAction.CREATE, changes=_diff(None, obj.snapshot()), reason=reason, at=now
            )
        )
    for before, obj in updated:
        after = obj.snapshot()
        changes = _diff({k: v for k, v in before.items() if k in after}, after)
        if changes:
            records.append(record_build(obj=obj, action=ChangeAction.UPDATE, changes=changes, reason=reason, at=now))
    for obj in deleted:
        records.append(
            record_build(
                obj=obj, action=ChangeAction.DELETE, changes=_diff(obj.snapshot(), None), reason=reason, at=now
            )
        )
    return records


#: from this many records on, PostgreSQL gets them through COPY (a fleet import writes hundreds of thousands)
COPY_FROM = 1000


def records_write(records: list[ChangeRecord]) -> int:
    """Write records in one bulk INSERT (batched for very large imports; COPY on PostgreSQL for large batches,
    several times faster than Django building multi-row INSERTs). The records get no primary keys back."""
    if records:
        if len(records) >= COPY_FROM and connection.vendor == "postgresql":
            _records_copy(records)
        else:
            ChangeRecord.objects.bulk_create(records, batch_size=2000)
        hooks.changes_recorded()
    return len(records)


def _records_copy(records: list[ChangeRecord]) -> None:
    # id and txid come from the column defaults, as with INSERT.
    fields = [f for f in ChangeRecord._meta.concrete_fields if f.column not in ("id", "txid")]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(ChangeRecord._meta.db_table)
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for record in records:
            copy.write_row([f.get_db_prep_save(getattr(record, f.attname), connection) for f in fields])


def changes_for(obj: models.Model):
    """The history of one object, newest first (a selector, used by the admin and the API)."""
    return ChangeRecord.objects.filter(
        content_type=ContentType.objects.get_for_model(obj.__class__), object_id=obj.pk
    ).select_related("actor")


# Stamps, not facts: a write of only these (an agent's heartbeat, a token's last use) records nothing and bumps
# no version, as the agent's cheap "unchanged" path always did.
LIVENESS_FIELDS = frozenset({"last_seen_at", "last_used_at", "uses"})


def tracked_update(
    queryset: QuerySet, *, reason: str = "", objs: Sequence[TrackedModel] | None = None, **values: Any
) -> int:
    """`queryset.update(**values)` for a tracked model, recorded: the rows' before-snapshots, one UPDATE (with
    `version + 1` and `updated_at` where the model has them), one INSERT of change records.

    `objs`: the rows already loaded (and locked) by the caller, saving the SELECT; they get the new values.
    Values are plain values (an expression cannot be diffed), except for liveness-only writes.
    Returns how many rows were updated.
    """
    model = queryset.model
    if set(values) <= LIVENESS_FIELDS | model.change_log_exclude:
        return queryset.update(**values)
    if any(isinstance(v, Combinable) for v in values.values()):
        raise TypeError("tracked_update records plain values; compute them first.")
    rows = list(objs) if objs is not None else list(queryset.select_for_update().order_by("pk"))
    if not rows:
        return 0
    befores = [(obj.snapshot(), obj) for obj in rows]
    extra: dict[str, Any] = {}
    if model.has_row_version() and "version" not in values:
        extra["version"] = F("version") + 1
    if "updated_at" not in values and any(f.name == "updated_at" for f in model._meta.concrete_fields):
        extra["updated_at"] = timezone.now()
    for obj in rows:
        for name, value in values.items():
            setattr(obj, name, value)
    # The caller's queryset, narrowed to the snapshotted rows: its conditions still guard the UPDATE.
    count = queryset.filter(pk__in=[obj.pk for obj in rows]).update(**values, **extra)
    records_write(records_for_bulk(updated=befores, reason=reason))
    for obj in rows:
        if "version" in extra:
            obj.version += 1  # what the F() wrote, so the objects stay usable
        if "updated_at" in extra:
            obj.updated_at = extra["updated_at"]
    return count


def tracked_bulk_update(
    updated: Sequence[tuple[dict[str, Any], TrackedModel]],
    fields: Sequence[str],
    *,
    reason: str = "",
    batch_size: int | None = None,
    record: bool = True,
) -> int:
    """`bulk_update` of (before-snapshot, object) pairs of one tracked model, recorded in one INSERT.

    The version is bumped (and `updated_at` stamped) here unless `fields` names them (the caller did).
    `record=False` only for a pass that writes these objects' records itself later in the same transaction
    (ingestion gathers every record of a report into one INSERT).
    """
    if not updated:
        return 0
    objs = [obj for _, obj in updated]
    model = type(objs[0])
    names = list(fields)
    if model.has_row_version() and "version" not in names:
        for obj in objs:
            obj.version += 1
        names.append("version")
    if "updated_at" not in names and any(f.name == "updated_at" for f in model._meta.concrete_fields):
        now = timezone.now()
        for obj in objs:
            obj.updated_at = now
        names.append("updated_at")
    count = model._default_manager.bulk_update(objs, names, batch_size=batch_size)
    if record:
        records_write(records_for_bulk(updated=updated, reason=reason))
    return count

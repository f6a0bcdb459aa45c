"""Writing the change history.

Single-row saves and deletes of TrackedModel subclasses are recorded by the signal receivers wired in
CmdbConfig.ready() (so the admin, the API, workflows and scripts can never forget). Bulk paths
(bulk_create / bulk_update / queryset.update) bypass signals by design and call `records_for_bulk` +
`records_write` to write their records in one INSERT.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.utils import timezone

from gpuops.context import current_context

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
    instance.mark_saved()
    return record


def record_delete(instance: TrackedModel) -> ChangeRecord:
    record = record_build(obj=instance, action=ChangeAction.DELETE, changes=_diff(instance.snapshot(), None))
    record.save()
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
        records.append(record_build(obj=obj, action=ChangeAction.CREATE, changes=_diff(None, obj.snapshot()),
                                    reason=reason, at=now))
    for before, obj in updated:
        after = obj.snapshot()
        changes = _diff({k: v for k, v in before.items() if k in after}, after)
        if changes:
            records.append(record_build(obj=obj, action=ChangeAction.UPDATE, changes=changes, reason=reason, at=now))
    for obj in deleted:
        records.append(record_build(obj=obj, action=ChangeAction.DELETE, changes=_diff(obj.snapshot(), None),
                                    reason=reason, at=now))
    return records


def records_write(records: list[ChangeRecord]) -> int:
    """Write records in one bulk INSERT (batched for very large imports)."""
    if records:
        ChangeRecord.objects.bulk_create(records, batch_size=2000)
    return len(records)


def changes_for(obj: models.Model):
    """The history of one object, newest first (a selector, used by the admin and the API)."""
    return ChangeRecord.objects.filter(
        content_type=ContentType.objects.get_for_model(obj.__class__), object_id=obj.pk
    ).select_related("actor")

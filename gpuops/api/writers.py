"""How validated API rows become database writes.

A writer receives rows already validated field by field by the serializer, applies them to model instances,
validates them as a batch (model rules, check constraints, uniqueness), and writes them:

- one row: `save()` / `delete()` per object, so model signals run as for any other write path;
- many rows: `bulk_create` / `bulk_update` (a fixed number of statements per batch), with `after_bulk_*` hooks
  where apps write what signals would have written (change records, derived rows).

Apps subclass ModelWriter per model where a write must go through a domain service.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models, transaction
from django.db.models import Model
from django.utils import timezone
from rest_framework.request import Request

from ..rowversion import has_row_version
from .exceptions import _as_field_errors
from .validation import Errors, check_constraints, check_unique


class RowErrors(Exception):
    """Validation errors keyed by row index; the view turns them into a 400 (naming the row when bulk)."""

    def __init__(self, errors: Errors) -> None:
        super().__init__(errors)
        self.errors = errors


@dataclass
class Row:
    """One row of a write: the instance (new or locked from the database) and what the client sent."""

    index: int
    instance: Model
    data: dict[str, Any]
    m2m: dict[str, list[Model]] = field(default_factory=dict)
    before: dict[str, Any] | None = None
    is_new: bool = True
    #: fields a writer set besides the ones the client sent (e.g. a card's site, following its node)
    touched: set[str] = field(default_factory=set)

    @property
    def changed(self) -> set[str]:
        """Names of the concrete fields this row sets."""
        return set(self.data) | self.touched


class ModelWriter:
    """Generic writer: plain ORM writes, batch validation, bulk statements for many rows."""

    #: messages for check constraints, by constraint name (the default names the constraint, not the rule)
    constraint_messages: dict[str, str] = {}
    #: bulk statements are split into batches of this size
    batch_size = 1000

    def __init__(self, model: type[Model], *, request: Request | None = None) -> None:
        self.model = model
        self.request = request
        self._m2m_names = {f.name for f in model._meta.many_to_many}

    # --- building ------------------------------------------------------------------------------------------

    def row(self, index: int, data: dict[str, Any], instance: Model | None = None) -> Row:
        data = dict(data)
        if has_row_version(self.model):
            data.pop("version", None)  # a precondition, checked by the view, never written
        m2m = {name: list(data.pop(name)) for name in list(data) if name in self._m2m_names}
        if instance is None:
            instance = self.model(**data)
            return Row(index=index, instance=instance, data=data, m2m=m2m, is_new=True)
        before = instance.snapshot() if hasattr(instance, "snapshot") else None
        for name, value in data.items():
            setattr(instance, name, value)
        return Row(index=index, instance=instance, data=data, m2m=m2m, before=before, is_new=False)

    # --- validation ----------------------------------------------------------------------------------------

    def validate(self, rows: Sequence[Row], *, bulk: bool) -> None:
        """Raise RowErrors when any row breaks a model rule; called inside the write's transaction."""
        errors: Errors = {}
        self.clean_rows(rows, errors, bulk=bulk)
        pairs = [(r.index, r.instance) for r in rows]
        check_constraints(self.model, pairs, errors, self.constraint_messages)
        check_unique(self.model, pairs, errors)
        if errors:
            raise RowErrors(errors)

    def clean_rows(self, rows: Sequence[Row], errors: Errors, *, bulk: bool) -> None:
        """Run the model's own clean() on each row (models without one cost nothing)."""
        if type(rows[0].instance).clean is Model.clean:
            return
        for row in rows:
            try:
                row.instance.clean()
            except DjangoValidationError as exc:
                for name, messages in _as_field_errors(exc).items():
                    errors.setdefault(row.index, {}).setdefault(name, []).extend(messages)

    # --- writing -------------------------------------------------------------------------------------------

    def create(self, rows: Sequence[Row], *, bulk: bool) -> list[Model]:
        if not bulk:
            row = rows[0]
            self.save_one(row)
            self.set_m2m([row])
            return [row.instance]
        objs = self.model._default_manager.bulk_create([r.instance for r in rows], batch_size=self.batch_size)
        for row, obj in zip(rows, objs, strict=True):
            row.instance = obj
        self.set_m2m(rows)
        self.after_bulk_create(rows)
        return [r.instance for r in rows]

    def update(self, rows: Sequence[Row], *, bulk: bool) -> list[Model]:
        if not bulk:
            row = rows[0]
            self.save_one(row)
            self.set_m2m([row])
            return [row.instance]
        names = sorted({name for r in rows for name in r.changed})
        update_fields = self.bulk_update_fields(rows, names)
        if update_fields:
            self.model._default_manager.bulk_update(
                [r.instance for r in rows], update_fields, batch_size=self.batch_size
            )
        self.set_m2m(rows)
        self.after_bulk_update(rows)
        return [r.instance for r in rows]

    def delete(self, instances: Sequence[Model], *, bulk: bool) -> None:
        # Deleting runs Django's collector per object either way: cascades and PROTECT checks need it.
        for idx, obj in enumerate(instances):
            try:
                with transaction.atomic():
                    obj.delete()
            except (models.ProtectedError, models.RestrictedError) as exc:
                if bulk:
                    exc.row = idx  # type: ignore[attr-defined]
                raise

    def save_one(self, row: Row) -> None:
        row.instance.save()

    def bulk_update_fields(self, rows: Sequence[Row], names: list[str]) -> list[str]:
        """The columns the bulk UPDATE writes; auto_now columns are stamped here (bulk_update skips save())."""
        fields = [n for n in names if n not in self._m2m_names]
        if not fields:
            return []
        now = timezone.now()
        for f in self.model._meta.concrete_fields:
            if getattr(f, "auto_now", False):
                fields.append(f.name)
                for r in rows:
                    setattr(r.instance, f.attname, now)
        return fields

    def set_m2m(self, rows: Sequence[Row]) -> None:
        """Replace the many-to-many sets the rows carry: one DELETE and one INSERT per relation."""
        for name in self._m2m_names:
            carrying = [r for r in rows if name in r.m2m]
            if not carrying:
                continue
            relation = self.model._meta.get_field(name)
            through = relation.remote_field.through
            source = relation.m2m_field_name()
            target = relation.m2m_reverse_field_name()
            ids = [r.instance.pk for r in carrying]
            through._default_manager.filter(**{f"{source}_id__in": ids}).delete()
            through._default_manager.bulk_create(
                [
                    through(**{f"{source}_id": r.instance.pk, f"{target}_id": target_obj.pk})
                    for r in carrying
                    for target_obj in {t.pk: t for t in r.m2m[name]}.values()
                ],
                batch_size=self.batch_size,
            )

    def after_bulk_create(self, rows: Sequence[Row]) -> None:
        """Hook: what signals would have done for each row (bulk_create sends none)."""

    def after_bulk_update(self, rows: Sequence[Row]) -> None:
        """Hook: what signals would have done for each row (bulk_update sends none)."""

"""Base classes shared by every CMDB model: timestamps, a version for optimistic concurrency, and the
snapshot that change records diff against."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any, ClassVar

from django.db import models

from gpuops.rowversion import has_row_version


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


class TrackedModel(models.Model):
    """A model whose every create, update and delete becomes a ChangeRecord.

    Loaded rows remember the values they were read with (cheaply: the raw tuple from the database), so the
    change log can store the before/after of each changed field without another query. `version` grows by
    one on each tracked save; the API turns it into an ETag for optimistic concurrency.
    """

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    version = models.PositiveIntegerField(default=1, editable=False)

    # Fields whose changes are noise in the history.
    change_log_exclude: ClassVar[frozenset[str]] = frozenset({"created_at", "updated_at", "version"})

    class Meta:
        abstract = True

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        instance._loaded_values = (tuple(field_names), tuple(values))
        return instance

    @classmethod
    def has_row_version(cls) -> bool:
        """Whether `version` is the integer row version (a few models use `version` for a software version)."""
        return has_row_version(cls)

    @classmethod
    def tracked_field_names(cls) -> list[str]:
        exclude = cls.change_log_exclude if cls.has_row_version() else cls.change_log_exclude - {"version"}
        return [f.attname for f in cls._meta.concrete_fields if f.attname not in exclude and not f.primary_key]

    def snapshot(self) -> dict[str, Any]:
        """The current in-memory values of the tracked fields, as JSON values."""
        return {name: _jsonable(getattr(self, name)) for name in self.tracked_field_names() if name in self.__dict__}

    def loaded_snapshot(self) -> dict[str, Any] | None:
        """The values this row had when it was read from the database, or None for a new object."""
        loaded = getattr(self, "_loaded_values", None)
        if loaded is None:
            return None
        names, values = loaded
        tracked = set(self.tracked_field_names())
        # from_db receives values after the database converters ran, so they are Python values already.
        return {name: _jsonable(value) for name, value in zip(names, values, strict=False) if name in tracked}

    def mark_saved(self) -> None:
        """After a save, the in-memory values become the new baseline for the next diff."""
        names = tuple(f.attname for f in self._meta.concrete_fields)
        self._loaded_values = (names, tuple(getattr(self, n) for n in names))

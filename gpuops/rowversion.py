"""Which models carry an integer row version (optimistic concurrency: ETags, 412s, `version + 1` per save)."""

from __future__ import annotations

from django.core.exceptions import FieldDoesNotExist
from django.db import models


def has_row_version(model: type[models.Model]) -> bool:
    """Whether `model.version` is the integer row version rather than a domain field that happens to be called
    `version` (a driver package's version string)."""
    try:
        field = model._meta.get_field("version")
    except FieldDoesNotExist:
        return False
    return isinstance(field, models.IntegerField) and not field.editable

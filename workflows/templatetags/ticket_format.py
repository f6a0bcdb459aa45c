"""Filters of the ticket pages."""

from __future__ import annotations

import datetime as dt

from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def iso_datetime(value: object) -> dt.datetime | None:
    """An ISO 8601 string kept in ticket.data -> a datetime (in the current time zone) for the `date` filter."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return timezone.localtime(parsed) if timezone.is_aware(parsed) else parsed

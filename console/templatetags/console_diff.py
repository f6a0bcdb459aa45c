"""Template filters of the console's object pages: diff values and the colour of a state."""

from __future__ import annotations

from typing import Any

from django import template

from ..history import value_text

register = template.Library()

# Badge tones of workflows/static/workflows/app.css for the CMDB's states.
_TONES = {
    "ok": "done",
    "active": "done",
    "installed": "done",
    "connected": "done",
    "up": "done",
    "applied": "done",
    "degraded": "waiting",
    "draining": "waiting",
    "maintenance": "waiting",
    "provisioning": "active",
    "burn_in": "active",
    "in_transit": "active",
    "in_stock": "active",
    "warning": "waiting",
    "mismatch": "rejected",
    "failed": "rejected",
    "critical": "rejected",
    "rma": "rejected",
    "down": "rejected",
    "rejected": "rejected",
    "decommissioned": "cancelled",
    "scrapped": "cancelled",
    "superseded": "cancelled",
}


@register.filter
def diff_value(value: Any) -> str:
    """A before/after value of a change record as text (∅ for none, JSON for structures, truncated)."""
    return value_text(value)


@register.filter
def tone(value: Any) -> str:
    """The badge tone for a status, health, lifecycle or link state value."""
    return _TONES.get(str(value or ""), "new")


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    """`mapping[key]`, or '' when absent (templates cannot index a dict by a variable)."""
    try:
        return mapping.get(key, "")
    except AttributeError:
        return ""

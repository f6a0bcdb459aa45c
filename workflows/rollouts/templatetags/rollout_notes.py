"""Template tags of the rollout panels: the ticket page's "dry run - nothing changed" lines, rendered with the
page (not only in the panel htmx loads), so a dry run is said even where scripts are off."""

from __future__ import annotations

from typing import Any

from django import template

from ..selectors import ticket_dry_run_notes as _ticket_dry_run_notes

register = template.Library()


@register.simple_tag
def ticket_dry_run_notes(ticket: Any) -> list[str]:
    return _ticket_dry_run_notes(ticket)

"""Picks the notifiers from settings; tests install a fake with `override`.

A notification goes through every notifier of "NOTIFIERS" (dotted paths), the chat channels of the ticket's team
("TEAM_CHAT_CHANNELS" -> "CHAT_CHANNELS", path `chat:<channel>`), and the outbound webhook subscriptions
("TICKET_WEBHOOKS"). Each path becomes its own outbox row and task, so a retry never re-sends through a
notifier that succeeded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from django.utils.module_loading import import_string

from ..conf import integrations_setting
from ..exceptions import PermanentError
from .base import Notifier

OVERRIDE_PATH = "override"
CHAT_PREFIX = "chat:"
SUBSCRIPTIONS_PATH = "integrations.webhooks.notifier.SubscriptionsNotifier"
_override: Notifier | None = None
_cache: dict[str, Notifier] = {}


def _config() -> tuple[list[str], dict[str, dict[str, Any]]]:
    return list(integrations_setting("NOTIFIERS")), integrations_setting("NOTIFIER_OPTIONS")


TeamArg = str | Callable[[], str | None] | None


def chat_channels_for(team: TeamArg) -> list[str]:
    """The chat channel names of a team (the ticket's assignee group), then those for every ticket ("*").
    `team` may be a callable, called only when some team has channels (it may cost a query)."""
    routes: dict[str, list[str]] = integrations_setting("TEAM_CHAT_CHANNELS")
    if callable(team):
        team = team() if set(routes) - {"*"} else None
    names = [*(routes.get(team, []) if team else []), *routes.get("*", [])]
    return list(dict.fromkeys(names))


def notifier_paths(team: TeamArg = None) -> list[str]:
    """The notifiers one ticket notification goes through (what the outbox rows and tasks carry)."""
    if _override is not None:
        return [OVERRIDE_PATH]
    paths = _config()[0] + [CHAT_PREFIX + name for name in chat_channels_for(team)]
    if integrations_setting("TICKET_WEBHOOKS"):
        paths.append(SUBSCRIPTIONS_PATH)
    return paths


def _build(path: str) -> Notifier:
    if path.startswith(CHAT_PREFIX):
        name = path.removeprefix(CHAT_PREFIX)
        channel = integrations_setting("CHAT_CHANNELS").get(name)
        if not channel:
            raise PermanentError(f"chat channel {name!r} is not configured (CHAT_CHANNELS)")
        return import_string(channel["adapter"])(**channel.get("options", {}))
    return import_string(path)(**_config()[1].get(path, {}))


def notifier_get(path: str) -> Notifier:
    if _override is not None:
        return _override
    if path not in _cache:
        _cache[path] = _build(path)
    return _cache[path]


@contextlib.contextmanager
def override(notifier: Notifier) -> Iterator[Notifier]:
    """Send every notification through `notifier` inside the block (tests)."""
    global _override
    previous, _override = _override, notifier
    try:
        yield notifier
    finally:
        _override = previous


def cache_clear() -> None:
    _cache.clear()


__all__ = ["CHAT_PREFIX", "cache_clear", "chat_channels_for", "notifier_get", "notifier_paths", "override"]

"""Picks the notifiers from settings (integrations.conf "NOTIFIERS"); tests install a fake with `override`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.utils.module_loading import import_string

from ..conf import integrations_setting
from .base import Notifier

OVERRIDE_PATH = "override"
_override: Notifier | None = None
_cache: dict[str, Notifier] = {}


def _config() -> tuple[list[str], dict[str, dict[str, Any]]]:
    return list(integrations_setting("NOTIFIERS")), integrations_setting("NOTIFIER_OPTIONS")


def notifier_paths() -> list[str]:
    """The configured notifiers, by dotted path (what notification tasks carry)."""
    return [OVERRIDE_PATH] if _override is not None else _config()[0]


def notifier_get(path: str) -> Notifier:
    if _override is not None:
        return _override
    if path not in _cache:
        _cache[path] = import_string(path)(**_config()[1].get(path, {}))
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


__all__ = ["cache_clear", "notifier_get", "notifier_paths", "override"]

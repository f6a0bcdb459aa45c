"""Notifier adapters (email, webhook, noop, fake) behind the `Notifier` protocol."""

from .base import Notification, Notifier
from .registry import notifier_get, notifier_paths, override

__all__ = ["Notification", "Notifier", "notifier_get", "notifier_paths", "override"]

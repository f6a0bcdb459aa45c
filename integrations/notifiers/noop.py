"""A notifier that logs instead of sending."""

from __future__ import annotations

import logging

from .base import Notification

logger = logging.getLogger(__name__)


class NoopNotifier:
    def send(self, notification: Notification) -> None:
        logger.info("notification (noop) %s: %s", notification.event, notification.subject)


__all__ = ["NoopNotifier"]

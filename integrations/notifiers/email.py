"""Email through Django's mail backend (console in the demo, SMTP in production)."""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.core.mail import send_mail

from integrations.exceptions import PermanentError, TransientError

from .base import Notification


class EmailNotifier:
    """Mails the notification's recipients; a notification without recipients is skipped."""

    def __init__(self, *, from_email: str = "", subject_prefix: str = "[gpuops] ") -> None:
        self.from_email = from_email or getattr(settings, "DEFAULT_FROM_EMAIL", "gpuops@localhost")
        self.subject_prefix = subject_prefix

    def send(self, notification: Notification) -> None:
        if not notification.recipients:
            return
        body = notification.body + (f"\n\n{notification.url}" if notification.url else "")
        try:
            send_mail(
                self.subject_prefix + notification.subject,
                body,
                self.from_email,
                list(notification.recipients),
                fail_silently=False,
            )
        except (smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused, smtplib.SMTPAuthenticationError) as exc:
            raise PermanentError(f"mail refused: {exc}", peer="smtp") from exc
        except (TimeoutError, smtplib.SMTPException, ConnectionError, OSError) as exc:
            raise TransientError(f"mail not sent: {exc}", peer="smtp") from exc


__all__ = ["EmailNotifier"]

"""Make sure an admin user exists; print how to log in."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the 'admin' superuser if missing (password from GPUOPS_ADMIN_PASSWORD or generated once)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default=os.environ.get("GPUOPS_ADMIN_USER", "admin"))

    def handle(self, *args, username: str, **options) -> None:
        User = get_user_model()
        password_file = settings.VAR_DIR / "admin-password"
        user = User.objects.filter(username=username).first()
        if user is None:
            password = os.environ.get("GPUOPS_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            User.objects.create_superuser(username=username, email=f"{username}@localhost", password=password)
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)
            self.stdout.write(f"Created superuser {username!r}.")
        if password_file.exists():
            self.stdout.write(
                f"Log in as {username!r} with the password in {password_file}: {password_file.read_text().strip()}"
            )
        else:
            self.stdout.write(f"Superuser {username!r} exists (password set elsewhere).")

"""Make sure an admin user exists; say where its password is."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from gpuops.private_files import private_file_write


class Command(BaseCommand):
    help = (
        "Create the 'admin' superuser if missing. Its password comes from GPUOPS_ADMIN_PASSWORD, or is generated, "
        "printed this once and kept in <var>/admin-password (mode 600); later runs print only where it is."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default=os.environ.get("GPUOPS_ADMIN_USER", "admin"))

    def handle(self, *args, username: str, **options) -> None:
        User = get_user_model()
        password_file = settings.VAR_DIR / "admin-password"
        if User.objects.filter(username=username).exists():
            # Never the password again: it lands in terminals, CI logs and journald at every start otherwise.
            where = f"the password in {password_file}" if password_file.exists() else "the password set elsewhere"
            self.stdout.write(f"Log in as {username!r} with {where}.")
            return
        given = os.environ.get("GPUOPS_ADMIN_PASSWORD", "")
        password = given or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email=f"{username}@localhost", password=password)
        if given:
            # The operator chose it and knows it: neither printed nor copied to disk.
            self.stdout.write(f"Created superuser {username!r} with the password from GPUOPS_ADMIN_PASSWORD.")
            return
        private_file_write(password_file, password)
        self.stdout.write(
            f"Created superuser {username!r}. Its password, shown this once and kept in {password_file} "
            f"(readable by its owner only): {password}"
        )

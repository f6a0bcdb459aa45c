"""Hold every LDAP account against the directory between sign-ons (cron or beat: every 15 minutes or so)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = (
        "Deactivate LDAP accounts gone from the directory or in its deny group (their API tokens stop working) and "
        "bring the others' roles and scopes in line with their directory groups."
    )

    def handle(self, *args, **options) -> None:
        if not getattr(settings, "AUTH_LDAP_SERVER_URI", ""):
            raise CommandError("LDAP sign-on is not configured (GPUOPS_LDAP_SERVER_URI is unset)")
        import ldap

        from cmdb.signon.ldap import ldap_accounts_sync

        try:
            result = ldap_accounts_sync()
        except ldap.LDAPError as exc:
            raise CommandError(f"the directory could not be read: {exc}") from exc
        self.stdout.write(
            f"checked {result.checked} LDAP accounts; deactivated {len(result.disabled)}"
            f"{': ' + ', '.join(result.disabled) if result.disabled else ''}; "
            f"grants taken back from {len(result.regranted)}"
        )

"""LDAP / Active Directory sign-on (django-auth-ldap; python-ldap is the optional `ldap` extra).

The directory checks the password and the account (AUTH_LDAP_REQUIRE_GROUP / AUTH_LDAP_DENY_GROUP: a disabled
account is a member of the deny group); the user's directory groups (their `cn`s) then go through the
DirectoryGroupMapping rows at every login.
"""

from __future__ import annotations

import logging
from typing import Any

from django_auth_ldap.backend import LDAPBackend

from ..services.directory import directory_grants_apply

security_log = logging.getLogger("gpuops.security")


class DirectoryLDAPBackend(LDAPBackend):
    """django-auth-ldap's backend, with roles and scopes from the directory group mapping."""

    def get_or_build_user(self, username: str, ldap_user: Any) -> tuple[Any, bool]:
        user, built = super().get_or_build_user(username, ldap_user)
        # A local account (one with a password of its own, such as the break-glass admin) is never taken over by a
        # directory entry of the same name.
        if not built and user.has_usable_password():
            security_log.warning("LDAP sign-on as %s refused: that name is a local account", user.get_username())
            raise ldap_user.AuthenticationFailed("the name belongs to a local account")
        return user, built

    def authenticate_ldap_user(self, ldap_user: Any, password: str) -> Any:
        user = ldap_user.authenticate(password)
        if user is None:
            return None
        # Deactivated in gpuops (by hand, or the user left): the directory saying yes does not bring them back.
        if not user.is_active:
            security_log.info("LDAP sign-on of %s refused: the gpuops account is inactive", user.get_username())
            return None
        directory_grants_apply(user, ldap_user.group_names, source="ldap")
        return user

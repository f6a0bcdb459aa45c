"""LDAP / Active Directory sign-on (django-auth-ldap; python-ldap is the optional `ldap` extra).

The directory checks the password and the account (AUTH_LDAP_REQUIRE_GROUP / AUTH_LDAP_DENY_GROUP: a disabled
account is a member of the deny group); the user's directory groups (their `cn`s) then go through the
DirectoryGroupMapping rows at every login.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django_auth_ldap.backend import LDAPBackend, _LDAPUser

from ..models import DirectoryAccount
from ..services.directory import directory_account_disable, directory_account_may_sign_on, directory_grants_apply

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
        # Deactivated by hand in gpuops: the directory saying yes does not bring them back (one the directory sync
        # disabled is active again).
        if not directory_account_may_sign_on(user):
            security_log.info("LDAP sign-on of %s refused: the gpuops account is inactive", user.get_username())
            return None
        directory_grants_apply(user, ldap_user.group_names, source="ldap")
        return user


@dataclass
class LdapSyncResult:
    checked: int = 0
    disabled: list[str] = field(default_factory=list)
    regranted: list[str] = field(default_factory=list)


def ldap_accounts_sync() -> LdapSyncResult:
    """Between sign-ons, hold every active LDAP account against the directory (`manage.py directory_sync`).

    An account gone from the directory, in GPUOPS_LDAP_DENY_GROUP or out of GPUOPS_LDAP_REQUIRE_GROUP is deactivated
    (its sessions and API tokens stop working; `directory_account_disable`); the others get their roles and scopes
    from their groups now, as at a sign-on. Any LDAP error stops the run before it deactivates anyone more: a
    directory that cannot be read says nothing about who left.
    """
    backend = DirectoryLDAPBackend()
    conf = backend.settings
    deny = conf.DENY_GROUP.lower() if isinstance(conf.DENY_GROUP, str) else None
    require = conf.REQUIRE_GROUP.lower() if isinstance(conf.REQUIRE_GROUP, str) else None
    result = LdapSyncResult()
    accounts = DirectoryAccount.objects.filter(source="ldap", user__is_active=True).select_related("user")
    for account in accounts.order_by("user_id"):
        user = account.user
        ldap_user = _LDAPUser(backend, username=user.get_username())
        result.checked += 1
        # Our own user search: django-auth-ldap's logs an LDAP error and answers "no such user", which would read as
        # "left the company" whenever the directory is down. This one raises (bind and search).
        found = conf.USER_SEARCH.execute(ldap_user.connection, {"user": user.get_username()})
        if len(found) != 1:
            reason = "not in the directory"
        else:
            ldap_user._user_dn, ldap_user._user_attrs = found[0]
            group_dns = {dn.lower() for dn in ldap_user.group_dns}
            if deny and deny in group_dns:
                reason = "in the directory's deny group"
            elif require and require not in group_dns:
                reason = "not in the directory's required group"
            else:
                if directory_grants_apply(user, ldap_user.group_names, source="ldap", sync=True).revoked:
                    result.regranted.append(user.get_username())
                continue
        if directory_account_disable(user, reason=reason):
            result.disabled.append(user.get_username())
    return result

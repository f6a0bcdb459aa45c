"""Sign-on settings from the environment: LDAP / Active Directory (django-auth-ldap) and OpenID Connect
(mozilla-django-oidc). Each is off while its variables are unset; docs/operations.md#sign-on lists them.

The backends themselves live in `cmdb.signon` (they hand the user's directory groups to the grants service).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LDAP_BACKEND = "cmdb.signon.ldap.DirectoryLDAPBackend"
OIDC_BACKEND = "cmdb.signon.oidc.DirectoryOIDCBackend"

# GPUOPS_LDAP_GROUP_TYPE -> django_auth_ldap.config class, and the group objectClass searched by default.
LDAP_GROUP_TYPES = {
    "groupOfNames": ("GroupOfNamesType", "(objectClass=groupOfNames)"),
    "groupOfUniqueNames": ("GroupOfUniqueNamesType", "(objectClass=groupOfUniqueNames)"),
    "posixGroup": ("PosixGroupType", "(objectClass=posixGroup)"),
    "activeDirectory": ("ActiveDirectoryGroupType", "(objectClass=group)"),
    "nestedActiveDirectory": ("NestedActiveDirectoryGroupType", "(objectClass=group)"),
}


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def ldap_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """The AUTH_LDAP_* settings for `env`, or {} when GPUOPS_LDAP_SERVER_URI is unset.

    Imports python-ldap only when LDAP is configured: it is an optional extra (`pip install -e '.[ldap]'`).
    """
    uri = env.get("GPUOPS_LDAP_SERVER_URI", "").strip()
    if not uri:
        return {}
    import ldap
    from django_auth_ldap import config

    group_type = env.get("GPUOPS_LDAP_GROUP_TYPE", "groupOfNames").strip()
    if group_type not in LDAP_GROUP_TYPES:
        raise ValueError(f"GPUOPS_LDAP_GROUP_TYPE must be one of {', '.join(LDAP_GROUP_TYPES)}, not {group_type!r}")
    type_class, default_group_filter = LDAP_GROUP_TYPES[group_type]
    user_base = env.get("GPUOPS_LDAP_USER_SEARCH_BASE", "").strip()
    group_base = env.get("GPUOPS_LDAP_GROUP_SEARCH_BASE", "").strip()
    if not user_base or not group_base:
        raise ValueError("GPUOPS_LDAP_SERVER_URI needs GPUOPS_LDAP_USER_SEARCH_BASE and GPUOPS_LDAP_GROUP_SEARCH_BASE")

    options: dict[int, Any] = {
        ldap.OPT_REFERRALS: 0,  # Active Directory answers searches with referrals a bind cannot follow
        ldap.OPT_NETWORK_TIMEOUT: float(env.get("GPUOPS_LDAP_TIMEOUT_SECONDS", "5")),
        ldap.OPT_TIMEOUT: float(env.get("GPUOPS_LDAP_TIMEOUT_SECONDS", "5")),
    }
    if ca_file := env.get("GPUOPS_LDAP_CA_CERT_FILE", "").strip():
        options[ldap.OPT_X_TLS_CACERTFILE] = ca_file
    options[ldap.OPT_X_TLS_REQUIRE_CERT] = (
        ldap.OPT_X_TLS_DEMAND if _flag(env, "GPUOPS_LDAP_TLS_REQUIRE_CERT", True) else ldap.OPT_X_TLS_NEVER
    )
    # Apply the TLS options to this connection's context (python-ldap keeps them per context).
    options[ldap.OPT_X_TLS_NEWCTX] = 0

    settings: dict[str, Any] = {
        "AUTH_LDAP_SERVER_URI": uri,
        "AUTH_LDAP_BIND_DN": env.get("GPUOPS_LDAP_BIND_DN", ""),
        "AUTH_LDAP_BIND_PASSWORD": env.get("GPUOPS_LDAP_BIND_PASSWORD", ""),
        "AUTH_LDAP_START_TLS": _flag(env, "GPUOPS_LDAP_START_TLS", False),
        "AUTH_LDAP_CONNECTION_OPTIONS": options,
        "AUTH_LDAP_USER_SEARCH": config.LDAPSearch(
            user_base,
            ldap.SCOPE_SUBTREE,
            env.get("GPUOPS_LDAP_USER_SEARCH_FILTER", "").strip() or "(uid=%(user)s)",
        ),
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "AUTH_LDAP_GROUP_SEARCH": config.LDAPSearch(
            group_base,
            ldap.SCOPE_SUBTREE,
            env.get("GPUOPS_LDAP_GROUP_SEARCH_FILTER", "").strip() or default_group_filter,
        ),
        "AUTH_LDAP_GROUP_TYPE": getattr(config, type_class)(name_attr="cn"),
        # Roles and scopes come from cmdb's DirectoryGroupMapping rows, not from mirrored Django groups.
        "AUTH_LDAP_MIRROR_GROUPS": False,
        "AUTH_LDAP_FIND_GROUP_PERMS": False,
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "AUTH_LDAP_CACHE_TIMEOUT": 0,  # a group change counts at the next login
    }
    if require := env.get("GPUOPS_LDAP_REQUIRE_GROUP", "").strip():
        settings["AUTH_LDAP_REQUIRE_GROUP"] = require
    if deny := env.get("GPUOPS_LDAP_DENY_GROUP", "").strip():
        settings["AUTH_LDAP_DENY_GROUP"] = deny
    return settings


def oidc_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """The OIDC_* settings for `env`, or {} when GPUOPS_OIDC_CLIENT_ID is unset."""
    client_id = env.get("GPUOPS_OIDC_CLIENT_ID", "").strip()
    if not client_id:
        return {}
    needed = ["GPUOPS_OIDC_AUTHORIZATION_ENDPOINT", "GPUOPS_OIDC_TOKEN_ENDPOINT", "GPUOPS_OIDC_USERINFO_ENDPOINT"]
    missing = [name for name in needed if not env.get(name, "").strip()]
    if missing:
        raise ValueError(f"GPUOPS_OIDC_CLIENT_ID needs {', '.join(missing)}")
    algo = env.get("GPUOPS_OIDC_SIGN_ALGO", "RS256").strip()
    if algo.startswith(("RS", "ES")) and not env.get("GPUOPS_OIDC_JWKS_ENDPOINT", "").strip():
        raise ValueError(f"GPUOPS_OIDC_SIGN_ALGO={algo} needs GPUOPS_OIDC_JWKS_ENDPOINT")
    return {
        "GPUOPS_OIDC_ENABLED": True,
        "OIDC_RP_CLIENT_ID": client_id,
        "OIDC_RP_CLIENT_SECRET": env.get("GPUOPS_OIDC_CLIENT_SECRET", ""),
        "OIDC_OP_AUTHORIZATION_ENDPOINT": env["GPUOPS_OIDC_AUTHORIZATION_ENDPOINT"].strip(),
        "OIDC_OP_TOKEN_ENDPOINT": env["GPUOPS_OIDC_TOKEN_ENDPOINT"].strip(),
        "OIDC_OP_USER_ENDPOINT": env["GPUOPS_OIDC_USERINFO_ENDPOINT"].strip(),
        "OIDC_OP_JWKS_ENDPOINT": env.get("GPUOPS_OIDC_JWKS_ENDPOINT", "").strip() or None,
        "OIDC_RP_SIGN_ALGO": algo,
        "OIDC_RP_SCOPES": env.get("GPUOPS_OIDC_SCOPES", "openid email profile groups"),
        "OIDC_USE_PKCE": _flag(env, "GPUOPS_OIDC_USE_PKCE", True),
        "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc_authentication_callback",
        "OIDC_TIMEOUT": float(env.get("GPUOPS_OIDC_TIMEOUT_SECONDS", "10")),
        # The claim that names the gpuops user and the one that lists the user's directory groups.
        "GPUOPS_OIDC_USERNAME_CLAIM": env.get("GPUOPS_OIDC_USERNAME_CLAIM", "preferred_username"),
        "GPUOPS_OIDC_GROUPS_CLAIM": env.get("GPUOPS_OIDC_GROUPS_CLAIM", "groups"),
        # The ID token's `iss` must equal this when set (the provider's issuer URL).
        "GPUOPS_OIDC_ISSUER": env.get("GPUOPS_OIDC_ISSUER", "").strip(),
        "GPUOPS_OIDC_PROVIDER_NAME": env.get("GPUOPS_OIDC_PROVIDER_NAME", "single sign-on"),
        "LOGIN_REDIRECT_URL_FAILURE": "/accounts/login/?sso=failed",
    }


def backends(ldap_on: bool, oidc_on: bool) -> list[str]:
    """AUTHENTICATION_BACKENDS: local accounts always (a break-glass admin), then the directories that are on."""
    found = ["django.contrib.auth.backends.ModelBackend"]
    if ldap_on:
        found.append(LDAP_BACKEND)
    if oidc_on:
        found.append(OIDC_BACKEND)
    found.append("guardian.backends.ObjectPermissionBackend")
    return found

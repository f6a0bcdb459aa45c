"""Sign-on settings from the environment: off when unset, a clear error when half set."""

from __future__ import annotations

import pytest

from gpuops.signon import LDAP_BACKEND, OIDC_BACKEND, backends, ldap_settings, oidc_settings

OIDC_ENV = {
    "GPUOPS_OIDC_CLIENT_ID": "gpuops",
    "GPUOPS_OIDC_AUTHORIZATION_ENDPOINT": "https://idp/auth",
    "GPUOPS_OIDC_TOKEN_ENDPOINT": "https://idp/token",
    "GPUOPS_OIDC_USERINFO_ENDPOINT": "https://idp/userinfo",
    "GPUOPS_OIDC_JWKS_ENDPOINT": "https://idp/jwks",
}


def test_both_are_off_when_unset_and_local_accounts_always_work():
    assert ldap_settings({}) == {} and oidc_settings({}) == {}
    assert backends(ldap_on=False, oidc_on=False) == [
        "django.contrib.auth.backends.ModelBackend",
        "guardian.backends.ObjectPermissionBackend",
    ]
    assert backends(ldap_on=True, oidc_on=True)[1:3] == [LDAP_BACKEND, OIDC_BACKEND]


def test_oidc_settings_and_what_is_missing():
    settings = oidc_settings(OIDC_ENV)
    assert settings["GPUOPS_OIDC_ENABLED"] and settings["OIDC_RP_SIGN_ALGO"] == "RS256"
    assert settings["OIDC_OP_JWKS_ENDPOINT"] == "https://idp/jwks" and settings["GPUOPS_OIDC_GROUPS_CLAIM"] == "groups"
    with pytest.raises(ValueError, match="GPUOPS_OIDC_TOKEN_ENDPOINT"):
        oidc_settings({k: v for k, v in OIDC_ENV.items() if k != "GPUOPS_OIDC_TOKEN_ENDPOINT"})
    with pytest.raises(ValueError, match="needs GPUOPS_OIDC_JWKS_ENDPOINT"):
        oidc_settings({k: v for k, v in OIDC_ENV.items() if k != "GPUOPS_OIDC_JWKS_ENDPOINT"})


def test_ldap_settings_for_active_directory_over_starttls():
    ldap = pytest.importorskip("ldap", reason="python-ldap is not installed (pip install -e '.[ldap]')")
    settings = ldap_settings(
        {
            "GPUOPS_LDAP_SERVER_URI": "ldap://dc1.corp.example",
            "GPUOPS_LDAP_USER_SEARCH_BASE": "ou=people,dc=corp",
            "GPUOPS_LDAP_USER_SEARCH_FILTER": "(sAMAccountName=%(user)s)",
            "GPUOPS_LDAP_GROUP_SEARCH_BASE": "ou=groups,dc=corp",
            "GPUOPS_LDAP_GROUP_TYPE": "nestedActiveDirectory",
            "GPUOPS_LDAP_START_TLS": "true",
            "GPUOPS_LDAP_CA_CERT_FILE": "/etc/ssl/corp-ca.pem",
        }
    )
    assert settings["AUTH_LDAP_START_TLS"] is True
    assert type(settings["AUTH_LDAP_GROUP_TYPE"]).__name__ == "NestedActiveDirectoryGroupType"
    assert settings["AUTH_LDAP_USER_SEARCH"].filterstr == "(sAMAccountName=%(user)s)"
    assert settings["AUTH_LDAP_GROUP_SEARCH"].filterstr == "(objectClass=group)"
    options = settings["AUTH_LDAP_CONNECTION_OPTIONS"]
    assert options[ldap.OPT_X_TLS_CACERTFILE] == "/etc/ssl/corp-ca.pem"
    assert options[ldap.OPT_X_TLS_REQUIRE_CERT] == ldap.OPT_X_TLS_DEMAND
    with pytest.raises(ValueError, match="GPUOPS_LDAP_GROUP_TYPE"):
        ldap_settings({"GPUOPS_LDAP_SERVER_URI": "ldap://x", "GPUOPS_LDAP_GROUP_TYPE": "nis"})
    with pytest.raises(ValueError, match="USER_SEARCH_BASE"):
        ldap_settings({"GPUOPS_LDAP_SERVER_URI": "ldap://x"})

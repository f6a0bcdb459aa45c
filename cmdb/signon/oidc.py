"""OpenID Connect sign-on (mozilla-django-oidc): Keycloak, Azure AD, Feishu or any provider with the
authorization-code flow. The user is named by GPUOPS_OIDC_USERNAME_CLAIM (default `preferred_username`); the
list in GPUOPS_OIDC_GROUPS_CLAIM (default `groups`) goes through the DirectoryGroupMapping rows at every login.
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from ..services.directory import directory_account_may_sign_on, directory_grants_apply

security_log = logging.getLogger("gpuops.security")


def claim_groups(claims: dict[str, Any], name: str) -> list[str]:
    """The directory groups in claim `name`: a list of strings, or one string (some providers send one group so)."""
    value = claims.get(name)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


class DirectoryOIDCBackend(OIDCAuthenticationBackend):
    """Users found and created by the username claim (not by e-mail, which providers let people change)."""

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        # A bad token (signature, audience, issuer, expiry, nonce) is a failed sign-on, not a 400/500 page.
        try:
            return super().authenticate(request, **kwargs)
        except SuspiciousOperation as exc:
            security_log.warning("OIDC sign-on refused: %s", exc)
            return None

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """The ID token's signature, algorithm, expiry, audience (our client id) and, when set, issuer."""
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"ID token algorithm {header.get('alg')!r} is not {self.OIDC_RP_SIGN_ALGO}")
        issuer = getattr(settings, "GPUOPS_OIDC_ISSUER", "") or None
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=issuer,
                options={"require": ["exp", "iat", "aud"]},
                leeway=30,
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"ID token refused: {exc}") from exc

    def _username(self, claims: dict[str, Any]) -> str:
        value = claims.get(settings.GPUOPS_OIDC_USERNAME_CLAIM)
        return value.strip() if isinstance(value, str) else ""

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(self._username(claims))

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        users = self.UserModel.objects.filter(username__iexact=self._username(claims))
        # A local account (one with a password of its own, such as the break-glass admin) is never taken over by a
        # provider's user of the same name.
        if any(user.has_usable_password() for user in users):
            raise SuspiciousOperation(f"{self._username(claims)!r} is a local account")
        return users

    def create_user(self, claims: dict[str, Any]) -> Any:
        user = self.UserModel(username=self._username(claims))
        user.set_unusable_password()  # signs in through the provider only
        self._copy_claims(user, claims)
        user.save()
        return self._apply(user, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        if not directory_account_may_sign_on(user):
            security_log.info("OIDC sign-on of %s refused: the gpuops account is inactive", user.get_username())
            return None
        self._copy_claims(user, claims)
        user.save(update_fields=["email", "first_name", "last_name"])
        return self._apply(user, claims)

    @staticmethod
    def _copy_claims(user: Any, claims: dict[str, Any]) -> None:
        for field, claim in (("email", "email"), ("first_name", "given_name"), ("last_name", "family_name")):
            value = claims.get(claim)
            if isinstance(value, str):
                setattr(user, field, value[:150])

    def _apply(self, user: Any, claims: dict[str, Any]) -> Any:
        directory_grants_apply(user, claim_groups(claims, settings.GPUOPS_OIDC_GROUPS_CLAIM), source="oidc")
        return user


def _enabled() -> None:
    if not getattr(settings, "GPUOPS_OIDC_ENABLED", False):
        raise Http404("OpenID Connect sign-on is not configured")


def oidc_login(request: HttpRequest) -> HttpResponse:
    """Start the authorization-code flow (a redirect to the provider); 404 while OIDC is off."""
    _enabled()
    return OIDCAuthenticationRequestView.as_view()(request)


def oidc_callback(request: HttpRequest) -> HttpResponse:
    """The provider's redirect back: code for tokens, the ID token's signature checked, the user signed in."""
    _enabled()
    return OIDCAuthenticationCallbackView.as_view()(request)

"""The login page: local and LDAP accounts by password, and a link to the OpenID Connect provider when it is on."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views


class LoginView(auth_views.LoginView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        if getattr(settings, "GPUOPS_OIDC_ENABLED", False):
            context["oidc_provider"] = getattr(settings, "GPUOPS_OIDC_PROVIDER_NAME", "single sign-on")
        context["sso_failed"] = self.request.GET.get("sso") == "failed"
        return context

"""OpenID Connect sign-on URLs (mounted under accounts/oidc/; 404 while GPUOPS_OIDC_CLIENT_ID is unset)."""

from django.urls import path

from .oidc import oidc_callback, oidc_login

urlpatterns = [
    path("authenticate/", oidc_login, name="oidc_authentication_init"),
    path("callback/", oidc_callback, name="oidc_authentication_callback"),
]

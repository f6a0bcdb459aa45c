"""Everything under /api/: one include per app, plus the schema and docs."""

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from .api.django_errors import api_not_found


class JsonErrorsMixin:
    """The schema view renders YAML by default; its errors (401) are the JSON envelope like everywhere else."""

    def finalize_response(self, request: Request, response: HttpResponse, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        if response.status_code >= 400 and isinstance(response, Response):
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = "application/json"
        return response


class AuthenticatedSchemaView(JsonErrorsMixin, SpectacularAPIView):
    """The OpenAPI schema, for authenticated users (SPECTACULAR_SETTINGS SERVE_PERMISSIONS)."""


class LoginRequiredSwaggerView(JsonErrorsMixin, SpectacularSwaggerView):
    """Swagger UI for people: without a login the browser is sent to the login page (and back), not a 401."""

    def handle_exception(self, exc: Exception) -> HttpResponse:
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)


urlpatterns = [
    path("schema/", AuthenticatedSchemaView.as_view(), name="schema"),
    path("docs/", LoginRequiredSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("cmdb/", include("cmdb.api.urls")),
    path("agent/", include("inventory_agents.urls")),
    path("workflows/", include("workflows.api_urls")),
    path("rollouts/", include("workflows.rollouts.api_urls")),
    path("integrations/", include("integrations.urls")),
    re_path(r"^.*$", api_not_found),  # last: an unknown /api/ path is a JSON 404, never Django's HTML page
]

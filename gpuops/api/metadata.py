"""OPTIONS responses for the API bases."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.metadata import SimpleMetadata
from rest_framework.request import Request, clone_request


class ApiMetadata(SimpleMetadata):
    """SimpleMetadata that knows PUT on a list route is a bulk update (DRF would look up one object for it)."""

    def determine_actions(self, request: Request, view: Any) -> dict[str, Any]:
        actions: dict[str, Any] = {}
        methods = {"PUT", "POST"} & set(view.allowed_methods)
        if not getattr(view, "detail", False):
            methods.discard("PUT")  # a list of rows, each shaped like POST's body
        for method in sorted(methods):
            view.request = clone_request(request, method)
            try:
                view.check_permissions(view.request)
                if method == "PUT":
                    view.get_object()
            except (exceptions.APIException, PermissionDenied, Http404):
                continue
            else:
                actions[method] = self.get_serializer_info(view.get_serializer())
            finally:
                view.request = request
        return actions

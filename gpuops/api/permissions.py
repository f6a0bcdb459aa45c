"""DRF permission class for the API bases: authentication required, write checks delegated to the view.

Reads are never refused here: the view's queryset is already restricted to what the user may see, so an
object outside the user's grants is a 404 (its existence is not confirmed). Writes are refused with 403 when
the user may see the object but not change it, or holds no write grant at all for the model.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

WRITE_ACTIONS = {"POST": "add", "PUT": "change", "PATCH": "change", "DELETE": "delete"}


class ObjectWritePermission(BasePermission):
    """Delegates to `view.may_write_any(request, action)` and `view.may_write(request, obj, action)`."""

    message = "You do not have permission to perform this action."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return False
        if request.method in SAFE_METHODS:
            return True
        action = WRITE_ACTIONS.get(request.method or "", "change")
        if action == "add" and getattr(view, "detail", False):
            action = "change"  # POST to an object's action endpoint (cordon) changes that object
        return bool(view.may_write_any(request, action))

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        action = WRITE_ACTIONS.get(request.method or "", "change")
        if action == "add":  # POST to an object's action endpoint changes that object
            action = "change"
        return bool(view.may_write(request, obj, action))

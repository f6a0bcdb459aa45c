"""Per-user API tokens: obtain (with username + password, or as the logged-in user), rotate, revoke.

Tokens can also be created by an administrator in the admin (Auth Token -> Tokens) or with
`python manage.py drf_create_token <username>`.
"""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from gpuops.api.viewsets import ApiViewMixin


class TokenObtainThrottle(AnonRateThrottle):
    """Password guessing protection: per client address, whoever the caller claims to be."""

    scope = "token_obtain"
    rate = "30/min"

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(required=False, help_text="Omit both to get the token of the logged-in user.")
    password = serializers.CharField(required=False, style={"input_type": "password"}, trim_whitespace=False)
    rotate = serializers.BooleanField(default=False, help_text="Replace the existing token with a new one.")


class TokenResponseSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as `Authorization: Token <token>`.")
    username = serializers.CharField()


class TokenView(ApiViewMixin, APIView):
    permission_classes = [AllowAny]
    throttle_classes = [TokenObtainThrottle]

    @extend_schema(
        request=TokenRequestSerializer,
        responses=TokenResponseSerializer,
        tags=["auth"],
        operation_id="cmdb_auth_token_create",
    )
    def post(self, request: Request) -> Response:
        body = TokenRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        username, password = body.validated_data.get("username"), body.validated_data.get("password")
        if username is not None or password is not None:
            user = authenticate(request._request, username=username or "", password=password or "")
            if user is None or not user.is_active:
                raise exceptions.AuthenticationFailed("Wrong username or password.")
        elif request.user and request.user.is_authenticated:
            user = request.user
        else:
            raise exceptions.NotAuthenticated("Send username and password, or log in first.")
        with transaction.atomic():
            if body.validated_data["rotate"]:
                Token.objects.filter(user=user).delete()
            token, _ = Token.objects.get_or_create(user=user)
        return Response({"token": token.key, "username": user.get_username()}, status=status.HTTP_200_OK)

    @extend_schema(request=None, responses={204: None}, tags=["auth"], operation_id="cmdb_auth_token_destroy")
    def delete(self, request: Request) -> Response:
        if not (request.user and request.user.is_authenticated):
            raise exceptions.NotAuthenticated()
        Token.objects.filter(user=request.user).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)

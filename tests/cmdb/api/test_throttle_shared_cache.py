"""The token-login throttle counts in a cache every web process shares (30/min overall, not 30 per worker)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.cache import caches
from rest_framework.test import APIRequestFactory

from cmdb.api.views.auth import TokenObtainThrottle, TokenView

pytestmark = pytest.mark.django_db


def _throttle_with_own_cache_client() -> TokenObtainThrottle:
    """A throttle whose cache is a fresh backend instance: what a second web process would hold."""
    throttle = TokenObtainThrottle()
    throttle.cache = caches.create_connection("default")
    return throttle


def test_default_cache_is_shared_not_per_process():
    backend = settings.CACHES["default"]["BACKEND"]
    assert not backend.endswith("LocMemCache")
    assert backend.endswith(("DatabaseCache", "RedisCache"))


def test_two_processes_share_one_login_count():
    first, second = _throttle_with_own_cache_client(), _throttle_with_own_cache_client()
    assert first.cache is not second.cache
    first.cache.clear()
    request = APIRequestFactory().post("/api/auth/token/", REMOTE_ADDR="198.51.100.7")
    view = TokenView()
    for _ in range(15):
        assert first.allow_request(request, view)
        assert second.allow_request(request, view)
    # 30 attempts spread over two processes: both now refuse (a per-process count would allow 30 more each).
    assert not first.allow_request(request, view)
    assert not second.allow_request(request, view)
    first.cache.clear()


def test_redis_cache_from_the_environment(monkeypatch):
    import importlib

    import gpuops.settings as module

    monkeypatch.setenv("CACHE_URL", "redis://127.0.0.1:6379/5")
    try:
        reloaded = importlib.reload(module)
        assert reloaded.CACHES["default"] == {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:6379/5",
        }
    finally:
        monkeypatch.delenv("CACHE_URL")
        importlib.reload(module)

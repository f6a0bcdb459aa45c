"""The Celery app. Workers: `celery -A gpuops worker -Q default,ingest,workflows,integrations`."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuops.settings")

app = Celery("gpuops")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

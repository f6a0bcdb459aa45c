"""The Celery app. Workers: `celery -A gpuops worker -Q default,ingest,workflows,integrations`."""

from __future__ import annotations

import os

from celery import Celery

from .logs import celery_signals_connect

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuops.settings")

app = Celery("gpuops")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# One log line per task run, and the publisher's correlation id carried to the task (gpuops/logs.py).
celery_signals_connect()

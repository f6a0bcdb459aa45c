# gpuops image: web, Celery workers and beat all run from it (deploy/docker-compose.yml; docs/operations.md).
# The Python the suite runs on.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GPUOPS_VAR_DIR=/var/lib/gpuops \
    GPUOPS_STATIC_ROOT=/app/static

RUN useradd --system --home-dir /var/lib/gpuops --shell /usr/sbin/nologin gpuops \
    && mkdir -p /var/lib/gpuops \
    && chown gpuops:gpuops /var/lib/gpuops

WORKDIR /app
# Dependencies first (a layer that changes only with pyproject.toml), then the code.
COPY pyproject.toml README.md ./
RUN mkdir -p gpuops cmdb workflows integrations inventory_agents console \
    && pip install . \
    && pip uninstall -y gpuops
COPY . .
# Editable: settings find templates/ and docs beside the code (BASE_DIR is the source tree).
RUN pip install --no-deps -e .
# Static files belong to the image (GPUOPS_STATIC_ROOT, outside the var volume), so an upgrade brings its own.
# A throw-away key: collectstatic needs settings, not a secret.
RUN SECRET_KEY=collectstatic-only GPUOPS_VAR_DIR=/tmp/gpuops-build python manage.py collectstatic --noinput -v0 \
    && rm -rf /tmp/gpuops-build

USER gpuops
EXPOSE 8000
ENV GPUOPS_BIND=0.0.0.0:8000
CMD ["gunicorn", "-c", "python:gpuops.gunicorn_conf"]

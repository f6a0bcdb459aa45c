"""The OpenAPI schema of the procurement and warehouse APIs is valid and free of generator warnings."""

from __future__ import annotations

from django.urls import include, path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema


def test_schema_is_valid_and_warning_free():
    GENERATOR_STATS.reset()
    generator = SchemaGenerator(
        patterns=[
            path("api/integrations/procurement/", include("integrations.procurement.urls")),
            path("api/integrations/warehouse/", include("integrations.warehouse.urls")),
        ]
    )
    schema = generator.get_schema(request=None, public=True)
    assert dict(GENERATOR_STATS._warn_cache) == {} and dict(GENERATOR_STATS._error_cache) == {}
    validate_schema(schema)
    paths = schema["paths"]
    for expected in (
        "/api/integrations/procurement/requests/{id}/approve/",
        "/api/integrations/warehouse/movements/",
        "/api/integrations/warehouse/overview/",
        "/api/integrations/warehouse/reservations/{id}/issue/",
        "/api/integrations/warehouse/minimum-stock/{id}/",
    ):
        assert expected in paths, expected

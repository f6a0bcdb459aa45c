"""CMDB API views: model endpoints (inventory), the fleet summary and API tokens."""

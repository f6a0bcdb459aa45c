"""REST API of the workflows app (mounted at /api/workflows/ by workflows/api_urls.py)."""

"""One module per group of pages; each owns its `urlpatterns` (console.urls joins them)."""

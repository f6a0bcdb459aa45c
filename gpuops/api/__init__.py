"""Cross-cutting REST API bases shared by every app's API: the base viewset, pagination, the error handler and
its JSON shape, permission plumbing, ETags and the OpenAPI schema class.

Nothing here knows about a particular app; apps plug their permission rules and write paths in through the
hooks of `gpuops.api.viewsets.BaseModelViewSet`.
"""

"""Procurement services (the writes): requests and approvals, PO placement, receiving, event handling."""

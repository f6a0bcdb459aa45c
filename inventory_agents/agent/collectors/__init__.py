"""One collector per tool. Each takes a Source and returns a report fragment: a dict with any of the report's
list keys (accelerators, nics, infiniband, lldp_neighbors, pci_devices, software, collector_errors), `system`
(a partial dict) or `xid_events`. A collector raises on output it cannot parse; report.py turns that into a
collector_errors entry and keeps nothing of that collector, so a report is never half-built.
"""

from __future__ import annotations

from typing import Any, Dict

Fragment = Dict[str, Any]
